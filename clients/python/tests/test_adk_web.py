"""ADK's dev UI on this suite: `adk web --session_service_uri=adk-grpc://…
--artifact_service_uri=adk-grpc://…` (services.yaml registers the scheme), driven in headless
Chromium by Playwright (tests/adk-web/drive-dev-ui.js): send a message, see the reply, reload
the page and see the conversation again, open it on a second `adk web` that never saw it, and
find the same session with those events in the suite over gRPC.

Needs the system `chromium` and playwright-core from npm, which scripts/setup-adk-web.sh
installs (scripts/test-clients.sh runs it); without them the test fails, naming that script.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Dict, Iterator, List

import grpc
import pytest

from adk_app import RECEIPT, REPLY
from adk_client.v1 import artifact_pb2, artifact_pb2_grpc, session_pb2, session_pb2_grpc
from conftest import COMMON, REPO, Process, free_port, start
from test_adk_cli import _agents_import_path, agents_dir  # noqa: F401 (a fixture, used by pytest)

DRIVER = REPO / "tests" / "adk-web" / "drive-dev-ui.js"
SETUP = "scripts/setup-adk-web.sh"
MESSAGE = "Book 2 nights"


def chromium() -> str:
    path = os.environ.get("ADK_CHROMIUM") or shutil.which("chromium")
    if not path:
        pytest.fail(f"chromium not found (nor $ADK_CHROMIUM): run {SETUP}")
    return path


def playwright_dir() -> Path:
    default = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "adk" / "adk-web-node"
    node_dir = Path(os.environ.get("ADK_WEB_NODE_DIR", default))
    if not (node_dir / "node_modules" / "playwright-core").is_dir():
        pytest.fail(f"playwright-core is not installed in {node_dir}: run {SETUP}")
    return node_dir


@pytest.fixture(scope="module")
def dev_uis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dict[str, str]]:
    """adk-server (in-memory store) and two `adk web` processes storing in it."""
    logs = tmp_path_factory.mktemp("adk-web")
    agents = agents_dir(tmp_path_factory.mktemp("agents"))
    # A fresh HOME: the UI's telemetry question, whose answer ADK keeps in ~/.adk, is always
    # asked (the driver answers it once; the second process reads that answer), and the
    # user's own ~/.adk is left alone.
    home = {"HOME": str(tmp_path_factory.mktemp("home"))}
    suite = start("adk-server", COMMON, logs)
    uri = f"adk-grpc://{suite.address}"
    webs: List[Process] = []
    try:
        for _ in range(2):
            port = free_port()
            webs.append(Process("adk-web", [
                str(Path(sys.executable).parent / "adk"), "web", "--host", "127.0.0.1", "--port", str(port),
                "--no-reload", f"--session_service_uri={uri}", f"--artifact_service_uri={uri}", str(agents),
            ], port, logs, env=home))
        for web in webs:
            web.wait_listening(timeout=90)
        yield {"grpc": suite.address, "web": f"http://{webs[0].address}", "otherWeb": f"http://{webs[1].address}"}
    finally:
        for web in webs:
            web.stop()
        suite.stop()


def test_adk_web_dev_ui_shows_the_suites_session_after_reload(dev_uis: Dict[str, str]) -> None:
    options = {"chromium": chromium(), "web": dev_uis["web"], "otherWeb": dev_uis["otherWeb"],
               "app": "trip", "message": MESSAGE, "reply": REPLY}
    driven = subprocess.run(["node", str(DRIVER), json.dumps(options)], capture_output=True, text=True,
                            timeout=300, env={**os.environ, "ADK_WEB_NODE_DIR": str(playwright_dir())})
    assert driven.returncode == 0, f"the dev UI could not be driven:\n{driven.stdout}\n{driven.stderr}"
    ui = json.loads(driven.stdout.strip().splitlines()[-1])

    # What the browser showed after sending, after reloading, and on the other adk web.
    assert ui["sent"]["user"] == [MESSAGE]
    assert ui["reloaded"] == ui["sent"]
    assert ui["elsewhere"] == ui["sent"]

    # The suite holds that session, with the conversation the UI showed: the user's message,
    # the reply, and in between the receipt the tool saved (the UI shows an artifact's text
    # inline, loaded through the artifact service: from the suite).
    with grpc.insecure_channel(dev_uis["grpc"]) as channel:
        session = session_pb2_grpc.SessionServiceStub(channel).GetSession(
            session_pb2.GetSessionRequest(app_name="trip", user_id=ui["userId"], session_id=ui["sessionId"]))
        receipt = artifact_pb2_grpc.ArtifactServiceStub(channel).LoadArtifact(artifact_pb2.LoadArtifactRequest(
            ref=artifact_pb2.ArtifactRef(app_name="trip", user_id=ui["userId"], session_id=ui["sessionId"],
                                         file_name=RECEIPT)))

    def texts(by_user: bool) -> List[str]:
        return ["".join(p.text for p in e.content.parts) for e in session.events
                if (e.author == "user") == by_user and any(p.text for p in e.content.parts)]

    assert texts(by_user=True) == [MESSAGE]
    assert texts(by_user=False) == [REPLY]
    assert receipt.part.text == "2 nights at Hotel Sakura"
    assert ui["sent"]["bot"] == [receipt.part.text, REPLY]
    assert session.state["booking_summary"] == REPLY
