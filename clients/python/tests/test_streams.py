"""Streams against the real servers: WatchSession (replay, live, resumed across a server
killed and restarted on a Redis store, ended when the session is deleted), and artifacts
larger than one gRPC message streamed up and down without being held in memory, from and to
files and (async) iterables, by the sync and the async client."""
from __future__ import annotations

import asyncio
import hashlib
import os
import tracemalloc
import uuid
from pathlib import Path
from typing import Any, AsyncIterator, Callable, Iterator, List

import grpc.aio
import pytest

from adk_client import AdkClient, AsyncAdkClient, Event, errors

from conftest import COMMON, Deployment, Process, start, start_redis

NINE_MIB = 9 * 1024 * 1024  # over two default 4 MiB messages


def uid(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def test_watch_session_replays_the_log_then_streams_live(adk: AdkClient) -> None:
    app, user = uid("watch"), "alice"
    adk.create_session(app, user, session_id="s")
    adk.append_event(app, user, "s", text="e1")
    watch = adk.watch_session(app, user, "s", after_sequence=0)
    assert next(watch).text == "e1"  # the stored log first
    adk.append_event(app, user, "s", text="e2")
    live = next(watch)
    assert (live.text, live.sequence) == ("e2", 2)  # then live
    watch.close()  # cancels the stream


def test_watch_session_ends_with_session_not_found_when_the_session_is_deleted(adk: AdkClient) -> None:
    app, user = uid("watch"), "alice"
    adk.create_session(app, user, session_id="s")
    adk.append_event(app, user, "s", text="e1")
    watch = adk.watch_session(app, user, "s", after_sequence=0)
    assert next(watch).text == "e1"
    adk.delete_session(app, user, "s")
    with pytest.raises(errors.SessionNotFound):
        next(watch)  # not reconnected for ever: a deleted session does not come back


class RestartableServer:
    """adk-server on a Redis store, killed (SIGKILL) and restarted on the same port."""

    def __init__(self, tmp_path: Path) -> None:
        self.logs = tmp_path
        self.redis = start_redis(tmp_path)
        self.args = ["--store-url", f"redis://{self.redis.address}", *COMMON]
        self.server: Process = start("adk-server", self.args, tmp_path)

    def kill_and_restart(self) -> None:
        port = self.server.port
        self.server.proc.kill()
        self.server.proc.wait(timeout=10)
        self.server.stop()
        self.server = start("adk-server", self.args, self.logs, port=port)

    def stop(self) -> None:
        self.server.stop()
        self.redis.stop()


@pytest.fixture
def restartable(tmp_path: Path) -> Iterator[RestartableServer]:
    servers = RestartableServer(tmp_path)
    yield servers
    servers.stop()


def test_watch_session_resumes_from_the_last_sequence_after_a_server_restart(restartable: RestartableServer) -> None:
    user = uid("alice")
    with AdkClient(restartable.server.address, backoff=0.02, max_backoff=0.2) as adk:
        adk.create_session("app", user, session_id="watched")
        adk.append_event("app", user, "watched", text="e1")
        watch = adk.watch_session("app", user, "watched", after_sequence=0)
        seen: List[Event] = [next(watch)]
        adk.append_event("app", user, "watched", text="e2")
        seen.append(next(watch))

        # A crash, then appends while the watch is down: it must not miss them.
        restartable.kill_and_restart()
        with AdkClient(restartable.server.address) as writer:
            # With ids: retried while the new server is still being connected to.
            writer.append_event("app", user, "watched", id="e3", text="e3")
            writer.append_event("app", user, "watched", id="e4", text="e4")
        seen += [next(watch), next(watch)]
        watch.close()
    assert [(e.sequence, e.text) for e in seen] == [(1, "e1"), (2, "e2"), (3, "e3"), (4, "e4")]


def test_async_watch_session_resumes_from_the_last_sequence_after_a_server_restart(
    restartable: RestartableServer,
) -> None:
    async def scenario() -> List[Event]:
        user = uid("alice")
        async with AsyncAdkClient(restartable.server.address, backoff=0.02, max_backoff=0.2) as adk:
            await adk.create_session("app", user, session_id="watched")
            await adk.append_event("app", user, "watched", text="e1")
            # The watch runs on its own, so it is reading (and reconnecting) while the server is down.
            received: asyncio.Queue[Event] = asyncio.Queue()

            async def watch() -> None:
                async for event in adk.watch_session("app", user, "watched", after_sequence=0):
                    await received.put(event)

            watcher = asyncio.create_task(watch())
            try:
                seen = [await asyncio.wait_for(received.get(), 10)]
                await adk.append_event("app", user, "watched", text="e2")
                seen.append(await asyncio.wait_for(received.get(), 10))
                await asyncio.to_thread(restartable.kill_and_restart)
                async with AsyncAdkClient(restartable.server.address) as writer:
                    await writer.append_event("app", user, "watched", id="e3", text="e3")
                    await writer.append_event("app", user, "watched", id="e4", text="e4")
                seen += [await asyncio.wait_for(received.get(), 30) for _ in range(2)]
                assert received.empty()
                return seen
            finally:
                watcher.cancel()

    seen = asyncio.run(scenario())
    assert [(e.sequence, e.text) for e in seen] == [(1, "e1"), (2, "e2"), (3, "e3"), (4, "e4")]


class _ListEventsDone(grpc.aio.UnaryUnaryClientInterceptor):
    """Sets ``done`` once a ListEvents call has been answered."""

    def __init__(self) -> None:
        self.done = asyncio.Event()

    async def intercept_unary_unary(self, continuation: Callable[..., Any], details: Any, request: Any) -> Any:
        call = await continuation(details, request)
        await call
        method = details.method.decode() if isinstance(details.method, bytes) else details.method
        if method.endswith("/ListEvents"):
            self.done.set()
        return call


def test_async_watch_from_now_misses_nothing_appended_after_it_started(restartable: RestartableServer) -> None:
    async def scenario() -> List[Event]:
        user = uid("alice")
        listed = _ListEventsDone()
        async with AsyncAdkClient(
            restartable.server.address, backoff=0.02, max_backoff=0.2, interceptors=[listed]
        ) as adk:
            await adk.create_session("app", user, session_id="watched")
            await adk.append_event("app", user, "watched", text="before")
            received: asyncio.Queue[Event] = asyncio.Queue()

            async def watch() -> None:
                async for event in adk.watch_session("app", user, "watched"):  # from now on
                    await received.put(event)

            watcher = asyncio.create_task(watch())
            try:
                # Started: it has read where the log ends. Then the server dies before the first
                # event, and one is appended while the watch is reconnecting.
                await asyncio.wait_for(listed.done.wait(), 10)
                await asyncio.to_thread(restartable.kill_and_restart)
                async with AsyncAdkClient(restartable.server.address) as writer:
                    await writer.append_event("app", user, "watched", id="after", text="after")
                seen = [await asyncio.wait_for(received.get(), 30)]
                assert received.empty()
                return seen
            finally:
                watcher.cancel()

    seen = asyncio.run(scenario())
    assert [(e.sequence, e.text) for e in seen] == [(2, "after")]


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


@pytest.fixture
def big_file(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "big.bin"
    with open(path, "wb") as f:
        for _ in range(9):
            f.write(os.urandom(1024 * 1024))
    yield path
    # pytest keeps the last runs' temporary directories: not their 9 MiB files.
    for written in tmp_path.glob("*.bin"):
        written.unlink()


def test_upload_and_download_files_larger_than_one_message_without_holding_them(
    adk: AdkClient, big_file: Path, tmp_path: Path
) -> None:
    app, user = uid("files"), "alice"
    copy = tmp_path / "copy.bin"
    tracemalloc.start()
    try:
        version = adk.upload_file(app, user, "s", "big.bin", big_file, custom_metadata={"kind": "test"})
        metadata = adk.download_file(app, user, "s", "big.bin", copy, chunk_size=256 * 1024)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < NINE_MIB // 3, f"the client held {peak} bytes at once for a {NINE_MIB}-byte artifact"
    assert version == 1 and metadata.version == 1
    assert (metadata.size_bytes, metadata.mime_type, metadata.custom_metadata) == (
        NINE_MIB,
        "application/octet-stream",
        {"kind": "test"},
    )
    assert _sha256(copy) == _sha256(big_file)
    assert not Path(str(copy) + ".part").exists()
    assert adk.get_artifact_metadata(app, user, "s", "big.bin").size_bytes == NINE_MIB

    # From an iterable of chunks, and down as chunks; a missing artifact is typed.
    assert adk.upload_artifact(app, user, "s", "notes.txt", [b"hello ", b"world"], is_text=True) == 1
    assert adk.load_artifact(app, user, "s", "notes.txt").data == "hello world"
    with adk.download_artifact(app, user, "s", "big.bin", version=1, chunk_size=64 * 1024) as download:
        digest = hashlib.sha256()
        for chunk in download:
            assert len(chunk) <= 64 * 1024
            digest.update(chunk)
    assert digest.hexdigest() == _sha256(big_file)
    with pytest.raises(errors.ArtifactNotFound):
        adk.download_file(app, user, "s", "missing.bin", tmp_path / "missing.bin")
    assert not (tmp_path / "missing.bin").exists()


def test_async_upload_from_an_async_iterable_and_download_to_a_file(
    deployment: Deployment, big_file: Path, tmp_path: Path
) -> None:
    app, user = uid("files"), "alice"

    async def chunks() -> AsyncIterator[bytes]:
        with open(big_file, "rb") as f:
            while block := f.read(1024 * 1024):  # 1 MiB blocks: split into smaller messages
                yield block

    async def scenario() -> None:
        async with AsyncAdkClient(deployment.sessions, artifacts_target=deployment.artifacts) as adk:
            first = await adk.upload_artifact(app, user, "s", "big.bin", chunks(), size_bytes=NINE_MIB)
            second = await adk.upload_file(app, user, "s", "big.bin", big_file, version=7)
            assert (first, second) == (1, 7)
            assert await adk.list_versions(app, user, "s", "big.bin") == [7, 1]
            metadata = await adk.download_file(app, user, "s", "big.bin", tmp_path / "copy.bin", version=1)
            assert metadata.size_bytes == NINE_MIB
            async with await adk.download_artifact(app, user, "s", "big.bin") as download:
                assert download.metadata.version == 7
                digest = hashlib.sha256()
                async for chunk in download:
                    digest.update(chunk)
            assert digest.hexdigest() == _sha256(big_file)
            # A declared size the body does not match stores nothing.
            with pytest.raises(errors.InvalidArgument):
                await adk.upload_artifact(app, user, "s", "short.bin", [b"abc"], size_bytes=10)
            assert await adk.list_versions(app, user, "s", "short.bin") == []

    asyncio.run(scenario())
    assert _sha256(tmp_path / "copy.bin") == _sha256(big_file)
