"""A real ADK Runner on this suite (adk_client.adk), on adk-server with its in-memory
store and with a real redis-server: the multi-agent app of adk_app.py runs, then the same
session is read back through the adapter (equal events), and over raw gRPC."""
from __future__ import annotations

import asyncio
import uuid
from typing import Iterator

import grpc
import pytest
from google.adk.errors.already_exists_error import AlreadyExistsError
from google.adk.errors.input_validation_error import InputValidationError
from google.adk.events import Event
from google.adk.runners import Runner
from google.genai import types

from adk_app import RECEIPT, REPLY, build_agent, run_once
from adk_client.adk import GrpcArtifactService, GrpcSessionService
from adk_client.v1 import artifact_pb2, artifact_pb2_grpc, session_pb2, session_pb2_grpc
from conftest import COMMON, start, start_redis


@pytest.fixture(scope="module", params=["memory", "redis"])
def server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """An adk-server on its in-memory store, or on a real redis-server."""
    logs = tmp_path_factory.mktemp(f"adk-python-{request.param}")
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


def test_a_runner_stores_a_multi_agent_run_in_the_suite(server: str) -> None:
    app, user, sid = f"adk-py-{uuid.uuid4().hex[:8]}", "alice", "trip-1"

    async def scenario():
        sessions, artifacts = GrpcSessionService(f"adk-grpc://{server}"), GrpcArtifactService(target=server)
        runner = Runner(agent=build_agent(), app_name=app, session_service=sessions, artifact_service=artifacts)
        await sessions.create_session(app_name=app, user_id=user, session_id=sid,
                                      state={"user:name": "Alice", "app:currency": "JPY", "step": 1,
                                             "temp:dropped": True})
        events = await run_once(runner, user, sid, "Book 2 nights, please")
        stored = await sessions.get_session(app_name=app, user_id=user, session_id=sid)
        receipt = await artifacts.load_artifact(app_name=app, user_id=user, session_id=sid, filename=RECEIPT)
        versions = await artifacts.list_versions(app_name=app, user_id=user, session_id=sid, filename=RECEIPT)
        user_state = await sessions.get_user_state(app_name=app, user_id=user)
        return events, stored, receipt, versions, user_state

    events, stored, receipt, versions, user_state = asyncio.run(scenario())

    # The run: user message, transfer call and response, booker's tool call and
    # response, the answer.
    assert [e.author for e in events] == ["coordinator", "coordinator", "booker", "booker", "booker"]
    assert events[-1].content.parts[0].text == REPLY
    assert events[1].actions.transfer_to_agent == "booker"
    assert events[3].actions.artifact_delta == {RECEIPT: 0}  # ADK's 0-based version
    # Read back through the adapter: the user's message and exactly the events the runner saw.
    assert stored is not None
    assert stored.events[0].author == "user" and stored.events[0].content.parts[0].text == "Book 2 nights, please"
    assert stored.events[1:] == events
    # State: scopes merged by the server, output_key kept, temp: never stored.
    assert stored.state["user:last_hotel"] == "Hotel Sakura"
    assert stored.state["app:bookings"] == 1 and stored.state["app:currency"] == "JPY"
    assert stored.state["booking_summary"] == REPLY and stored.state["step"] == 1
    assert not [k for k in stored.state if k.startswith("temp:")]
    assert not [k for e in stored.events for k in e.actions.state_delta if k.startswith("temp:")]
    assert user_state == {"name": "Alice", "last_hotel": "Hotel Sakura"}
    # The tool's artifact, as ADK numbers versions.
    assert receipt == types.Part(text="2 nights at Hotel Sakura") and versions == [0]

    # The same session over raw gRPC: the suite's 1-based version, the same events.
    with grpc.insecure_channel(server) as channel:
        raw = session_pb2_grpc.SessionServiceStub(channel).GetSession(
            session_pb2.GetSessionRequest(app_name=app, user_id=user, session_id=sid))
        assert [e.author for e in raw.events] == ["user", "coordinator", "coordinator", "booker", "booker", "booker"]
        assert [e.id for e in raw.events[1:]] == [e.id for e in events]
        assert raw.events[-1].content.parts[0].text == REPLY
        assert raw.events[-1].usage_metadata.HasField("candidates_token_count")  # 0, yet set
        assert dict(raw.events[4].actions.artifact_delta) == {RECEIPT: 1}
        assert raw.state["booking_summary"] == REPLY
        loaded = artifact_pb2_grpc.ArtifactServiceStub(channel).LoadArtifact(artifact_pb2.LoadArtifactRequest(
            ref=artifact_pb2.ArtifactRef(app_name=app, user_id=user, session_id=sid, file_name=RECEIPT)))
        assert loaded.version == 1 and loaded.part.text == "2 nights at Hotel Sakura"


def test_adk_exceptions_and_missing_things(server: str) -> None:
    app = f"adk-py-{uuid.uuid4().hex[:8]}"

    async def scenario():
        sessions, artifacts = GrpcSessionService(target=server), GrpcArtifactService(target=server)
        await sessions.create_session(app_name=app, user_id="u", session_id="s")
        with pytest.raises(AlreadyExistsError):
            await sessions.create_session(app_name=app, user_id="u", session_id="s")
        with pytest.raises(InputValidationError, match="user_id"):
            await sessions.create_session(app_name=app, user_id="bad\x01id")
        assert await sessions.get_session(app_name=app, user_id="u", session_id="missing") is None
        assert await artifacts.load_artifact(app_name=app, user_id="u", session_id="s", filename="none") is None
        assert await artifacts.get_artifact_version(app_name=app, user_id="u", session_id="s", filename="x") is None
        # A session-scoped name needs a session, as ADK's own services say.
        with pytest.raises(InputValidationError, match="session_id"):
            await artifacts.save_artifact(app_name=app, user_id="u", filename="f", artifact=types.Part(text="t"))
        # Two writers on one session: the one holding a stale copy gets ADK's StaleSessionError.
        first = await sessions.get_session(app_name=app, user_id="u", session_id="s")
        second = await sessions.get_session(app_name=app, user_id="u", session_id="s")
        await sessions.append_event(first, Event(author="user"))
        from google.adk.errors import StaleSessionError
        with pytest.raises(StaleSessionError):
            await sessions.append_event(second, Event(author="user"))
        # artifact:// references name ADK's 0-based versions.
        v0 = await artifacts.save_artifact(app_name=app, user_id="u", session_id="s", filename="a.txt",
                                           artifact=types.Part(text="first"))
        await artifacts.save_artifact(app_name=app, user_id="u", session_id="s", filename="a.txt",
                                      artifact=types.Part(text="second"))
        uri = f"artifact://apps/{app}/users/u/sessions/s/artifacts/a.txt/versions/{v0}"
        await artifacts.save_artifact(app_name=app, user_id="u", session_id="s", filename="ref",
                                      artifact=types.Part(file_data=types.FileData(file_uri=uri)))
        assert await artifacts.load_artifact(app_name=app, user_id="u", session_id="s",
                                             filename="ref") == types.Part(text="first")
        # ADK's rewind tombstone loads as absent, as from ADK's own services.
        from google.adk.artifacts import artifact_util
        await artifacts.save_artifact(app_name=app, user_id="u", session_id="s", filename="a.txt",
                                      artifact=artifact_util._new_rewind_tombstone())
        assert await artifacts.load_artifact(app_name=app, user_id="u", session_id="s", filename="a.txt") is None
        listed = await artifacts.list_artifact_versions(app_name=app, user_id="u", session_id="s", filename="a.txt")
        assert [v.version for v in listed] == [0, 1, 2] and listed[0].canonical_uri == uri
        assert listed[0].mime_type == "text/plain"

    asyncio.run(scenario())


def test_the_adapter_behaves_as_adks_own_services(server: str) -> None:
    """What ADK's in-memory services do, the adapter does over the suite: artifacts keep
    their display names, and ADK's internal custom_metadata (`__adk_internal_…`) is stored
    and read back as ADK writes it, while a caller's RunConfig cannot set it."""
    from google.adk.agents.run_config import RunConfig
    from google.adk.artifacts import InMemoryArtifactService
    from google.adk.events._internal_metadata import RESTORED_EVENT_KEY, mark_restored, public_session
    from google.adk.sessions import InMemorySessionService

    async def scenario(sessions, artifacts, app: str):
        await sessions.create_session(app_name=app, user_id="u", session_id="s")
        chart = types.Part(inline_data=types.Blob(mime_type="image/png", data=b"\x89PNG", display_name="Q3.png"))
        report = types.Part(file_data=types.FileData(mime_type="application/pdf", file_uri="gs://b/r.pdf",
                                                     display_name="Report"))
        for name, part in (("chart.png", chart), ("report", report)):
            await artifacts.save_artifact(app_name=app, user_id="u", session_id="s", filename=name, artifact=part)
        loaded = [await artifacts.load_artifact(app_name=app, user_id="u", session_id="s", filename=name)
                  for name in ("chart.png", "report")]
        # An event restored into the session from outside (ADK's own marking), then a run whose
        # RunConfig tries to set an internal key beside a public one.
        session = await sessions.get_session(app_name=app, user_id="u", session_id="s")
        restored = Event(author="user", invocation_id="old", custom_metadata={"origin": "import"},
                         content=types.Content(role="user", parts=[types.Part(text="earlier")]))
        await sessions.append_event(session, mark_restored(restored))
        runner = Runner(agent=build_agent(), app_name=app, session_service=sessions, artifact_service=artifacts)
        config = RunConfig(custom_metadata={"__adk_internal_forged": True, "tenant": "t1"})
        message = types.Content(role="user", parts=[types.Part(text="Book 2 nights, please")])
        async for _ in runner.run_async(user_id="u", session_id="s", new_message=message, run_config=config):
            pass
        stored = await sessions.get_session(app_name=app, user_id="u", session_id="s")
        return loaded, stored

    async def both():
        suite = await scenario(GrpcSessionService(target=server), GrpcArtifactService(target=server),
                               f"adk-py-{uuid.uuid4().hex[:8]}")
        own = await scenario(InMemorySessionService(), InMemoryArtifactService(), "adk-own")
        return suite, own

    (loaded, stored), (own_loaded, own_stored) = asyncio.run(both())
    assert [p.inline_data.display_name if p.inline_data else p.file_data.display_name for p in loaded] == \
        ["Q3.png", "Report"]
    assert loaded == own_loaded
    metadata = [e.custom_metadata for e in stored.events]
    assert metadata == [e.custom_metadata for e in own_stored.events]
    # Stored as ADK wrote it: the restored mark kept, the caller's forged key dropped.
    assert metadata[0] == {"origin": "import", RESTORED_EVENT_KEY: True}
    assert all(m.get("tenant") == "t1" and "__adk_internal_forged" not in m for m in metadata[1:])
    # What ADK shows callers (its API server, saved files) leaves the internal keys out.
    assert public_session(stored).events[0].custom_metadata == {"origin": "import"}
