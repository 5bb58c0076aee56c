"""Compressed calls from stock grpcio: a channel opened with compression=Gzip or Deflate
compresses every request it sends (and, like every grpcio channel, accepts gzip and deflate
answers). Every service takes them, on both deployments (adk-server on its in-memory store;
the three separate servers on Redis): sessions, artifacts (uploads and downloads streamed),
memory, the runner, and on adk-server the A2A service, health and reflection. The message
limit holds for what a request decompresses to."""
from __future__ import annotations

import uuid
from typing import Any, Iterator, List

import grpc
import pytest
from google.protobuf import struct_pb2

from adk_client.v1 import (
    artifact_pb2,
    artifact_pb2_grpc,
    content_pb2,
    event_pb2,
    memory_pb2,
    memory_pb2_grpc,
    runner_pb2,
    runner_pb2_grpc,
    session_pb2,
    session_pb2_grpc,
)

from conftest import Deployment

COMPRESSIONS = {"gzip": grpc.Compression.Gzip, "deflate": grpc.Compression.Deflate}
WORDS = "the quick brown fox jumps over the lazy dog; "
MIB = 1024 * 1024


def long_text(tag: str) -> str:
    return f"{tag}: {WORDS * 400}"


def text_content(role: str, text: str) -> content_pb2.Content:
    return content_pb2.Content(role=role, parts=[content_pb2.Part(text=text)])


@pytest.fixture(params=list(COMPRESSIONS))
def compression(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def channels(deployment: Deployment, compression: str) -> Iterator[dict[str, grpc.Channel]]:
    """One compressing channel per service address of the deployment."""
    opened: dict[str, grpc.Channel] = {}
    by_service = {}
    for service, address in [("sessions", deployment.sessions), ("artifacts", deployment.artifacts),
                             ("runner", deployment.runner)]:
        if address not in opened:
            opened[address] = grpc.insecure_channel(address, compression=COMPRESSIONS[compression])
        by_service[service] = opened[address]
    yield by_service
    for channel in opened.values():
        channel.close()


def test_every_service_takes_compressed_requests(deployment: Deployment, compression: str,
                                                 channels: dict[str, grpc.Channel]) -> None:
    app, user = "assistant", f"zip-{uuid.uuid4().hex[:8]}"
    sessions = session_pb2_grpc.SessionServiceStub(channels["sessions"])
    notes = long_text(f"state in {compression}")
    state = struct_pb2.Struct()
    state.update({"notes": notes})
    sessions.CreateSession(session_pb2.CreateSessionRequest(app_name=app, user_id=user, session_id="s", state=state))
    said = long_text(f"event in {compression}")
    appended = sessions.AppendEvent(session_pb2.AppendEventRequest(
        app_name=app, user_id=user, session_id="s", event=event_pb2.Event(author="user", content=text_content("user", said))))
    session = sessions.GetSession(session_pb2.GetSessionRequest(app_name=app, user_id=user, session_id="s"))
    assert session.state["notes"] == notes
    assert [e.content.parts[0].text for e in session.events] == [said]
    # A watch (server streaming; the server reads its request before the handler, to count streams).
    watch = sessions.WatchSession(session_pb2.WatchSessionRequest(app_name=app, user_id=user, session_id="s",
                                                                  after_sequence=0), timeout=30)
    assert next(watch).id == appended.id
    watch.cancel()

    artifacts = artifact_pb2_grpc.ArtifactServiceStub(channels["artifacts"])
    ref = artifact_pb2.ArtifactRef(app_name=app, user_id=user, session_id="s", file_name="notes.txt")
    saved = long_text(f"artifact in {compression}")
    artifacts.SaveArtifact(artifact_pb2.SaveArtifactRequest(ref=ref, part=content_pb2.Part(text=saved)))
    assert artifacts.LoadArtifact(artifact_pb2.LoadArtifactRequest(ref=ref)).part.text == saved
    chunks = [long_text(f"chunk {i}").encode() for i in range(3)]
    upload_ref = artifact_pb2.ArtifactRef(app_name=app, user_id=user, session_id="s", file_name="upload.bin")

    def upload() -> Iterator[artifact_pb2.UploadArtifactRequest]:
        yield artifact_pb2.UploadArtifactRequest(
            header=artifact_pb2.UploadHeader(ref=upload_ref, mime_type="application/octet-stream"))
        for chunk in chunks:
            yield artifact_pb2.UploadArtifactRequest(chunk=chunk)

    artifacts.UploadArtifact(upload())
    downloaded = b"".join(m.chunk for m in artifacts.DownloadArtifact(artifact_pb2.DownloadArtifactRequest(ref=upload_ref)))
    assert downloaded == b"".join(chunks)

    memory = memory_pb2_grpc.MemoryServiceStub(channels["sessions"])
    memory.AddSessionToMemory(memory_pb2.AddSessionToMemoryRequest(app_name=app, user_id=user, session_id="s"))
    found = memory.SearchMemory(memory_pb2.SearchMemoryRequest(app_name=app, user_id=user, query="quick fox"))
    assert len(found.memories) == 1

    runner = runner_pb2_grpc.AgentRunnerStub(channels["runner"])
    asked = long_text(f"run in {compression}")
    events = list(runner.Run(runner_pb2.RunRequest(app_name=app, user_id=user, session_id="run",
                                                   new_message=text_content("user", asked), create_session=True),
                             timeout=60))
    assert events[-1].content.parts[0].text == f"You said: {asked}"


def test_a2a_health_and_reflection_take_compressed_requests(all_in_one: Deployment, compression: str) -> None:
    from a2a.types import a2a_pb2, a2a_pb2_grpc

    with grpc.insecure_channel(all_in_one.runner, compression=COMPRESSIONS[compression]) as channel:
        agent = a2a_pb2_grpc.A2AServiceStub(channel)
        asked = long_text(f"a2a in {compression}")
        reply = agent.SendMessage(a2a_pb2.SendMessageRequest(
            tenant="assistant",
            message=a2a_pb2.Message(message_id=uuid.uuid4().hex, role=a2a_pb2.ROLE_USER,
                                    parts=[a2a_pb2.Part(text=asked)])), timeout=60)
        assert f"You said: {asked}" in str(reply)
        # Health and reflection, as raw bytes (grpcio ships neither client): Check of "" is
        # SERVING (field 1 = 1); list_services (field 7) names the services.
        identity = lambda raw: raw  # noqa: E731
        check = channel.unary_unary("/grpc.health.v1.Health/Check", request_serializer=identity,
                                    response_deserializer=identity)
        assert check(b"", timeout=10) == b"\x08\x01"
        reflect = channel.stream_stream("/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
                                        request_serializer=identity, response_deserializer=identity)
        listed: List[Any] = list(reflect(iter([b"\x3a\x00"]), timeout=10))
        assert b"adk.v1.SessionService" in listed[0] and b"lf.a2a.v1.A2AService" in listed[0]


def test_the_message_limit_holds_for_the_decompressed_size(deployment: Deployment, compression: str,
                                                           channels: dict[str, grpc.Channel]) -> None:
    sessions = session_pb2_grpc.SessionServiceStub(channels["sessions"])
    state = struct_pb2.Struct()
    state.update({"big": "x" * (5 * MIB)})  # a few KiB compressed, 5 MiB decompressed
    with pytest.raises(grpc.RpcError) as refused:
        sessions.CreateSession(session_pb2.CreateSessionRequest(app_name="app", user_id="u", state=state))
    assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    details = refused.value.details() or ""
    assert f"CreateSession request message ({compression}) decompresses to more than" in details, details
    assert "--max-message-bytes" in details and "AppendEvent" in details, details
    # 3 MiB (three values of just under the 1 MiB a state value may have) is taken.
    state = struct_pb2.Struct()
    state.update({f"k{i}": "x" * (MIB - 1024) for i in range(3)})
    session = sessions.CreateSession(session_pb2.CreateSessionRequest(app_name="app", user_id="u", state=state))
    assert session.id
