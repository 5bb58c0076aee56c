"""AsyncAdkClient (grpc.aio) against the real servers: the same calls and views as
AdkClient, errors typed by reason, and retries only for calls that are safe to repeat."""
from __future__ import annotations

import asyncio
import uuid
from typing import Any, Callable, List

import grpc
import grpc.aio
import pytest

from adk_client import AsyncAdkClient, MemoryInput, errors

from conftest import Deployment, free_port


def uid(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def test_async_client_sessions_state_artifacts_and_memory(deployment: Deployment) -> None:
    async def scenario() -> None:
        app, user = uid("aio"), "alice"
        async with AsyncAdkClient(
            deployment.sessions, artifacts_target=deployment.artifacts, runner_target=deployment.runner
        ) as adk:
            await adk.wait_for_ready()
            session = await adk.create_session(app, user, session_id="s", state={"user:name": "Alice", "temp:x": 1})
            assert session.state == {"user:name": "Alice"}
            first = await adk.append_event(app, user, "s", text="one", state_delta={"n": 1}, expect_last_sequence=0)
            with pytest.raises(errors.PreconditionFailed):
                await adk.append_event(app, user, "s", text="lost", expect_last_sequence=0)
            await adk.append_event(app, user, "s", author="bot", text="two", expect_last_event_id=first.id)
            assert [e.text for e in (await adk.get_session(app, user, "s")).events] == ["one", "two"]
            assert [e.sequence async for e in adk.list_events(app, user, "s", page_size=1, newest_first=True)] == [2, 1]
            for n in range(3):
                await adk.create_session(app, user, session_id=f"more{n}")
            assert len([s async for s in adk.list_sessions(app, user, page_size=2)]) == 4
            assert await adk.get_user_state(app, user) == {"name": "Alice"}
            assert await adk.update_app_state(app, {"app:mode": "calm"}) == {"mode": "calm"}
            assert await adk.get_app_state(app) == {"mode": "calm"}
            fork = await adk.fork_session(app, user, "s", first.id)
            assert [e.text for e in fork.events] == ["one"] and fork.state["n"] == 1

            assert await adk.save_artifact(app, user, "s", "a.txt", "hello") == 1
            assert await adk.save_artifact(app, user, "s", "a.txt", b"\x00\x01", "application/x-test", version=5) == 5
            assert (await adk.load_artifact(app, user, "s", "a.txt", version=1)).data == "hello"
            meta = await adk.get_artifact_metadata(app, user, "s", "a.txt")
            assert (meta.version, meta.mime_type, meta.size_bytes) == (5, "application/x-test", 2)
            assert await adk.list_artifacts(app, user, "s") == ["a.txt"]
            await adk.delete_artifact(app, user, "s", "a.txt", version=5)
            assert await adk.list_versions(app, user, "s", "a.txt") == [1]

            assert await adk.add_memory(app, user, [MemoryInput(text="Alice likes tea", id="m1")]) == ["m1"]
            assert [m.id for m in await adk.search_memory(app, user, "tea")] == ["m1"]
            assert await adk.add_session_to_memory(app, user, "s") != []
            assert await adk.add_events_to_memory(app, user, "s", [first]) == [first.id]
            assert await adk.delete_memory(app, user, "m1") is True

            assert "assistant" in {a.name for a in await adk.list_apps()}
            assert (await adk.get_app("assistant")).root_agent.name == "assistant"
            run = [e async for e in adk.run("assistant", user, "chat", "hi", create_session=True)]
            rewound = await adk.rewind("assistant", user, "chat", run[0].invocation_id)
            assert rewound.sequence == 3
            assert await adk.cancel("assistant", user, "chat", run[0].invocation_id) is False
            await adk.delete_session(app, user, "s")
            with pytest.raises(errors.SessionNotFound) as missing:
                await adk.get_session(app, user, "s")
            assert missing.value.reason == "SESSION_NOT_FOUND"
            with pytest.raises(errors.InvalidArgument) as bad:
                await adk.create_session(app, "")
            assert bad.value.field == "user_id"

    asyncio.run(scenario())


class _Counting:
    """Counts the attempts of each method that leave the client. (grpc.aio files each
    interceptor under one kind only, so there is one per kind, counting into one list.)"""

    def __init__(self) -> None:
        self.calls: List[str] = []
        calls = self.calls

        def count(details: Any) -> None:
            method = details.method
            calls.append((method.decode() if isinstance(method, bytes) else method).rsplit("/", 1)[-1])

        class Unary(grpc.aio.UnaryUnaryClientInterceptor):
            async def intercept_unary_unary(self, continuation: Callable[..., Any], details: Any, request: Any) -> Any:
                count(details)
                return await continuation(details, request)

        class Upload(grpc.aio.StreamUnaryClientInterceptor):
            async def intercept_stream_unary(self, continuation: Callable[..., Any], details: Any, requests: Any) -> Any:
                count(details)
                return await continuation(details, requests)

        class Download(grpc.aio.UnaryStreamClientInterceptor):
            async def intercept_unary_stream(self, continuation: Callable[..., Any], details: Any, request: Any) -> Any:
                count(details)
                return await continuation(details, request)

        self.interceptors = [Unary(), Upload(), Download()]


def test_async_client_retries_only_calls_safe_to_repeat(tmp_path: Any) -> None:
    # A real outage: nothing listens on the port, so every attempt is UNAVAILABLE.
    small = tmp_path / "small.bin"
    small.write_bytes(b"abc")

    async def attempts(counting: _Counting, method: str, call: Callable[[], Any]) -> int:
        before = counting.calls.count(method)
        with pytest.raises(errors.Unavailable):
            await call()
        return counting.calls.count(method) - before

    async def scenario() -> None:
        counting = _Counting()
        async with AsyncAdkClient(
            f"127.0.0.1:{free_port()}", retries=2, backoff=0.01, max_backoff=0.05, interceptors=counting.interceptors
        ) as adk:
            cases = [
                ("GetSession", 3, lambda: adk.get_session("app", "u", "s")),
                ("ListArtifacts", 3, lambda: adk.list_artifacts("app", "u", "s")),
                ("AppendEvent", 3, lambda: adk.append_event("app", "u", "s", id="e1", text="x")),
                ("AppendEvent", 1, lambda: adk.append_event("app", "u", "s", text="x")),
                ("SaveArtifact", 3, lambda: adk.save_artifact("app", "u", "s", "f", "x", version=1)),
                ("SaveArtifact", 1, lambda: adk.save_artifact("app", "u", "s", "f", "x")),
                ("UploadArtifact", 3, lambda: adk.upload_file("app", "u", "s", "f", small, version=1)),
                ("UploadArtifact", 1, lambda: adk.upload_file("app", "u", "s", "f", small)),
                ("UploadArtifact", 1, lambda: adk.upload_artifact("app", "u", "s", "f", [b"x"], version=1)),
                ("DownloadArtifact", 3, lambda: adk.download_artifact("app", "u", "s", "f")),
                ("Cancel", 3, lambda: adk.cancel("app", "u", "s", "inv")),
                ("CreateSession", 1, lambda: adk.create_session("app", "u")),
                ("DeleteSession", 1, lambda: adk.delete_session("app", "u", "s")),
                ("AddMemory", 1, lambda: adk.add_memory("app", "u", ["x"])),
            ]
            for method, expected, call in cases:
                assert await attempts(counting, method, call) == expected, (method, expected)

            async def run() -> None:
                async for _ in adk.run("app", "u", "s", "hi"):
                    pass

            assert await attempts(counting, "Run", run) == 1

    asyncio.run(scenario())
