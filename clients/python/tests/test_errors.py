"""Errors typed by the servers' ErrorInfo reasons, asserted by reason (never by text),
against the real servers; and retries only for calls that are safe to repeat."""
from __future__ import annotations

import uuid
from typing import Any, Callable, List, Tuple, Type

import grpc
import pytest

from adk_client import AdkClient, errors
from adk_client.v1 import errors_pb2, event_pb2, session_pb2

from conftest import free_port

APP = "assistant"


@pytest.fixture
def user() -> str:
    return f"errors-{uuid.uuid4().hex[:10]}"


def test_every_reason_of_the_proto_has_its_class_and_no_class_names_another() -> None:
    proto = [name for name in errors_pb2.ErrorReason.keys() if name != "ERROR_REASON_UNSPECIFIED"]
    assert list(errors.KNOWN_REASONS) == proto
    missing = [reason for reason in proto if reason not in errors.REASONS]
    assert not missing, f"adk.v1.ErrorReason values without an exception class: {missing}"
    # Every class that names a reason (not by inheritance) names one of the proto's.
    named: List[Tuple[str, str]] = []
    pending: List[Type[errors.AdkError]] = [errors.AdkError]
    while pending:
        cls = pending.pop()
        pending.extend(cls.__subclasses__())
        if "REASON" in vars(cls) and cls.REASON:
            named.append((cls.__name__, cls.REASON))
    assert [(n, r) for n, r in named if r not in proto] == []
    assert len(named) == len(proto), f"two classes name one reason: {sorted(named)}"
    for reason, cls in errors.REASONS.items():
        assert cls.REASON == reason


def test_missing_session_and_app_are_told_apart_by_reason(adk: AdkClient, user: str) -> None:
    with pytest.raises(errors.SessionNotFound) as missing:
        adk.get_session(APP, user, "no-such-session")
    assert missing.value.reason == "SESSION_NOT_FOUND"
    assert missing.value.code() == grpc.StatusCode.NOT_FOUND
    assert not missing.value.retryable
    with pytest.raises(errors.AppNotFound) as app:
        list(adk.run("no-such-app", user, "s1", "hi", create_session=True))
    assert app.value.reason == "APP_NOT_FOUND"


def test_bad_input_names_the_field_and_duplicates_are_typed(adk: AdkClient, user: str) -> None:
    with pytest.raises(errors.InvalidArgument) as bad:
        adk.create_session(APP, "", session_id="s1")
    assert bad.value.field == "user_id"
    adk.create_session(APP, user, session_id="dup")
    with pytest.raises(errors.SessionAlreadyExists):
        adk.create_session(APP, user, session_id="dup")
    # Still a grpc.RpcError for code written against raw gRPC.
    with pytest.raises(grpc.RpcError):
        adk.create_session(APP, user, session_id="dup")


def test_a_stale_precondition_is_precondition_failed(adk: AdkClient, user: str) -> None:
    adk.create_session(APP, user, session_id="pre")
    adk.append_event(APP, user, "pre", text="one")
    request = session_pb2.AppendEventRequest(
        app_name=APP,
        user_id=user,
        session_id="pre",
        event=event_pb2.Event(author="user"),
        precondition=session_pb2.AppendPrecondition(last_sequence=0),
    )
    with pytest.raises(errors.PreconditionFailed) as stale:
        adk.sessions.AppendEvent(request)
    assert stale.value.reason == "PRECONDITION_FAILED"
    assert not stale.value.retryable
    assert adk.get_session(APP, user, "pre").event_count == 1


def test_a_limit_is_named_with_its_value(adk: AdkClient, user: str) -> None:
    with pytest.raises(errors.LimitExceeded) as over:
        adk.create_session(APP, user, session_id="big", state={"big": "x" * (2 * 1024 * 1024)})
    assert over.value.reason == "LIMIT_EXCEEDED"
    assert over.value.limit in ("max_json_bytes", "max_message_bytes"), over.value.metadata
    assert over.value.value is not None and over.value.value > 0
    with pytest.raises(errors.SessionNotFound):
        adk.get_session(APP, user, "big")


class _Counting(
    grpc.UnaryUnaryClientInterceptor, grpc.StreamUnaryClientInterceptor, grpc.UnaryStreamClientInterceptor
):  # type: ignore[misc]
    """Counts the attempts of each method that leave the client."""

    def __init__(self) -> None:
        self.calls: List[str] = []

    def intercept_unary_unary(self, continuation: Callable[..., Any], details: Any, request: Any) -> Any:
        self.calls.append(details.method.rsplit("/", 1)[-1])
        return continuation(details, request)

    def intercept_stream_unary(self, continuation: Callable[..., Any], details: Any, requests: Any) -> Any:
        self.calls.append(details.method.rsplit("/", 1)[-1])
        return continuation(details, requests)

    def intercept_unary_stream(self, continuation: Callable[..., Any], details: Any, request: Any) -> Any:
        self.calls.append(details.method.rsplit("/", 1)[-1])
        return continuation(details, request)


def test_only_calls_safe_to_repeat_are_retried() -> None:
    # A real outage: nothing listens on the port, so every attempt is UNAVAILABLE.
    counting = _Counting()
    client = AdkClient(f"127.0.0.1:{free_port()}", retries=2, backoff=0.01, interceptors=[counting])
    with client:
        with pytest.raises(errors.Unavailable) as down:
            client.get_session(APP, "u", "s1")
        assert down.value.reason in ("", "UNAVAILABLE")
        assert counting.calls.count("GetSession") == 3, counting.calls  # a read: retried
        with pytest.raises(errors.Unavailable):
            client.create_session(APP, "u", session_id="s1")
        assert counting.calls.count("CreateSession") == 1, counting.calls  # never retried
        with pytest.raises(errors.Unavailable):
            client.append_event(APP, "u", "s1", text="no id")
        assert counting.calls.count("AppendEvent") == 1, counting.calls  # no id: never retried
        with pytest.raises(errors.Unavailable):
            client.append_event(APP, "u", "s1", event=event_pb2.Event(id="e-1", author="user"))
        assert counting.calls.count("AppendEvent") == 1 + 3, counting.calls  # with its id: retried
        with pytest.raises(errors.Unavailable):
            client.save_artifact(APP, "u", "s1", "a.txt", "x")
        assert counting.calls.count("SaveArtifact") == 1, counting.calls  # next version: never
        with pytest.raises(errors.Unavailable):
            client.save_artifact(APP, "u", "s1", "a.txt", "x", version=1)
        assert counting.calls.count("SaveArtifact") == 1 + 3, counting.calls  # explicit version
        with pytest.raises(errors.Unavailable):
            client.delete_session(APP, "u", "s1")
        assert counting.calls.count("DeleteSession") == 1, counting.calls  # a write: never
        with pytest.raises(errors.Unavailable):
            client.upload_artifact(APP, "u", "s1", "big.bin", [b"x"], version=1)
        assert counting.calls.count("UploadArtifact") == 1, counting.calls  # a stream is consumed once
        with pytest.raises(errors.Unavailable):
            client.upload_file(APP, "u", "s1", "big.bin", __file__, version=1)
        assert counting.calls.count("UploadArtifact") == 1 + 3, counting.calls  # a file is read again
        with pytest.raises(errors.Unavailable):
            client.download_artifact(APP, "u", "s1", "big.bin")
        assert counting.calls.count("DownloadArtifact") == 3, counting.calls  # nothing handed out yet
        with pytest.raises(errors.Unavailable):
            list(client.run(APP, "u", "s1", "hi"))
        assert counting.calls.count("Run") == 1, counting.calls  # a run: never
