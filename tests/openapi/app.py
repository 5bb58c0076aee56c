"""A REST API written with FastAPI as its users write one, serving the OpenAPI spec
FastAPI generates at /openapi.json: the runner's `kind: openapi` tools are built from
that spec and call the operations (tests/tests/e2e/openapi.rs).

Each call is recorded as one JSON line in the --calls file:
{"path": <the path, decoded>, "body": {"raw_path", "method", "query", "headers", "json"}},
so the test reads exactly what the runner sent. /bad-openapi.json is a spec with a
$ref into another document, which the runner must refuse at start.
"""

import argparse
import json
from typing import Optional

import uvicorn
from fastapi import FastAPI, Header, HTTPException, Request
from pydantic import BaseModel

app = FastAPI(title="pets", version="1")
CALLS = None

# The request headers the test asserts on.
RECORDED_HEADERS = ("x-api-key", "x-tenant", "content-type", "cookie")


async def record(request: Request) -> None:
    raw = await request.body()
    entry = {
        "path": request.scope["path"],
        "body": {
            "raw_path": request.scope["raw_path"].decode(),
            "method": request.method,
            "query": [[k, v] for k, v in request.query_params.multi_items()],
            "headers": {k: v for k, v in request.headers.items() if k in RECORDED_HEADERS},
            "json": json.loads(raw) if raw else None,
        },
    }
    with open(CALLS, "a", encoding="utf-8") as calls:
        calls.write(json.dumps(entry) + "\n")


class NewPet(BaseModel):
    name: str
    species: str = "dog"
    tags: list[str] = []


@app.get("/pets/{pet_id}", operation_id="getPet", summary="Reads one pet by its id.")
async def get_pet(
    pet_id: str,
    request: Request,
    verbose: bool = False,
    x_tenant: Optional[str] = Header(default=None),
):
    await record(request)
    if pet_id == "missing":
        raise HTTPException(status_code=404, detail="no such pet")
    return {"id": pet_id, "name": "Rex", "verbose": verbose, "tenant": x_tenant}


@app.post("/pets", operation_id="addPet", summary="Adds a pet.", status_code=201)
async def add_pet(pet: NewPet, request: Request):
    await record(request)
    return {"id": "p-2", **pet.model_dump()}


@app.get("/bad-openapi.json", include_in_schema=False)
async def bad_spec():
    return {
        "openapi": "3.1.0",
        "info": {"title": "bad", "version": "1"},
        "paths": {
            "/pets": {
                "post": {
                    "operationId": "addPet",
                    "requestBody": {
                        "content": {
                            "application/json": {"schema": {"$ref": "pets.yaml#/Pet"}}
                        }
                    },
                    "responses": {"200": {"description": "ok"}},
                }
            }
        },
    }


def main() -> None:
    global CALLS
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--calls", required=True)
    args = parser.parse_args()
    CALLS = args.calls
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
