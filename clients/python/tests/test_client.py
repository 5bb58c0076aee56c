"""The client against the real servers: adk-server (memory store) and the separate
binaries sharing a real redis-server. Every test runs on both deployments."""
from __future__ import annotations

import time
import uuid

import grpc
import pytest

from adk_client import AdkClient, event_text, function_calls, function_response, state_delta


def uid(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def test_create_session_splits_state_by_scope(adk: AdkClient) -> None:
    app = uid("weather")
    s1 = adk.create_session(
        app, "alice", session_id="s1",
        state={"app:units": "metric", "user:name": "Alice", "temp:draft": True, "topic": "travel"},
    )
    assert (s1.app_name, s1.user_id, s1.id) == (app, "alice", "s1")
    assert s1.state == {"app:units": "metric", "user:name": "Alice", "topic": "travel"}
    assert s1.events == [] and s1.event_count == 0 and s1.create_time is not None

    # Another session of alice: app and user state, not s1's own keys.
    s2 = adk.create_session(app, "alice", session_id="s2", state={"topic": "other"})
    assert s2.state == {"app:units": "metric", "user:name": "Alice", "topic": "other"}
    # Another user: only app state.
    bob = adk.create_session(app, "bob")
    assert bob.state == {"app:units": "metric"}
    assert len(bob.id) == 36  # no session_id: the server generates a UUID

    # JSON values of every kind round-trip through Struct.
    value = {"n": 3, "f": 1.5, "b": False, "none": None, "list": [1, "two", {"three": 3}]}
    s3 = adk.create_session(app, "carol", state={"v": value})
    assert adk.get_session(app, "carol", s3.id).state["v"] == value
    assert sorted(s.id for s in adk.list_sessions(app, "alice")) == ["s1", "s2"]

    with pytest.raises(grpc.RpcError) as err:
        adk.create_session(app, "alice", session_id="s1")
    assert err.value.code() == grpc.StatusCode.ALREADY_EXISTS


def test_append_event_applies_delta_and_get_session_returns_it(adk: AdkClient) -> None:
    app = uid("weather")
    adk.create_session(app, "alice", session_id="s1", state={"topic": "travel"})
    adk.create_session(app, "alice", session_id="s2")

    event = adk.append_event(
        app, "alice", "s1", text="Weather in Tokyo?",
        state_delta={"user:city": "Tokyo", "topic": "tokyo", "temp:scratch": 1},
    )
    assert event.sequence == 1 and len(event.id) == 36 and event.timestamp is not None
    assert state_delta(event) == {"user:city": "Tokyo", "topic": "tokyo"}  # temp: is never stored

    reply = adk.append_event(app, "alice", "s1", author="forecaster", text="Sunny, 24 C")
    assert reply.sequence == 2 and reply.content.role == "model"

    s1 = adk.get_session(app, "alice", "s1")
    assert s1.state == {"user:city": "Tokyo", "topic": "tokyo"}
    assert [(e.sequence, e.author, event_text(e)) for e in s1.events] == [
        (1, "user", "Weather in Tokyo?"),
        (2, "forecaster", "Sunny, 24 C"),
    ]
    assert s1.events[0].id == event.id and s1.event_count == 2
    assert [event_text(e) for e in adk.get_session(app, "alice", "s1", num_recent_events=1).events] == [
        "Sunny, 24 C"
    ]
    # The user: key is visible from alice's other session at once; the session key is not.
    assert adk.get_session(app, "alice", "s2").state == {"user:city": "Tokyo"}

    with pytest.raises(grpc.RpcError) as err:
        adk.get_session(app, "alice", "missing")
    assert err.value.code() == grpc.StatusCode.NOT_FOUND


def test_artifact_versions_and_user_scope(adk: AdkClient) -> None:
    app = uid("docs")
    assert adk.save_artifact(app, "alice", "s1", "report.txt", "Sunny, 24 C") == 1
    assert adk.save_artifact(
        app, "alice", "s1", "report.txt", "Rain later, 19 C", custom_metadata={"source": "forecast"}
    ) == 2
    assert adk.list_versions(app, "alice", "s1", "report.txt") == [2, 1]

    v1 = adk.load_artifact(app, "alice", "s1", "report.txt", version=1)
    assert (v1.version, v1.data, v1.mime_type, v1.is_text) == (1, "Sunny, 24 C", "text/plain", True)
    latest = adk.load_artifact(app, "alice", "s1", "report.txt")
    assert (latest.version, latest.data, latest.size_bytes) == (2, "Rain later, 19 C", 16)
    assert latest.custom_metadata == {"source": "forecast"}

    png = b"\x89PNG\r\n\x1a\n\x00\xff"
    assert adk.save_artifact(app, "alice", "s1", "user:avatar.png", png, "image/png") == 1
    # A user: artifact is visible from another session of the same user ...
    avatar = adk.load_artifact(app, "alice", "s2", "user:avatar.png")
    assert (avatar.data, avatar.mime_type, avatar.is_text) == (png, "image/png", False)
    assert adk.list_artifacts(app, "alice", "s2") == ["user:avatar.png"]
    assert adk.list_artifacts(app, "alice", "s1") == ["report.txt", "user:avatar.png"]
    # ... but a session's own artifact is not, nor is anything another user's.
    for user, session in [("alice", "s2"), ("bob", "s1")]:
        with pytest.raises(grpc.RpcError) as err:
            adk.load_artifact(app, user, session, "report.txt")
        assert err.value.code() == grpc.StatusCode.NOT_FOUND
    with pytest.raises(grpc.RpcError) as err:
        adk.save_artifact(app, "alice", "s1", "report.txt", "again", version=1)
    assert err.value.code() == grpc.StatusCode.ALREADY_EXISTS


def test_run_streams_partial_events_then_the_stored_reply(adk: AdkClient) -> None:
    user = uid("alice")
    events = list(adk.run(
        "assistant", user, "chat1", "Hello, agent!",
        streaming=True, create_session=True, state_delta={"user:name": "Alice"},
    ))
    user_event, events = events[0], events[1:]
    assert (user_event.author, user_event.sequence, event_text(user_event)) == ("user", 1, "Hello, agent!"), \
        "the stored user message comes first"
    assert all(e.invocation_id == user_event.invocation_id for e in events)
    partial = [e for e in events if e.partial]
    assert len(partial) >= 2, "SSE mode streams the reply in chunks"
    assert events[: len(partial)] == partial, "partial events come first"
    assert all(e.sequence == 0 for e in partial), "partial events are not stored"
    assert "".join(event_text(e) for e in partial) == "You said: Hello, agent!"
    final = events[-1]
    assert not final.partial and final.author == "assistant"
    assert event_text(final) == "You said: Hello, agent!"
    assert state_delta(final) == {"last_reply": "You said: Hello, agent!"}
    assert final.sequence == 2  # after the user's message

    session = adk.get_session("assistant", user, "chat1")
    assert [(e.sequence, e.author, e.partial, event_text(e)) for e in session.events] == [
        (1, "user", False, "Hello, agent!"),
        (2, "assistant", False, "You said: Hello, agent!"),
    ]
    assert session.events[0].id == user_event.id
    assert session.events[1].id == final.id
    assert session.state["last_reply"] == "You said: Hello, agent!"
    assert session.state["user:name"] == "Alice"

    # Without streaming: the user's message as stored, then the complete reply only.
    events = list(adk.run("assistant", user, "chat1", "Again"))
    assert [(e.author, e.partial, event_text(e)) for e in events] == [
        ("user", False, "Again"),
        ("assistant", False, "You said: Again"),
    ]
    assert adk.get_session("assistant", user, "chat1").event_count == 4


def test_run_left_early_is_cancelled_and_the_session_takes_the_next_run(adk: AdkClient) -> None:
    user = uid("alice")
    events = adk.run("assistant", user, "c", "first", streaming=True, create_session=True)
    assert next(events).author == "user"
    assert next(events).partial
    events.close()  # cancels the call (as dropping the iterator does)
    # The server frees the session once it has seen the cancellation: until then a new
    # run is ABORTED ("busy"), which a client retries.
    deadline = time.monotonic() + 10
    while True:
        try:
            final = list(adk.run("assistant", user, "c", "second"))[-1]
            break
        except grpc.RpcError as err:
            if err.code() != grpc.StatusCode.ABORTED or time.monotonic() > deadline:
                raise
            time.sleep(0.05)
    assert event_text(final) == "You said: second"


def test_run_client_tool_pauses_then_resumes(adk: AdkClient) -> None:
    # trip_planner's booker plays its mock script (a function call, then "Booked: ...")
    # afresh in every session.
    user = uid("alice")
    adk.create_session("trip_planner", user, session_id="trip1")
    events = list(adk.run("trip_planner", user, "trip1", "Two nights at Hotel Sakura, please"))
    paused = events[-1]
    (call,) = function_calls(paused)
    assert list(paused.long_running_tool_ids) == [call.id] == ["booking-1"]
    assert call.name == "confirm_booking"

    answer = function_response(call, {"confirmed": True})
    events = list(adk.run("trip_planner", user, "trip1", answer))
    replies = [(e.author, event_text(e)) for e in events if event_text(e)]
    assert replies[-1] == ("booker", "Booked: 2 nights at Hotel Sakura.")
    # The answer went on with the sequence, which then ended (its content-less end event).
    assert (events[-1].author, events[-1].proto.actions.end_of_agent) == ("planner", True)
    assert adk.get_session("trip_planner", user, "trip1").state["booking"] == "Booked: 2 nights at Hotel Sakura."


@pytest.mark.parametrize(
    "call, field",
    [
        (lambda adk: adk.create_session("bad\napp", "alice"), "app_name"),
        (lambda adk: adk.get_session("weather", "", "s1"), "user_id"),
        (lambda adk: adk.append_event("weather", "alice", "s1\x00", text="hi"), "session_id"),
        (lambda adk: adk.save_artifact("weather", "alice", "s1", "../etc/passwd", "x"), "file_name"),
        (lambda adk: adk.load_artifact("weather", "alice", "s1", "/abs"), "file_name"),
        (lambda adk: list(adk.run("assistant", "bad\tuser", "s1", "hi")), "user_id"),
    ],
    ids=["create_session", "get_session", "append_event", "save_artifact", "load_artifact", "run"],
)
def test_bad_input_is_invalid_argument(adk: AdkClient, call, field: str) -> None:
    with pytest.raises(grpc.RpcError) as err:
        call(adk)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert field in (err.value.details() or "")


def test_run_unknown_app_is_not_found(adk: AdkClient) -> None:
    with pytest.raises(grpc.RpcError) as err:
        list(adk.run("no_such_app", "alice", "s1", "hi", create_session=True))
    assert err.value.code() == grpc.StatusCode.NOT_FOUND
    assert "no_such_app" in (err.value.details() or "")
