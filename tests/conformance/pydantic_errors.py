"""Writes pydantic_errors.json: pydantic's own `ValidationError` text for values that miss
a schema, with the schema's JSON Schema as pydantic writes it, the table the agents crate's
`PydanticClass` is checked against (its errors must read as pydantic's, word for word).

Run with the test venv's Python (the pydantic ADK 2.13 is recorded with):
    ~/.cache/adk/python-venv/bin/python tests/conformance/pydantic_errors.py
"""

import json
import pathlib
from enum import Enum
from typing import Literal, Optional, Union

from google.adk.agents.llm.task._task_models import _DefaultTaskOutput
from pydantic import BaseModel, ConfigDict, TypeAdapter, ValidationError


class Leg(BaseModel):
    to: str
    hours: float


class Kind(str, Enum):
    table = "table"
    room = "room"


class Probe(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    guests: int = 1
    hours: float = 1.0
    quiet: bool = False
    legs: list[Leg] = []
    tags: dict[str, int] = {}
    kind: Kind = Kind.table
    seat: Literal["in", "out"] = "in"
    note: Optional[str] = None
    choice: Union[int, Leg, None] = None


CASES = [
    (_DefaultTaskOutput, {"summary": "A table for four."}),
    (_DefaultTaskOutput, {"result": 3}),
    (_DefaultTaskOutput, {}),
    (_DefaultTaskOutput, "done"),
    (Probe, {}),
    (Probe, {"name": 3, "x": 1, "guests": "four"}),
    (Probe, {"name": "a", "guests": 3.5, "hours": "x", "quiet": 2, "legs": {"a": 1}, "tags": [1],
             "kind": "boat", "seat": "up", "note": 5}),
    (Probe, {"name": "a", "legs": [{"to": 1}, "x"], "tags": {"a": "b"}, "guests": [1], "hours": [], "quiet": []}),
    (Probe, {"name": {"k": "v" * 100}}),
    (Probe, {"name": None, "quiet": 0.5, "guests": 1e20}),
    (Probe, {"name": "it's", "x": 1.0, "y": 1e20, "z": [None, True]}),
    (Probe, {"name": "a", "choice": "x"}),
    (Probe, [1]),
    (Probe, None),
    (int, "a" * 48),
    (int, "a" * 49),
    (int, "é" * 60),
    (dict[str, int], {"a": "x"}),
    (dict[str, list[int]], {"a": [1, "x"]}),
    (str, 3),
    (list[Leg], [{"to": "a"}]),
    (list[Leg], "x"),
    (Literal["a"], "b"),
    (Literal["a", "b", "c"], "d"),
    (Optional[Leg], "x"),
    (Union[int, str], [1]),
    (Union[list[int], str], 5),
]


def main() -> None:
    table = []
    for schema, value in CASES:
        adapter = TypeAdapter(schema)
        try:
            adapter.validate_python(value)
        except ValidationError as e:
            table.append({"schema": adapter.json_schema(), "input": value, "error": str(e)})
        else:
            raise SystemExit(f"{schema!r} takes {value!r}: no error to compare")
    out = pathlib.Path(__file__).with_name("pydantic_errors.json")
    out.write_text(json.dumps(table, indent=1, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
