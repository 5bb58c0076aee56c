"""The runner's apps as A2A agents, driven by the official a2a-sdk's gRPC client.

adk-server runs an agents file with three apps on mock models: `echo` answers at once,
`booking` asks the client to confirm (a client tool: input-required), and `lookup` calls
an HTTP tool served here that answers only when the test releases it (a run that is
still working while the test disconnects, re-subscribes or cancels).
"""
from __future__ import annotations

import asyncio
import http.server
import json
import threading
import time
import urllib.request
from pathlib import Path
from typing import Iterator, List

import grpc
import pytest
from a2a.client import ClientConfig, ClientFactory
from a2a.client.errors import A2AClientError
from a2a.types import a2a_pb2 as a2a

from conftest import COMMON, Process, binary, free_port

AGENTS = """
models:
  echo:
    provider: mock
    model: mock
  booking_script:
    provider: mock
    model: mock-booking
    mock:
      turns:
        - function_calls:
            - name: confirm_booking
              args: {{ hotel: "Hotel Sakura", nights: 2 }}
        - text: "Booked: 2 nights at Hotel Sakura."
      when_exhausted: echo
      per_conversation: true
  lookup_script:
    provider: mock
    model: mock-lookup
    mock:
      turns:
        - function_calls:
            - name: slow_lookup
              args: {{ q: "tides" }}
        - text: "Looked it up."
      when_exhausted: echo
      per_conversation: true
tools:
  confirm_booking:
    kind: client
    description: Asks the user to confirm a booking.
    parameters:
      type: object
      properties:
        hotel: {{ type: string }}
        nights: {{ type: integer }}
  slow_lookup:
    kind: http
    url: http://127.0.0.1:{port}/lookup
    timeout_secs: 60
    description: Looks something up, slowly.
    parameters:
      type: object
      properties:
        q: {{ type: string }}
apps:
  echo:
    root_agent:
      name: echo_agent
      description: Repeats what it is told.
      model: echo
  booking:
    root_agent:
      name: booker
      description: Books hotels after the user confirms.
      model: booking_script
      tools: [confirm_booking]
  lookup:
    root_agent:
      name: looker
      description: Looks things up.
      model: lookup_script
      tools: [slow_lookup]
"""


class Gate:
    """The slow tool's HTTP server: each request waits until the test opens the gate."""

    def __init__(self) -> None:
        self.arrived = threading.Event()
        self.released = threading.Event()
        gate = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                self.rfile.read(int(self.headers.get("content-length", 0)))
                gate.arrived.set()
                gate.released.wait(60)
                body = json.dumps({"answer": "high tide at noon"}).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def reset(self) -> None:
        self.arrived.clear()
        self.released.clear()


class Server:
    def __init__(self, grpc_address: str, http_port: int, gate: Gate) -> None:
        self.grpc_address, self.http_port, self.gate = grpc_address, http_port, gate


@pytest.fixture(scope="module")
def a2a_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    logs = tmp_path_factory.mktemp("a2a")
    gate = Gate()
    agents = logs / "agents.yaml"
    agents.write_text(AGENTS.format(port=gate.port))
    # The cards are served on the HTTP (metrics) port, which conftest turns off: on here.
    http_port, port = free_port(), free_port()
    proc = Process("adk-server", [str(binary("adk-server")), "--agents", str(agents), *COMMON,
                                  "--listen", f"127.0.0.1:{port}"], port, logs,
                   env={"ADK_METRICS_LISTEN": f"127.0.0.1:{http_port}"})
    proc.wait_listening()
    try:
        yield Server(proc.address, http_port, gate)
    finally:
        gate.released.set()
        proc.stop()
        gate.server.shutdown()


def run(coro):  # one event loop per test
    return asyncio.run(coro)


async def client_for(server: Server, app: str):
    config = ClientConfig(
        grpc_channel_factory=lambda url: grpc.aio.insecure_channel(url),
        supported_protocol_bindings=["GRPC"],
        streaming=True,
    )
    return await ClientFactory(config).create_from_url(f"http://127.0.0.1:{server.http_port}/{app}")


def user_message(text: str, **ids: str) -> a2a.SendMessageRequest:
    message = a2a.Message(message_id=f"m-{time.monotonic_ns()}", role=a2a.ROLE_USER,
                          parts=[a2a.Part(text=text)], **ids)
    return a2a.SendMessageRequest(message=message)


def texts(message: a2a.Message) -> List[str]:
    return [part.text for part in message.parts if part.WhichOneof("content") == "text"]


def test_agent_card_over_http_and_grpc(a2a_server: Server) -> None:
    raw = urllib.request.urlopen(f"http://127.0.0.1:{a2a_server.http_port}/booking/.well-known/agent-card.json")
    card = json.loads(raw.read())
    assert card["name"] == "booking"
    assert card["description"] == "Books hotels after the user confirms."
    assert card["capabilities"]["streaming"] is True
    assert card["supportedInterfaces"][0]["protocolBinding"] == "GRPC"
    assert card["supportedInterfaces"][0]["tenant"] == "booking"
    assert any("confirm_booking" in skill["tags"] for skill in card["skills"])

    async def extended() -> a2a.AgentCard:
        client = await client_for(a2a_server, "booking")
        return await client.get_extended_agent_card(a2a.GetExtendedAgentCardRequest())

    card = run(extended())
    assert card.name == "booking"
    assert card.supported_interfaces[0].url == a2a_server.grpc_address
    assert [skill.id for skill in card.skills] == ["booker"]


def test_send_and_stream(a2a_server: Server) -> None:
    async def scenario():
        client = await client_for(a2a_server, "echo")
        events = [event async for event in client.send_message(user_message("hello there"))]
        return client, events

    client, events = run(scenario())
    first = events[0]
    assert first.HasField("task"), events
    task_id, context_id = first.task.id, first.task.context_id
    final = events[-1].status_update
    assert final.status.state == a2a.TASK_STATE_COMPLETED, events
    assert any("You said: hello there" in " ".join(texts(e.status_update.status.message))
               for e in events if e.HasField("status_update")), events

    async def read_back():
        client = await client_for(a2a_server, "echo")
        task = await client.get_task(a2a.GetTaskRequest(id=task_id))
        listed = await client.list_tasks(a2a.ListTasksRequest(context_id=context_id))
        # The same context again: the session goes on.
        again = [e async for e in client.send_message(user_message("and again", context_id=context_id))]
        return task, listed, again

    task, listed, again = run(read_back())
    assert task.status.state == a2a.TASK_STATE_COMPLETED
    assert [texts(m) for m in task.history][0] == ["hello there"]
    assert [t.id for t in listed.tasks] == [task_id]
    assert again[0].task.context_id == context_id and again[0].task.id != task_id
    assert again[-1].status_update.status.state == a2a.TASK_STATE_COMPLETED


def test_input_required_then_resume(a2a_server: Server) -> None:
    async def scenario():
        client = await client_for(a2a_server, "booking")
        first = [e async for e in client.send_message(user_message("Book Hotel Sakura"))]
        task = first[0].task
        waiting = first[-1].status_update.status
        answer = user_message('{"confirmed": true}', task_id=task.id, context_id=task.context_id)
        resumed = [e async for e in client.send_message(answer)]
        stored = await client.get_task(a2a.GetTaskRequest(id=task.id))
        return waiting, resumed, stored, task.id

    waiting, resumed, stored, task_id = run(scenario())
    assert waiting.state == a2a.TASK_STATE_INPUT_REQUIRED
    call = waiting.message.parts[0]
    assert call.WhichOneof("content") == "data" and call.metadata["adk_type"] == "function_call"
    assert resumed[0].task.id == task_id
    assert resumed[-1].status_update.status.state == a2a.TASK_STATE_COMPLETED
    assert "Booked: 2 nights at Hotel Sakura." in texts(resumed[-1].status_update.status.message)
    assert stored.status.state == a2a.TASK_STATE_COMPLETED


def test_cancel_an_input_required_task(a2a_server: Server) -> None:
    # A2A allows canceling any task not in a terminal state; input-required is not one.
    async def scenario():
        client = await client_for(a2a_server, "booking")
        first = [e async for e in client.send_message(user_message("Book Hotel Sakura"))]
        task = first[0].task
        waiting = first[-1].status_update.status
        cancelled = await client.cancel_task(a2a.CancelTaskRequest(id=task.id))
        stored = await client.get_task(a2a.GetTaskRequest(id=task.id))
        with pytest.raises(A2AClientError) as again:  # canceled is terminal
            await client.cancel_task(a2a.CancelTaskRequest(id=task.id))
        with pytest.raises(A2AClientError) as answer:  # and takes no answer
            [e async for e in client.send_message(user_message("yes", task_id=task.id))]
        return waiting, cancelled, stored, str(again.value), str(answer.value)

    waiting, cancelled, stored, again, answer = run(scenario())
    assert waiting.state == a2a.TASK_STATE_INPUT_REQUIRED
    assert cancelled.status.state == a2a.TASK_STATE_CANCELED
    assert stored.status.state == a2a.TASK_STATE_CANCELED
    assert "FAILED_PRECONDITION" in again and "TASK_STATE_CANCELED" in again, again
    assert "FAILED_PRECONDITION" in answer, answer


def test_subscribe_after_a_disconnect(a2a_server: Server) -> None:
    gate = a2a_server.gate
    gate.reset()

    async def scenario():
        client = await client_for(a2a_server, "lookup")
        stream = client.send_message(user_message("when is high tide?"))
        first = await stream.__anext__()
        await stream.aclose()  # the client goes away while the tool call is running
        await asyncio.get_running_loop().run_in_executor(None, gate.arrived.wait, 30)
        client = await client_for(a2a_server, "lookup")
        resubscribed = client.subscribe(a2a.SubscribeToTaskRequest(id=first.task.id))
        snapshot = await resubscribed.__anext__()
        gate.released.set()
        rest = [e async for e in resubscribed]
        return first.task.id, snapshot, rest

    task_id, snapshot, rest = run(scenario())
    assert snapshot.task.id == task_id
    assert snapshot.task.status.state == a2a.TASK_STATE_WORKING
    assert rest[-1].status_update.status.state == a2a.TASK_STATE_COMPLETED, rest
    assert "Looked it up." in texts(rest[-1].status_update.status.message)


def test_cancel(a2a_server: Server) -> None:
    gate = a2a_server.gate
    gate.reset()

    async def scenario():
        client = await client_for(a2a_server, "lookup")
        request = user_message("look it up")
        request.configuration.return_immediately = True
        client._config.streaming = False  # a plain SendMessage that returns at once
        [response] = [e async for e in client.send_message(request)]
        await asyncio.get_running_loop().run_in_executor(None, gate.arrived.wait, 30)
        cancelled = await client.cancel_task(a2a.CancelTaskRequest(id=response.task.id))
        gate.released.set()
        again = await client.get_task(a2a.GetTaskRequest(id=response.task.id))
        return cancelled, again

    cancelled, again = run(scenario())
    assert cancelled.status.state == a2a.TASK_STATE_CANCELED
    assert again.status.state == a2a.TASK_STATE_CANCELED
