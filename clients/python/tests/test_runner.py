"""The runner from the clients, against real servers: runs yielding typed events, client
tools answered by run_with_tools (sync, and async with a coroutine), and Cancel stopping an
invocation that is busy in a slow tool (a real HTTP server the test holds up)."""
from __future__ import annotations

import asyncio
import json
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Iterator, List, Tuple

import pytest

from adk_client import AdkClient, AsyncAdkClient, Event, FunctionCall, errors

from conftest import COMMON, Deployment, start


def uid(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def test_run_with_tools_answers_client_tools_until_the_agent_is_done(adk: AdkClient) -> None:
    user = uid("alice")
    asked: List[Tuple[str, Any]] = []

    def confirm(call: FunctionCall, event: Event) -> Any:
        asked.append((call.name, call.args))
        assert event.author == "booker"
        return {"confirmed": True}

    events = list(
        adk.run_with_tools("trip_planner", user, "trip", "Two nights at Hotel Sakura", confirm, create_session=True)
    )
    assert asked == [("confirm_booking", {"hotel": "Hotel Sakura", "nights": 2})]
    assert [e.text for e in events if e.text][-1] == "Booked: 2 nights at Hotel Sakura."
    assert events[-1].author == "planner", "the sequence went on after the answer, and ended"
    answers = [e for e in events if e.function_responses]
    assert [r.response for e in answers for r in e.function_responses] == [{"confirmed": True}]
    assert adk.get_session("trip_planner", user, "trip").state["booking"] == "Booked: 2 nights at Hotel Sakura."


def test_async_run_streams_typed_events_and_answers_client_tools(deployment: Deployment) -> None:
    async def scenario() -> None:
        user = uid("alice")
        async with AsyncAdkClient(deployment.sessions, runner_target=deployment.runner) as adk:
            events = [
                e
                async for e in adk.run(
                    "assistant", user, "chat", "Hello, agent!", streaming=True, create_session=True,
                    state_delta={"user:name": "Alice"},
                )
            ]
            assert (events[0].author, events[0].sequence, events[0].text) == ("user", 1, "Hello, agent!")
            partial = [e for e in events if e.partial]
            assert len(partial) >= 2 and all(e.sequence == 0 for e in partial)
            assert "".join(e.text for e in partial) == events[-1].text == "You said: Hello, agent!"
            assert events[-1].state_delta == {"last_reply": "You said: Hello, agent!"}

            async def confirm(call: FunctionCall, event: Event) -> Any:
                await asyncio.sleep(0)  # a coroutine answer is awaited
                return {"confirmed": call.args == {"hotel": "Hotel Sakura", "nights": 2}}

            booked = [
                e async for e in adk.run_with_tools(
                    "trip_planner", user, "trip", "Two nights at Hotel Sakura", confirm, create_session=True
                )
            ]
            assert [e.text for e in booked if e.text][-1] == "Booked: 2 nights at Hotel Sakura."
            with pytest.raises(errors.AppNotFound):
                [e async for e in adk.run("no_such_app", user, "s", "hi", create_session=True)]

    asyncio.run(scenario())


class _SlowTool(BaseHTTPRequestHandler):
    """An HTTP tool that answers only once the test lets it (or after 30 s)."""

    called = threading.Event()
    release = threading.Event()

    def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
        self.rfile.read(int(self.headers.get("content-length", 0)))
        type(self).called.set()
        type(self).release.wait(30)
        body = json.dumps({"result": "slow"}).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def slow_app(tmp_path: Path) -> Iterator[str]:
    """adk-server with an app whose agent calls a tool that takes as long as the test wants."""
    _SlowTool.called.clear()
    _SlowTool.release.clear()
    http = ThreadingHTTPServer(("127.0.0.1", 0), _SlowTool)
    threading.Thread(target=http.serve_forever, daemon=True).start()
    agents = tmp_path / "agents.yaml"
    agents.write_text(
        f"""
models:
  slow_script:
    provider: mock
    model: mock-slow
    mock:
      turns:
        - function_calls: [{{ name: slow_lookup, args: {{ q: x }} }}]
        - text: done
      when_exhausted: echo
      per_conversation: true
tools:
  slow_lookup:
    kind: http
    url: http://127.0.0.1:{http.server_address[1]}/slow
    timeout_secs: 60
    description: A lookup that takes its time.
    parameters: {{ type: object, properties: {{ q: {{ type: string }} }} }}
apps:
  slow:
    root_agent:
      name: slow
      model: slow_script
      tools: [slow_lookup]
"""
    )
    server = start("adk-server", ["--agents", str(agents), *COMMON], tmp_path)
    try:
        yield server.address
    finally:
        _SlowTool.release.set()
        server.stop()
        http.shutdown()


def test_cancel_stops_a_running_invocation(slow_app: str) -> None:
    user = uid("alice")
    with AdkClient(slow_app) as adk:
        # keep_running: the invocation goes on without this stream, so only Cancel stops it.
        events = adk.run("slow", user, "s", "look it up", create_session=True, keep_running=True)
        invocation = next(events).invocation_id
        assert _SlowTool.called.wait(10), "the agent called the slow tool"
        events.close()
        assert adk.cancel("slow", user, "s", invocation) is True
        # The next run asks for the lookup again: its request leaves out the cancelled,
        # unanswered call (as ADK's does), so the script starts over. Answered at once now:
        # were the cancelled invocation still running, it would finish first, saying "done".
        _SlowTool.release.set()

        # Stopped: a run queued behind it (on_busy="enqueue") goes ahead, and the cancelled
        # invocation never finished its turn.
        after = list(adk.run("slow", user, "s", "again", on_busy="enqueue", timeout=20))
        assert after[-1].invocation_id != invocation
        texts = [e.text for e in adk.get_session("slow", user, "s").events if e.invocation_id == invocation]
        assert "done" not in texts
        assert adk.cancel("slow", user, "s", invocation) is False
