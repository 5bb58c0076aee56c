"""Records each conformance case on ADK Python itself.

For every case directory (an ADK agent-config directory with a `script.json`), this runs
the conversation of the script with ADK's Runner and InMemorySessionService, the agent
loaded from the directory as `adk web` / `adk run` load it, against a local fake Gemini
endpoint (google-genai reads GOOGLE_GEMINI_BASE_URL) that answers the scripted replies in
order (a reply naming an `agent` answers that agent's next request: the branches of a
ParallelAgent ask in no set order) and keeps every request body exactly as ADK sent it. It writes `recording.json`
beside the script: per turn the user's message, the requests with the replies they got,
then the session ADK stored (its events dumped by alias, without None).

Run with the test venv's Python (scripts/setup-python.sh makes it):

    ~/.cache/adk/python-venv/bin/python tests/conformance/record.py [case ...]

Without arguments every case is recorded. See docs/adk-conformance.md.
"""

from __future__ import annotations

import asyncio
import base64
import importlib
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

HERE = Path(__file__).resolve().parent
APP_USER = "conformance-user"
SESSION_ID = "conformance-session"
MODEL_VERSION = "gemini-2.5-flash-001"
# ADK's identity line, in every LLM agent's system instruction: who is asking.
IDENTITY = re.compile(r'Your internal name is "([^"]*)"')
# The header by which a request names the inline files ADK's Gemini model sent as text.
INLINE_FILES_HEADER = "x-conformance-inline-files"


def note_inline_files_sent_as_text() -> None:
    """Has each Gemini request name, in a header, the parts ADK's Gemini model turned from
    an inline file into a text (a file the Gemini API does not take inline: see
    `Gemini._preprocess_request`), each with the part as it was.

    ADK's LiteLlm gets the files as they were, so openai_reference.py, which rebuilds each
    request from the recorded Gemini body, puts them back first. The header is not part of
    the body, so what is recorded for the Gemini wire is unchanged.
    """
    from google.adk.models.google_llm import Gemini
    from google.genai import types

    sent_as_is = Gemini._preprocess_request

    async def preprocess(self, llm_request) -> None:
        def dumped(part) -> dict:
            return part.model_dump(mode="json", by_alias=True, exclude_none=True)

        before = [[dumped(part) for part in content.parts or []] for content in llm_request.contents]
        await sent_as_is(self, llm_request)
        changed = [
            {"content": i, "part": j, "was": before[i][j]}
            for i, content in enumerate(llm_request.contents)
            for j, part in enumerate(content.parts or [])
            if "inlineData" in before[i][j] and part.inline_data is None
        ]
        if changed:
            options = llm_request.config.http_options or types.HttpOptions()
            options.headers = {**(options.headers or {}), INLINE_FILES_HEADER: json.dumps(changed)}
            llm_request.config.http_options = options

    Gemini._preprocess_request = preprocess


def requesting_agent(request: dict) -> str | None:
    """The agent a Gemini request is from, by the identity line of its system instruction."""
    parts = (request.get("systemInstruction") or {}).get("parts") or []
    found = IDENTITY.search("".join(p.get("text", "") for p in parts))
    return found.group(1) if found else None


def gemini_part(scripted: dict) -> dict:
    """One part of a scripted reply: a text or an `inline_data` file (`mime_type`, base64
    `data`, an optional `display_name`), either a thought with `"thought": true`, or a call."""
    if "inline_data" in scripted:
        inline = scripted["inline_data"]
        blob = {"mimeType": inline["mime_type"], "data": inline["data"]}
        if "display_name" in inline:
            blob["displayName"] = inline["display_name"]
        part = {"inlineData": blob}
    elif "text" in scripted:
        part = {"text": scripted["text"]}
    else:
        return {"functionCall": {"name": scripted["call"], "args": scripted.get("args", {})}}
    if scripted.get("thought"):
        part["thought"] = True
    return part


def gemini_reply(scripted: dict) -> dict:
    """The Gemini generateContent reply for one scripted reply: a text, a function call, or
    `"parts"`, a list of those (several calls at once, a thought before a text)."""
    parts = [gemini_part(part) for part in scripted.get("parts", [scripted])]
    return {
        "candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}],
        "usageMetadata": {"promptTokenCount": 9, "candidatesTokenCount": 4, "totalTokenCount": 13},
        "modelVersion": MODEL_VERSION,
    }


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def with_mcp_http_server(case: Path, work: Path) -> tuple[Path, subprocess.Popen | None]:
    """The directory to load for `case`, and its HTTP MCP server if it has one.

    A case with `http_server.py` talks to it over streamable HTTP: the server is started
    on a free port, and the case is loaded from a copy (named as the case) whose YAML has
    the port in place of `MCP_HTTP_PORT`, so the recording never holds the port.
    """
    script = case / "http_server.py"
    if not script.exists():
        return case, None
    port = free_port()
    server = subprocess.Popen([sys.executable, str(script), str(port)])
    deadline = time.monotonic() + 30
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            if time.monotonic() > deadline:
                server.kill()
                raise SystemExit(f"{case.name}: its MCP server did not listen on {port} within 30 s")
        # Between tries, wait on the server itself: this returns at once if it exits.
        try:
            code = server.wait(timeout=0.1)
        except subprocess.TimeoutExpired:
            continue
        raise SystemExit(f"{case.name}: its MCP server exited ({code}) before listening on {port}")
    copy = work / case.name
    shutil.copytree(case, copy)
    for yaml in copy.glob("*.yaml"):
        yaml.write_text(yaml.read_text().replace("MCP_HTTP_PORT", str(port)))
    return copy, server


class FakeGemini:
    """A Gemini endpoint answering queued replies and keeping each request.

    Each queued reply is `(agent, reply)`: a reply naming an agent answers that agent's
    first request after it is queued, one naming none the first request no named reply
    is for (so a script without names is answered in order, as ever).
    """

    def __init__(self) -> None:
        self.replies: list[tuple[str | None, dict]] = []
        self.exchanges: list[dict] = []
        self.lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                body = self.rfile.read(int(self.headers.get("content-length", "0")))
                request = json.loads(body)
                inline_files = self.headers.get(INLINE_FILES_HEADER)
                agent = requesting_agent(request)
                with fake.lock:
                    chosen = next((i for i, (a, _) in enumerate(fake.replies) if a is not None and a == agent), None)
                    if chosen is None:
                        chosen = next((i for i, (a, _) in enumerate(fake.replies) if a is None), None)
                    if chosen is None:
                        fake.exchanges.append({"path": self.path, "request": request, "reply": None})
                    else:
                        named, reply = fake.replies.pop(chosen)
                        exchange = {"path": self.path, "request": request, "reply": reply}
                        if inline_files:
                            exchange["inline_files"] = json.loads(inline_files)
                        if named is not None:
                            exchange["agent"] = named
                        fake.exchanges.append(exchange)
                if chosen is None:
                    # Say who asked, so a script can be written for what ADK asks next.
                    print(f"no reply left for {agent!r}: {json.dumps(request.get('contents', [])[-3:])}", file=sys.stderr)
                    self.send_response(500)
                    self.end_headers()
                    self.wfile.write(b'{"error": {"code": 500, "message": "script has no reply left"}}')
                    return
                data = json.dumps(reply).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"


async def record(case: Path, fake: FakeGemini, config_dir: Path) -> dict:
    from google.adk.agents import config_agent_utils
    from google.adk.agents.run_config import RunConfig
    from google.adk.artifacts import InMemoryArtifactService
    from google.adk.memory import InMemoryMemoryService
    from google.adk.runners import Runner
    from google.adk.events import Event
    from google.adk.sessions import InMemorySessionService, Session
    from google.genai import types

    script = json.loads((case / "script.json").read_text())
    sessions = InMemorySessionService()
    app_name = case.name
    # Memory and artifacts as adk-server serves them (empty at the start but for what the
    # script seeds), for the built-in tools and the Python code that use them.
    services = {
        "session_service": sessions,
        "memory_service": InMemoryMemoryService(),
        "artifact_service": InMemoryArtifactService(),
    }
    if (case / "agent.py").exists():
        # A case whose ADK side needs an App (settings no agent-config YAML has, such as
        # resumability): `<case>/agent.py`'s `app`, named as the case.
        app = importlib.import_module(f"{case.name}.agent").app
        runner = Runner(app=app, app_name=app_name, **services)
    else:
        agent = config_agent_utils.from_config(str(config_dir / "root_agent.yaml"))
        runner = Runner(app_name=app_name, agent=agent, **services)
    await sessions.create_session(app_name=app_name, user_id=APP_USER, session_id=SESSION_ID)
    # The session's files before the first turn (`artifacts` of the script: name to text).
    artifacts = script.get("artifacts", {})
    for name, text in artifacts.items():
        await runner.artifact_service.save_artifact(
            app_name=app_name,
            user_id=APP_USER,
            session_id=SESSION_ID,
            filename=name,
            artifact=types.Part(text=text),
        )
    # The user's memories before the first turn (`memory` of the script): an earlier
    # session's events, each of its own invocation, added as ADK adds a session.
    memory = script.get("memory", [])
    if memory:
        earlier = Session(
            id="earlier-session",
            app_name=app_name,
            user_id=APP_USER,
            events=[
                Event(
                    id=m["id"],
                    invocation_id=f"{m['id']}-invocation",
                    author=m["author"],
                    timestamp=m["timestamp"],
                    content=types.Content(
                        role="user" if m["author"] == "user" else "model", parts=[types.Part(text=m["text"])]
                    ),
                )
                for m in memory
            ],
        )
        await runner.memory_service.add_session_to_memory(earlier)
    # The script's `run_config` (ADK's RunConfig fields, e.g. include_thoughts_from_other_agents),
    # every turn run with it; the replay sends the same in its Run requests.
    run_config = script.get("run_config")
    turns = []
    for turn in script["turns"]:
        fake.replies = [(r.get("agent"), gemini_reply(r)) for r in turn["replies"]]
        fake.exchanges = []
        # A turn's `inline_data` (mime_type, base64 data) follows its text in the user's message.
        # A `function_response` turn (`name`, `response`, or a list of them) is the
        # client's answer to the latest call of that name (k answers of one name: that
        # name's latest k calls, in order), its id read from ADK's session (the replay
        # reads the runner's); a `user` text beside it follows the answers.
        parts = []
        if "function_response" in turn:
            parts = await answers_to_latest_calls(sessions, app_name, turn["function_response"])
        if "user" in turn:
            parts.append(types.Part(text=turn["user"]))
        if "inline_data" in turn:
            inline = turn["inline_data"]
            blob = types.Blob(mime_type=inline["mime_type"], data=base64.b64decode(inline["data"]))
            parts.append(types.Part(inline_data=blob))
        message = types.Content(role="user", parts=parts)
        # A turn marked `refused` is one ADK refuses with a `ValueError`: its text is
        # recorded, and the replay expects the runner's INVALID_ARGUMENT to carry it.
        refused = None
        try:
            async for _ in runner.run_async(
                user_id=APP_USER, session_id=SESSION_ID, new_message=message, run_config=RunConfig(**(run_config or {}))
            ):
                pass
        except ValueError as error:
            if not turn.get("refused"):
                raise
            refused = str(error)
        if turn.get("refused") and refused is None:
            raise SystemExit(f"{case.name}: ADK took a turn the script says it refuses")
        if fake.replies:
            raise SystemExit(f"{case.name}: ADK left {len(fake.replies)} scripted replies unused")
        if any(e["reply"] is None for e in fake.exchanges):
            raise SystemExit(f"{case.name}: ADK asked for more replies than the script has")
        said = {key: turn[key] for key in ("function_response", "user", "inline_data") if key in turn}
        turns.append({**said, **({"refused": refused} if refused else {}), "exchanges": fake.exchanges})
    session = await sessions.get_session(app_name=app_name, user_id=APP_USER, session_id=SESSION_ID)
    events = [e.model_dump(mode="json", by_alias=True, exclude_none=True) for e in session.events]
    return {
        "adk_version": __import__("google.adk", fromlist=["__version__"]).__version__,
        "app_name": app_name,
        "user_id": APP_USER,
        "session_id": SESSION_ID,
        "artifacts": artifacts,
        "memory": memory,
        **({"run_config": run_config} if run_config else {}),
        "turns": turns,
        "session": {"state": session.state, "events": events},
    }


async def answers_to_latest_calls(sessions, app_name: str, answers) -> list:
    """The parts answering the session's latest calls: each answer (`name`, `response`; one
    or a list) answers a call of its name, the k answers of a name that name's latest k
    calls in order."""
    from google.genai import types

    answers = answers if isinstance(answers, list) else [answers]
    session = await sessions.get_session(app_name=app_name, user_id=APP_USER, session_id=SESSION_ID)
    parts = []
    for k, answer in enumerate(answers):
        name = answer["name"]
        calls = [c for e in session.events for c in e.get_function_calls() if c.name == name]
        of_name = sum(1 for a in answers if a["name"] == name)
        earlier = sum(1 for a in answers[:k] if a["name"] == name)
        if len(calls) < of_name:
            raise SystemExit(f"{app_name}: {of_name} answers of {name}, {len(calls)} calls")
        call = calls[len(calls) - of_name + earlier]
        response = types.FunctionResponse(id=call.id, name=name, response=answer["response"])
        parts.append(types.Part(function_response=response))
    return parts


def main() -> None:
    fake = FakeGemini()
    os.environ["GOOGLE_GEMINI_BASE_URL"] = fake.url
    os.environ["GOOGLE_API_KEY"] = "conformance-key"
    os.environ.pop("GOOGLE_GENAI_USE_VERTEXAI", None)
    # ADK starts a stdio MCP server named in YAML only when told the configs are trusted.
    os.environ["ADK_ALLOW_CONFIG_STDIO_MCP_SERVERS"] = "1"
    # A case's MCP server runs as `python <path>`: this venv's Python (it has `mcp`), the
    # path read from tests/, where cargo runs the replay.
    os.environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
    note_inline_files_sent_as_text()
    os.chdir(HERE.parent)
    # As `adk web`: the directory of the apps is on sys.path, so a case's YAML names its
    # Python functions `<case>.tools.<function>`.
    sys.path.insert(0, str(HERE))
    names = sys.argv[1:] or sorted(p.parent.name for p in HERE.glob("*/script.json"))
    for name in names:
        case = HERE / name
        with tempfile.TemporaryDirectory() as work:
            config_dir, mcp_server = with_mcp_http_server(case, Path(work))
            try:
                recording = asyncio.run(record(case, fake, config_dir))
            finally:
                if mcp_server is not None:
                    mcp_server.terminate()
                    mcp_server.wait()
        (case / "recording.json").write_text(json.dumps(recording, indent=1, ensure_ascii=False) + "\n")
        requests = sum(len(t["exchanges"]) for t in recording["turns"])
        print(f"{name}: {requests} requests, {len(recording['session']['events'])} events")


if __name__ == "__main__":
    main()
