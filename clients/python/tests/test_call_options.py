"""Per-call ``timeout`` and ``metadata`` on every method of AdkClient and AsyncAdkClient (as
Google's generated clients take them), against the real adk-server: a call's own deadline
fires (a quiet watch ends with DEADLINE_EXCEEDED), a call's own timeout replaces the
client's, and a call's own metadata reaches the server (a bearer token, checked by a server
started with --auth required)."""
from __future__ import annotations

import asyncio
import hashlib
import json
import socket
import time
import uuid
from pathlib import Path
from typing import Iterator, Tuple

import pytest

from adk_client import AdkClient, AsyncAdkClient, errors

from conftest import AGENTS_FILE, COMMON, Deployment, Process, start


def new_user() -> str:
    return f"opts-{uuid.uuid4().hex[:8]}"


def test_a_watch_ends_at_its_own_deadline(all_in_one: Deployment) -> None:
    with all_in_one.client() as adk:
        user = new_user()
        adk.create_session("assistant", user, session_id="s")
        adk.append_event("assistant", user, "s", text="one")
        started = time.monotonic()
        seen = []
        with pytest.raises(errors.DeadlineExceeded):
            for event in adk.watch_session("assistant", user, "s", after_sequence=0, timeout=0.5):
                seen.append(event.text)
        elapsed = time.monotonic() - started
        # The stored event came first; then nothing more, and the deadline ended the watch
        # (not resumed as a dropped stream would be).
        assert seen == ["one"]
        assert 0.4 <= elapsed < 10, elapsed


@pytest.fixture
def unresponsive() -> Iterator[str]:
    """The address of a server that never answers: it takes connections (the kernel's
    backlog does) and never speaks HTTP/2, so a call waits for its deadline, whatever it is."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(8)
        yield f"127.0.0.1:{sock.getsockname()[1]}"


def test_a_call_timeout_replaces_the_clients(unresponsive: str) -> None:
    with AdkClient(unresponsive, timeout=30, retries=0) as adk:
        started = time.monotonic()
        with pytest.raises(errors.DeadlineExceeded):
            adk.get_session("assistant", "u", "s", timeout=0.3)
        assert time.monotonic() - started < 10
    with AdkClient(unresponsive, timeout=0.2, retries=0) as adk:
        started = time.monotonic()
        with pytest.raises(errors.DeadlineExceeded):
            list(adk.list_sessions("assistant", "u", timeout=1.5))
        assert time.monotonic() - started >= 1.4, "the client's 0.2 s, not the call's 1.5 s"


def test_an_async_call_takes_its_own_timeout(all_in_one: Deployment, unresponsive: str) -> None:
    async def scenario() -> None:
        async with AsyncAdkClient(unresponsive, timeout=0.2, retries=0) as adk:
            started = time.monotonic()
            with pytest.raises(errors.DeadlineExceeded):
                await adk.create_session("assistant", "u", session_id="s", timeout=1.5)
            assert time.monotonic() - started >= 1.4, "the client's 0.2 s, not the call's 1.5 s"
        async with AsyncAdkClient(all_in_one.sessions) as adk:
            user = new_user()
            await adk.create_session("assistant", user, session_id="s")
            started = time.monotonic()
            with pytest.raises(errors.DeadlineExceeded):
                async for _ in adk.watch_session("assistant", user, "s", timeout=0.5):
                    pass
            assert 0.4 <= time.monotonic() - started < 10

    asyncio.run(scenario())


ALICE_KEY, BOB_KEY = "alice-key-" + uuid.uuid4().hex, "bob-key-" + uuid.uuid4().hex


@pytest.fixture(scope="module")
def auth_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Process]:
    """adk-server with --auth required and an API key for alice and one for bob."""
    logs: Path = tmp_path_factory.mktemp("auth")
    keys = logs / "api-keys.jsonl"
    keys.write_text(
        "".join(
            json.dumps({"sha256": hashlib.sha256(key.encode()).hexdigest(), "apps": ["*"], "user": user}) + "\n"
            for key, user in [(ALICE_KEY, "alice"), (BOB_KEY, "bob")]
        )
    )
    server = start("adk-server", ["--agents", str(AGENTS_FILE), "--auth", "required", "--api-keys", str(keys), *COMMON], logs)
    yield server
    server.stop()


def bearer(key: str) -> Tuple[Tuple[str, str], ...]:
    return (("authorization", f"Bearer {key}"),)


def test_call_metadata_reaches_the_server(auth_server: Process) -> None:
    session_id = uuid.uuid4().hex[:8]
    with AdkClient(auth_server.address, retries=0) as adk:
        # No credential on the client: a call without one of its own is refused ...
        with pytest.raises(errors.Unauthenticated):
            adk.create_session("assistant", "alice", session_id=session_id)
        # ... with alice's key it is hers, and bob's key does not open alice's session.
        adk.create_session("assistant", "alice", session_id=session_id, metadata=bearer(ALICE_KEY))
        with pytest.raises(errors.PermissionDenied):
            adk.get_session("assistant", "alice", session_id, metadata=bearer(BOB_KEY))
        adk.append_event("assistant", "alice", session_id, text="hi", metadata=bearer(ALICE_KEY))
        # Streams and paged calls carry it too.
        events = list(adk.run("assistant", "alice", session_id, "Hello!", metadata=bearer(ALICE_KEY)))
        assert events[-1].text == "You said: Hello!"
        assert [e.text for e in adk.list_events("assistant", "alice", session_id, metadata=bearer(ALICE_KEY))][:1] == ["hi"]
        watch = adk.watch_session("assistant", "alice", session_id, after_sequence=0, timeout=5, metadata=bearer(ALICE_KEY))
        assert next(watch).text == "hi"
        watch.close()
        adk.save_artifact("assistant", "alice", session_id, "a.txt", b"data", metadata=bearer(ALICE_KEY))
        with adk.download_artifact("assistant", "alice", session_id, "a.txt", metadata=bearer(ALICE_KEY)) as download:
            assert b"".join(download) == b"data"


def test_async_call_metadata_reaches_the_server(auth_server: Process) -> None:
    async def scenario() -> None:
        session_id = uuid.uuid4().hex[:8]
        async with AsyncAdkClient(auth_server.address, retries=0) as adk:
            with pytest.raises(errors.Unauthenticated):
                await adk.create_session("assistant", "bob", session_id=session_id)
            await adk.create_session("assistant", "bob", session_id=session_id, metadata=bearer(BOB_KEY))
            with pytest.raises(errors.PermissionDenied):
                await adk.get_session("assistant", "bob", session_id, metadata=bearer(ALICE_KEY))
            events = [e async for e in adk.run("assistant", "bob", session_id, "Hi!", metadata=bearer(BOB_KEY))]
            assert events[-1].text == "You said: Hi!"

    asyncio.run(scenario())
