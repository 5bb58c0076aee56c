"""ADK's memory on this suite: ``GrpcMemoryService`` (ADK's ``BaseMemoryService`` over
``adk.v1.MemoryService``) under a real ADK ``Runner`` with ADK's own ``load_memory`` tool,
on adk-server with its in-memory store and with a real redis-server; and the
``adk-grpc://`` memory URI through ADK's service registry."""
from __future__ import annotations

import asyncio
import http.server
import json
import threading
import uuid
from typing import AsyncGenerator, Iterator, List

import pytest
from google.adk.agents import LlmAgent
from google.adk.errors.input_validation_error import InputValidationError
from google.adk.memory.memory_entry import MemoryEntry
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.runners import Runner
from google.adk.tools import load_memory
from google.genai import types

from adk_client.adk import GrpcMemoryService, GrpcSessionService
from conftest import COMMON, start, start_redis

FACT = "My locker code is 4711."


class RecallingLlm(BaseLlm):
    """Calls ``load_memory`` once per turn, then answers; records every request."""

    requests: List[LlmRequest] = []

    async def generate_content_async(self, llm_request: LlmRequest, stream: bool = False
                                     ) -> AsyncGenerator[LlmResponse, None]:
        self.requests.append(llm_request)
        last = llm_request.contents[-1].parts[-1] if llm_request.contents else None
        if last is not None and last.function_response is not None:
            yield LlmResponse(content=types.Content(role="model", parts=[types.Part(text="Done.")]))
        else:
            call = types.FunctionCall(name="load_memory", args={"query": "locker code"})
            yield LlmResponse(content=types.Content(role="model", parts=[types.Part(function_call=call)]))


@pytest.fixture(scope="module", params=["memory", "redis"])
def server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """An adk-server on its in-memory store, or on a real redis-server."""
    logs = tmp_path_factory.mktemp(f"adk-memory-{request.param}")
    procs = []
    try:
        store = []
        if request.param == "redis":
            redis = start_redis(logs)
            procs.append(redis)
            store = ["--store-url", f"redis://{redis.address}"]
        server = start("adk-server", [*store, *COMMON], logs)
        procs.append(server)
        yield server.address
    finally:
        for proc in reversed(procs):
            proc.stop()


async def _turn(runner: Runner, user: str, session_id: str, text: str) -> None:
    message = types.Content(role="user", parts=[types.Part(text=text)])
    async for _ in runner.run_async(user_id=user, session_id=session_id, new_message=message):
        pass


def test_an_adk_runner_recalls_an_earlier_session_through_the_suites_memory(server: str) -> None:
    app = f"adk-mem-{uuid.uuid4().hex[:8]}"
    model = RecallingLlm(model="recalling")
    model.requests = []

    async def scenario():
        sessions, memory = GrpcSessionService(f"adk-grpc://{server}"), GrpcMemoryService(f"adk-grpc://{server}")
        agent = LlmAgent(name="keeper", model=model, instruction="Answer from memory.", tools=[load_memory])
        runner = Runner(agent=agent, app_name=app, session_service=sessions, memory_service=memory)
        # Session 1: the fact is told, and the session goes to memory (ADK's call).
        first = await sessions.create_session(app_name=app, user_id="alice", session_id="s1")
        await sessions.append_event(first, _user_event(FACT))
        await memory.add_session_to_memory(await sessions.get_session(app_name=app, user_id="alice",
                                                                      session_id="s1"))
        await memory.add_session_to_memory(await sessions.get_session(app_name=app, user_id="alice",
                                                                      session_id="s1"))
        found = await memory.search_memory(app_name=app, user_id="alice", query="locker")
        # Session 2 of alice, and bob's: the model calls load_memory.
        for user in ("alice", "bob"):
            await sessions.create_session(app_name=app, user_id=user, session_id="s2")
            await _turn(runner, user, "s2", "What is my locker code?")
        return found

    found = asyncio.run(scenario())
    assert [m.content.parts[0].text for m in found.memories] == [FACT], "added twice, remembered once"
    assert found.memories[0].author == "user" and found.memories[0].timestamp
    tool_results = [str(r.contents[-1].parts[-1].function_response.response) for r in model.requests
                    if r.contents[-1].parts[-1].function_response is not None]
    assert len(tool_results) == 2
    assert "4711" in tool_results[0], tool_results[0]
    assert "4711" not in tool_results[1], "bob never sees alice's memories"


def _user_event(text: str):
    from google.adk.events import Event

    return Event(author="user", invocation_id="e-1",
                 content=types.Content(role="user", parts=[types.Part(text=text)]))


def test_add_memory_delete_and_bad_input(server: str) -> None:
    app = f"adk-mem-{uuid.uuid4().hex[:8]}"

    async def scenario():
        memory = GrpcMemoryService(target=server)
        entry = MemoryEntry(id="m1", author="user", timestamp="2026-01-02T03:04:05+00:00",
                            content=types.Content(role="user", parts=[types.Part(text="Maria lives in Oslo")]),
                            custom_metadata={"source": "note"})
        await memory.add_memory(app_name=app, user_id="alice", memories=[entry])
        found = (await memory.search_memory(app_name=app, user_id="alice", query="oslo")).memories
        with pytest.raises(InputValidationError, match="user_id"):
            await memory.search_memory(app_name=app, user_id="", query="oslo")
        await memory.delete_memory(app_name=app, user_id="alice", memory_id="m1")
        after = (await memory.search_memory(app_name=app, user_id="alice", query="oslo")).memories
        return found, after

    found, after = asyncio.run(scenario())
    assert len(found) == 1
    got = found[0]
    assert (got.id, got.author, got.custom_metadata) == ("m1", "user", {"source": "note"})
    assert got.timestamp == "2026-01-02T03:04:05+00:00"
    assert after == []


def test_the_adk_grpc_scheme_makes_a_memory_service() -> None:
    from google.adk.cli.service_registry import get_service_registry

    from adk_client.adk import register

    register()
    service = get_service_registry().create_memory_service("adk-grpc://127.0.0.1:1")
    assert isinstance(service, GrpcMemoryService)


class _FakeOpenAi(http.server.BaseHTTPRequestHandler):
    """An OpenAI-compatible chat completions endpoint whose every answer is the
    extraction below; records the request bodies."""

    bodies: List[dict] = []

    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        length = int(self.headers.get("content-length", "0"))
        type(self).bodies.append(json.loads(self.rfile.read(length)))
        facts = {"facts": [
            {"fact": "The user drinks green tea", "topics": ["USER_PREFERENCES"]},
            {"fact": "The user lives in Oslo", "topics": ["USER_PERSONAL_INFO"]},
        ]}
        reply = json.dumps({
            "id": "c", "object": "chat.completion", "created": 0, "model": "fake",
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": json.dumps(facts)}}],
        }).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, *_args: object) -> None:
        pass


def test_memory_bank_metadata_generates_facts_on_the_server(tmp_path) -> None:
    """What ADK's VertexAiMemoryBankService does with custom_metadata asking for a ttl and
    topics, GrpcMemoryService does too: the server's model extracts the facts (only those of
    the allowed topics), which search then returns; without such metadata the events are
    ingested, as ADK's service does: buffered once each, and generated on a flush."""
    model = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _FakeOpenAi)
    threading.Thread(target=model.serve_forever, daemon=True).start()
    generation = tmp_path / "generation.yaml"
    generation.write_text(
        "'*':\n  model: {provider: openai, model: fake, base_url: 'http://127.0.0.1:%d/v1'}\n"
        % model.server_address[1])
    server = start("adk-server", ["--memory-generation", str(generation), *COMMON], tmp_path)
    app = f"adk-gen-{uuid.uuid4().hex[:8]}"
    _FakeOpenAi.bodies = []

    async def scenario():
        memory = GrpcMemoryService(f"adk-grpc://{server.address}")
        event = _user_event("I drink green tea here in Oslo")
        await memory.add_events_to_memory(
            app_name=app, user_id="alice", events=[event], session_id="s1",
            custom_metadata={"ttl": "3600s", "allowed_topics": ["USER_PREFERENCES"]})
        found = await memory.search_memory(app_name=app, user_id="alice", query="green tea Oslo")
        # Without such metadata the events are ingested: buffered until a flush (or the
        # app's event count or idle time), then generated.
        plain = _user_event("I drink green tea at home")
        await memory.add_events_to_memory(app_name=app, user_id="bob", events=[plain], session_id="s2")
        buffered = await memory.search_memory(app_name=app, user_id="bob", query="green tea")
        again = await memory.ingest_events(app_name=app, user_id="bob", events=[plain], stream_id="s2")
        await memory.add_events_to_memory(app_name=app, user_id="bob", events=[],
                                          custom_metadata={"force_flush": True})
        kept = await memory.search_memory(app_name=app, user_id="bob", query="green tea")
        await memory.close()
        return found, buffered, again, kept

    try:
        found, buffered, again, kept = asyncio.run(scenario())
    finally:
        server.stop()
        model.shutdown()
    assert [m.content.parts[0].text for m in found.memories] == ["The user drinks green tea"]
    prompt = _FakeOpenAi.bodies[0]["messages"][0]["content"]
    assert "USER_PREFERENCES" in prompt and "USER_PERSONAL_INFO" not in prompt
    assert buffered.memories == [], "ingested, not generated yet"
    assert again.buffered_events == 1, "an event ingested again is buffered once"
    assert [(m.author, m.content.parts[0].text) for m in kept.memories] == [("user", "The user drinks green tea")]
    assert len(_FakeOpenAi.bodies) == 2, "one extraction per generation; nothing related to consolidate with"


def test_the_client_ingests_generates_and_lists_revisions(tmp_path) -> None:
    """AdkClient's (and AsyncAdkClient's) generated-memory calls against adk-server with a
    generation model: an ingested event is buffered once and generated on a flush, with its
    topics, revision and source; a generation of events already generated from changes
    nothing; a memory's revisions come back; a call's topics and ttl apply."""
    from adk_client import AdkClient, AsyncAdkClient
    from adk_client.v1 import event_pb2

    model = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _FakeOpenAi)
    threading.Thread(target=model.serve_forever, daemon=True).start()
    generation = tmp_path / "generation.yaml"
    generation.write_text(
        "'*':\n  model: {provider: openai, model: fake, base_url: 'http://127.0.0.1:%d/v1'}\n"
        % model.server_address[1])
    server = start("adk-server", ["--memory-generation", str(generation), *COMMON], tmp_path)
    app, user = f"adk-client-gen-{uuid.uuid4().hex[:8]}", "alice"
    said = event_pb2.Event(id="e1", author="user")
    said.content.role = "user"
    said.content.parts.add().text = "I drink green tea here in Oslo"
    try:
        with AdkClient(server.address) as adk:
            first = adk.ingest_events(app, user, [said], stream_id="s1")
            again = adk.ingest_events(app, user, [said])
            flushed = adk.ingest_events(app, user, [], force_flush=True)
            found = adk.search_memory(app, user, "green tea")
            revisions = adk.list_memory_revisions(app, user, found[0].id)
            retried = adk.generate_memories(app, user, events=[said])

        async def generate_for_bob():
            async with AsyncAdkClient(server.address) as aio:
                return await aio.generate_memories(
                    app, "bob", events=[said], topics=["USER_PREFERENCES"], ttl_seconds=60)

        bobs = asyncio.run(generate_for_bob())
    finally:
        server.stop()
        model.shutdown()
    assert (first.buffered_events, first.memories) == (1, [])
    assert again.buffered_events == 1, "an event is buffered once"
    assert flushed.buffered_events == 0
    assert sorted((m.action, m.memory.text) for m in flushed.memories) == [
        ("CREATED", "The user drinks green tea"), ("CREATED", "The user lives in Oslo")]
    assert [(m.author, m.text) for m in found] == [("user", "The user drinks green tea")]
    fact = found[0].fact
    assert fact is not None and (fact.revision, fact.topics, fact.source_event_ids) == (
        1, ["USER_PREFERENCES"], ["e1"])
    assert [(r.revision, r.action, r.fact) for r in revisions] == [(1, "CREATED", "The user drinks green tea")]
    assert retried == [], "events generated from before change nothing"
    assert [(m.action, m.memory.text) for m in bobs] == [("CREATED", "The user drinks green tea")]
    assert bobs[0].memory.fact is not None and bobs[0].memory.fact.expire_time is not None
