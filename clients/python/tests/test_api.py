"""AdkClient over the rest of the API, against the real servers (adk-server, and the
separate binaries on a real redis-server): pages fetched as the loop asks, preconditions,
scoped state, forks, memory, apps, rewinds; every result a plain view."""
from __future__ import annotations

import dataclasses
import uuid
from datetime import datetime, timezone
from typing import Any, Callable, List

import grpc
import pytest
from google.protobuf.message import Message

from adk_client import AdkClient, Event, MemoryInput, Part, errors

from conftest import Deployment


def uid(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


class _CountCalls(grpc.UnaryUnaryClientInterceptor):  # type: ignore[misc]
    def __init__(self) -> None:
        self.calls: List[str] = []

    def intercept_unary_unary(self, continuation: Callable[..., Any], details: Any, request: Any) -> Any:
        self.calls.append(details.method.rsplit("/", 1)[-1])
        return continuation(details, request)


def test_list_sessions_and_list_events_fetch_pages_as_the_loop_asks(deployment: Deployment) -> None:
    counting = _CountCalls()
    app, user = uid("pages"), "alice"
    with AdkClient(deployment.sessions, interceptors=[counting]) as adk:
        for n in range(5):
            adk.create_session(app, user, session_id=f"s{n}")
        sessions = adk.list_sessions(app, user, page_size=2)
        first = next(sessions)
        assert counting.calls.count("ListSessions") == 1, "only the first page is fetched for the first item"
        rest = list(sessions)
        assert sorted([first.id, *(s.id for s in rest)]) == [f"s{n}" for n in range(5)]
        assert counting.calls.count("ListSessions") == 3, "five sessions in pages of two"

        for n in range(5):
            adk.append_event(app, user, "s0", text=f"m{n}")
        assert [e.text for e in adk.list_events(app, user, "s0", page_size=2)] == [f"m{n}" for n in range(5)]
        newest = adk.list_events(app, user, "s0", page_size=2, newest_first=True)
        assert [e.sequence for e in newest] == [5, 4, 3, 2, 1]


def test_preconditions_on_appends_store_nothing_when_stale(adk: AdkClient) -> None:
    app, user = uid("pre"), "alice"
    adk.create_session(app, user, session_id="s")
    first = adk.append_event(app, user, "s", text="one", expect_last_sequence=0)
    second = adk.append_event(app, user, "s", text="two", expect_last_event_id=first.id)
    assert (first.sequence, second.sequence) == (1, 2)

    with pytest.raises(errors.PreconditionFailed) as stale:
        adk.append_event(app, user, "s", text="lost", expect_last_sequence=1, state_delta={"k": "v"})
    assert stale.value.reason == "PRECONDITION_FAILED"
    with pytest.raises(errors.PreconditionFailed):
        adk.append_event(app, user, "s", text="lost", expect_last_event_id=first.id)
    session = adk.get_session(app, user, "s")
    assert [e.text for e in session.events] == ["one", "two"] and "k" not in session.state

    # A retried append (same id) returns the stored event, even though its precondition is stale now.
    third = adk.append_event(app, user, "s", id="e-3", text="three", expect_last_sequence=2)
    again = adk.append_event(app, user, "s", id="e-3", text="three", expect_last_sequence=2)
    assert again.sequence == third.sequence == 3
    assert adk.get_session(app, user, "s").event_count == 3


def test_scoped_state_fork_and_time_filter(adk: AdkClient) -> None:
    app, user = uid("state"), "alice"
    adk.create_session(app, user, session_id="s", state={"user:name": "Alice", "topic": "travel"})
    assert adk.get_user_state(app, user) == {"name": "Alice"}
    assert adk.update_app_state(app, {"app:theme": "dark", "app:n": 2}) == {"theme": "dark", "n": 2}
    assert adk.get_app_state(app) == {"theme": "dark", "n": 2}
    with pytest.raises(errors.InvalidArgument) as bad:
        adk.update_app_state(app, {"theme": "light"})
    assert bad.value.field is not None and "state_delta" in bad.value.field

    one = adk.append_event(app, user, "s", text="one", state_delta={"step": 1})
    adk.append_event(app, user, "s", text="two", state_delta={"step": 2})
    fork = adk.fork_session(app, user, "s", one.id, new_session_id="fork")
    assert fork.id == "fork" and [e.text for e in fork.events] == ["one"]
    assert fork.state["step"] == 1 and fork.state["app:theme"] == "dark"
    assert adk.get_session(app, user, "s").state["step"] == 2, "the source is untouched"
    with pytest.raises(errors.EventNotFound):
        adk.fork_session(app, user, "s", "no-such-event")

    later = adk.get_session(app, user, "s", after=datetime.now(timezone.utc).replace(year=2100))
    assert later.events == [] and later.event_count == 2
    assert [e.text for e in adk.get_session(app, user, "s", num_recent_events=1).events] == ["two"]


def test_memory_add_search_and_delete(adk: AdkClient) -> None:
    app, user = uid("mem"), "alice"
    ids = adk.add_memory(
        app,
        user,
        ["Alice's favourite city is Kyoto", MemoryInput(text="Alice drinks green tea", author="user", id="tea")],
        custom_metadata={"source": "profile"},
    )
    assert len(ids) == 2 and ids[1] == "tea"
    found = adk.search_memory(app, user, "favourite city")
    assert found[0].text == "Alice's favourite city is Kyoto"
    assert found[0].custom_metadata == {"source": "profile"}
    assert adk.search_memory(app, "bob", "favourite city") == [], "memories are the user's own"
    assert adk.delete_memory(app, user, "tea") is True
    assert adk.delete_memory(app, user, "tea") is False

    adk.create_session(app, user, session_id="s")
    event = adk.append_event(app, user, "s", text="I am flying to Lisbon on Monday")
    assert adk.add_session_to_memory(app, user, "s") == [event.id]
    assert adk.add_events_to_memory(app, user, "s", [event]) == [event.id]
    assert [m.id for m in adk.search_memory(app, user, "Lisbon")] == [event.id]


def test_apps_runs_and_rewind(adk: AdkClient) -> None:
    assert {"assistant", "trip_planner"} <= {a.name for a in adk.list_apps()}
    planner = adk.get_app("trip_planner")
    booker = next(a for a in planner.root_agent.sub_agents if a.name == "booker")
    tool = next(t for t in booker.tools if t.name == "confirm_booking")
    assert tool.long_running
    assert isinstance(tool.parameters_schema, dict), "a tool's schema is JSON, not a Value"
    assert tool.parameters_schema["required"] == ["hotel", "nights"]
    with pytest.raises(errors.AppNotFound):
        adk.get_app("no_such_app")

    user = uid("alice")
    first = list(adk.run("assistant", user, "s", "first", create_session=True))
    second = list(adk.run("assistant", user, "s", "second"))
    assert adk.get_session("assistant", user, "s").state["last_reply"] == "You said: second"
    rewind = adk.rewind("assistant", user, "s", second[0].invocation_id)
    assert rewind.sequence == 5
    assert adk.get_session("assistant", user, "s").state["last_reply"] == "You said: first"
    assert first[-1].text == "You said: first"
    assert adk.cancel("assistant", user, "s", "no-such-invocation") is False


def _protobuf_inside(value: Any, path: str = "") -> List[str]:
    """Where a protobuf message hides in a view (its ``proto`` escape hatch aside)."""
    if isinstance(value, Message):
        return [path]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return [
            found
            for f in dataclasses.fields(value)
            if f.name != "proto"
            for found in _protobuf_inside(getattr(value, f.name), f"{path}.{f.name}")
        ]
    if isinstance(value, dict):
        return [found for k, v in value.items() for found in _protobuf_inside(v, f"{path}[{k!r}]")]
    if isinstance(value, (list, tuple)):
        return [found for i, v in enumerate(value) for found in _protobuf_inside(v, f"{path}[{i}]")]
    return []


def test_results_are_plain_views_without_struct_or_value(adk: AdkClient) -> None:
    user = uid("alice")
    adk.create_session("trip_planner", user, session_id="t", state={"nested": {"list": [1, {"a": None}]}})
    events = list(adk.run("trip_planner", user, "t", "Two nights at Hotel Sakura"))
    (call,) = events[-1].client_tool_calls
    assert call.args == {"hotel": "Hotel Sakura", "nights": 2}
    appended = adk.append_event(
        "trip_planner", user, "t", author="note", parts=[Part(text="x")], state_delta={"d": [True]}
    )
    results: List[Any] = [
        events,
        appended,
        adk.get_session("trip_planner", user, "t"),
        adk.get_app("trip_planner"),
        adk.list_apps(),
        adk.search_memory("trip_planner", user, "Sakura"),
    ]
    assert all(isinstance(e, Event) for e in events)
    assert _protobuf_inside(results) == []
    assert adk.get_session("trip_planner", user, "t").state["nested"] == {"list": [1, {"a": None}]}
