"""ADK's own server on this suite, with no code: `adk api_server
--session_service_uri=adk-grpc://… --artifact_service_uri=adk-grpc://…` on an agents dir
whose services.yaml registers the scheme (ADK 2.13's registry: services.yaml or
services.py next to the agents; it reads no entry points). A run over its HTTP API lands
in the suite, read back over gRPC."""
from __future__ import annotations

import json
import sys
import time
import urllib.request
from pathlib import Path
from typing import Iterator, Tuple

import grpc
import pytest

from adk_app import RECEIPT, REPLY
from adk_client.v1 import artifact_pb2, artifact_pb2_grpc, session_pb2, session_pb2_grpc
from conftest import COMMON, Process, free_port, start

TESTS = Path(__file__).resolve().parent

#: What a user writes next to their agents (README, "Use it from ADK Python").
SERVICES_YAML = """\
services:
  - scheme: adk-grpc
    type: session
    class: adk_client.adk.GrpcSessionService
  - scheme: adk-grpc
    type: artifact
    class: adk_client.adk.GrpcArtifactService
"""


def agents_dir(root: Path) -> Path:
    """An agents dir with one app, ``trip`` (adk_app.py's agents), and services.yaml."""
    (root / "trip").mkdir(parents=True)
    (root / "trip" / "__init__.py").write_text("from . import agent\n")
    (root / "trip" / "agent.py").write_text("from adk_app import build_agent\n\nroot_agent = build_agent()\n")
    (root / "services.yaml").write_text(SERVICES_YAML)
    return root


def http(method: str, url: str, body: object) -> object:
    request = urllib.request.Request(url, data=json.dumps(body).encode(), method=method,
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=60) as reply:
        return json.loads(reply.read())


@pytest.fixture(scope="module")
def adk_api_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Tuple[str, str]]:
    """adk-server (in-memory store), and ADK's api_server storing in it: (grpc, http)."""
    logs = tmp_path_factory.mktemp("adk-cli")
    suite = start("adk-server", COMMON, logs)
    agents = agents_dir(tmp_path_factory.mktemp("agents"))
    port = free_port()
    adk = Path(sys.executable).parent / "adk"
    uri = f"adk-grpc://{suite.address}"
    api = Process("adk-api-server", [str(adk), "api_server", "--host", "127.0.0.1", "--port", str(port),
                                     f"--session_service_uri={uri}", f"--artifact_service_uri={uri}",
                                     str(agents)], port, logs)
    # The agents import adk_app.py (this directory), and adk_client from src/.
    try:
        api.wait_listening(timeout=60)
        yield suite.address, f"http://127.0.0.1:{port}"
    finally:
        api.stop()
        suite.stop()


@pytest.fixture(autouse=True, scope="module")
def _agents_import_path() -> Iterator[None]:
    # conftest's Process passes os.environ on: the api_server finds adk_app and adk_client.
    import os

    old = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(TESTS), str(TESTS.parent / "src"), old) if p)
    yield
    if old is None:
        del os.environ["PYTHONPATH"]
    else:
        os.environ["PYTHONPATH"] = old


def test_adk_api_server_stores_runs_in_the_suite(adk_api_server: Tuple[str, str]) -> None:
    grpc_address, base = adk_api_server
    app, user, sid = "trip", "bob", f"s-{int(time.time() * 1000)}"
    created = http("POST", f"{base}/apps/{app}/users/{user}/sessions/{sid}", {"user:name": "Bob"})
    assert created["id"] == sid
    events = http("POST", f"{base}/run", {
        "app_name": app, "user_id": user, "session_id": sid,
        "new_message": {"role": "user", "parts": [{"text": "Book 2 nights"}]},
    })
    assert events[-1]["content"]["parts"][0]["text"] == REPLY

    with grpc.insecure_channel(grpc_address) as channel:
        session = session_pb2_grpc.SessionServiceStub(channel).GetSession(
            session_pb2.GetSessionRequest(app_name=app, user_id=user, session_id=sid))
        assert [e.id for e in session.events[1:]] == [e["id"] for e in events]
        assert session.events[-1].content.parts[0].text == REPLY
        assert session.state["user:name"] == "Bob" and session.state["booking_summary"] == REPLY
        receipt = artifact_pb2_grpc.ArtifactServiceStub(channel).LoadArtifact(artifact_pb2.LoadArtifactRequest(
            ref=artifact_pb2.ArtifactRef(app_name=app, user_id=user, session_id=sid, file_name=RECEIPT)))
        assert receipt.version == 1 and receipt.part.text == "2 nights at Hotel Sakura"

    # ADK's HTTP API reads the session back from the suite, too.
    with urllib.request.urlopen(f"{base}/apps/{app}/users/{user}/sessions/{sid}", timeout=30) as reply:
        read_back = json.loads(reply.read())
    assert [e["id"] for e in read_back["events"][1:]] == [e["id"] for e in events]
