"""AsyncAdkClient: ``AdkClient`` over ``grpc.aio``, for asyncio programs.

Every method has the name, arguments and result of its ``AdkClient`` twin (see there for
what it does), awaited; streams are async iterators. Both build their requests, views and
retry decisions in the same modules (``_calls``, ``_retry``)::

    async with AsyncAdkClient("localhost:50051") as adk:
        async for event in adk.run("assistant", "alice", "chat1", "Hi", create_session=True):
            print(event.text)

Create it inside the running event loop (grpc.aio channels belong to the loop they are
made in).
"""
from __future__ import annotations

import asyncio
import inspect
import os
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import (
    Any,
    AsyncIterator,
    Awaitable,
    Callable,
    Dict,
    List,
    Optional,
    Sequence,
    Tuple,
    TypeVar,
    Union,
)

import grpc
import grpc.aio

from . import _calls as calls
from ._calls import DEFAULT, AsyncChunks, CallMetadata, MemoryInput, OnBusy, StateDict, Timeout, Unary
from ._convert import JsonValue
from ._retry import RetryPolicy, call_with_retry_async
from .client import PathLike
from .errors import AdkError, from_rpc_error
from .types import App, Artifact, ArtifactMetadata, Event, FunctionCall, Memory, MessageInput, Part, Session
from .v1 import artifact_pb2_grpc, event_pb2, memory_pb2_grpc, runner_pb2_grpc, session_pb2_grpc

T = TypeVar("T")
#: Answers a client tool's call (``run_with_tools``): the result, or an awaitable of it.
AsyncToolAnswer = Callable[[FunctionCall, Event], Union[JsonValue, Awaitable[JsonValue]]]


@dataclass
class AsyncDownload:
    """A streamed artifact: its metadata, then its bytes as ``async for`` asks for them.
    ``await close()`` (or leaving an ``async with``) stops the stream."""

    metadata: ArtifactMetadata
    chunks: AsyncIterator[bytes]

    def __aiter__(self) -> AsyncIterator[bytes]:
        return self.chunks

    async def close(self) -> None:
        close = getattr(self.chunks, "aclose", None)
        if close is not None:
            await close()

    async def __aenter__(self) -> "AsyncDownload":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


class AsyncAdkClient:
    """``AdkClient`` for asyncio (``grpc.aio``): same constructor, same methods, awaited.

    The generated aio stubs are ``client.sessions``, ``client.artifacts``, ``client.memory``
    and ``client.runner``; their errors are ``grpc.aio.AioRpcError`` (type them with
    ``adk_client.errors.from_rpc_error``)."""

    def __init__(
        self,
        target: str = "localhost:50051",
        *,
        artifacts_target: Optional[str] = None,
        runner_target: Optional[str] = None,
        memory_target: Optional[str] = None,
        timeout: Optional[float] = 30.0,
        credentials: Optional[grpc.ChannelCredentials] = None,
        options: Sequence[Tuple[str, Any]] = (),
        metadata: Sequence[Tuple[str, str]] = (),
        retries: int = 3,
        backoff: float = 0.1,
        max_backoff: float = 5.0,
        interceptors: Sequence[grpc.aio.ClientInterceptor] = (),
    ) -> None:
        self.timeout = timeout
        self.retry = RetryPolicy(retries=retries, backoff=backoff, max_backoff=max_backoff)
        self.metadata = tuple(metadata)
        options = calls.channel_options(self.retry, options)
        self._channels: Dict[str, grpc.aio.Channel] = {}

        def channel(addr: str) -> grpc.aio.Channel:
            if addr not in self._channels:
                if credentials is not None:
                    self._channels[addr] = grpc.aio.secure_channel(
                        addr, credentials, options=list(options), interceptors=list(interceptors)
                    )
                else:
                    self._channels[addr] = grpc.aio.insecure_channel(
                        addr, options=list(options), interceptors=list(interceptors)
                    )
            return self._channels[addr]

        self.sessions: Any = session_pb2_grpc.SessionServiceStub(channel(target))
        self.artifacts: Any = artifact_pb2_grpc.ArtifactServiceStub(channel(artifacts_target or target))
        self.memory: Any = memory_pb2_grpc.MemoryServiceStub(channel(memory_target or target))
        self.runner: Any = runner_pb2_grpc.AgentRunnerStub(channel(runner_target or target))
        self._stubs: Dict[str, Any] = {
            "sessions": self.sessions,
            "artifacts": self.artifacts,
            "memory": self.memory,
            "runner": self.runner,
        }

    async def _unary(self, timeout: Timeout, metadata: CallMetadata, call: Unary[T]) -> T:
        method = getattr(self._stubs[call.service], call.method)
        seconds, md = calls.deadline_of(timeout, self.timeout), self.metadata + tuple(metadata)
        reply = await call_with_retry_async(
            self.retry, call.safe, lambda: method(call.request, timeout=seconds, metadata=md)
        )
        return call.result(reply)

    async def _pages(
        self, timeout: Timeout, metadata: CallMetadata, page: Callable[[str], Unary[calls.Page[T]]]
    ) -> AsyncIterator[T]:
        token = ""
        while True:
            result = await self._unary(timeout, metadata, page(token))
            for item in result.items:
                yield item
            token = result.next_page_token
            if not token:
                return

    async def wait_for_ready(self, timeout: float = 10.0) -> None:
        """Waits until every channel is connected; ``asyncio.TimeoutError`` otherwise."""
        for ch in self._channels.values():
            await asyncio.wait_for(ch.channel_ready(), timeout)

    async def close(self) -> None:
        for ch in self._channels.values():
            await ch.close()

    async def __aenter__(self) -> "AsyncAdkClient":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # ---- sessions ---------------------------------------------------------------

    async def create_session(
        self,
        app: str,
        user: str,
        *,
        state: Optional[StateDict] = None,
        session_id: Optional[str] = None,
        ttl: Union[timedelta, float, None] = None,
        timeout: Timeout = DEFAULT,
        metadata: CallMetadata = (),
    ) -> Session:
        return await self._unary(
            timeout, metadata, calls.create_session(app, user, state=state, session_id=session_id, ttl=ttl)
        )

    async def get_session(
        self,
        app: str,
        user: str,
        session_id: str,
        *,
        num_recent_events: Optional[int] = None,
        after: Optional[datetime] = None,
        since_compaction: bool = False,
        timeout: Timeout = DEFAULT,
        metadata: CallMetadata = (),
    ) -> Session:
        return await self._unary(
            timeout,
            metadata,
            calls.get_session(
                app, user, session_id, num_recent_events=num_recent_events, after=after, since_compaction=since_compaction
            )
        )

    def list_sessions(
        self,
        app: str,
        user: str = "",
        *,
        page_size: int = 0,
        timeout: Timeout = DEFAULT,
        metadata: CallMetadata = (),
    ) -> AsyncIterator[Session]:
        return self._pages(timeout, metadata, lambda token: calls.list_sessions(app, user, page_size, token))

    async def delete_session(
        self,
        app: str,
        user: str,
        session_id: str,
        *,
        timeout: Timeout = DEFAULT,
        metadata: CallMetadata = (),
    ) -> None:
        await self._unary(timeout, metadata, calls.delete_session(app, user, session_id))

    async def append_event(
        self,
        app: str,
        user: str,
        session_id: str,
        *,
        author: str = "user",
        text: Optional[str] = None,
        parts: Sequence[Part] = (),
        state_delta: Optional[StateDict] = None,
        id: Optional[str] = None,
        invocation_id: Optional[str] = None,
        event: Optional[event_pb2.Event] = None,
        expect_last_event_id: Optional[str] = None,
        expect_last_sequence: Optional[int] = None,
        timeout: Timeout = DEFAULT,
        metadata: CallMetadata = (),
    ) -> Event:
        return await self._unary(
            timeout,
            metadata,
            calls.append_event(
                app,
                user,
                session_id,
                author=author,
                text=text,
                parts=parts,
                state_delta=state_delta,
                id=id,
                invocation_id=invocation_id,
                event=event,
                expect_last_event_id=expect_last_event_id,
                expect_last_sequence=expect_last_sequence,
            )
        )

    def list_events(
        self,
        app: str,
        user: str,
        session_id: str,
        *,
        page_size: int = 0,
        newest_first: bool = False,
        timeout: Timeout = DEFAULT,
        metadata: CallMetadata = (),
    ) -> AsyncIterator[Event]:
        return self._pages(
            timeout, metadata, lambda token: calls.list_events(app, user, session_id, page_size, newest_first, token)
        )

    async def watch_session(
        self,
        app: str,
        user: str,
        session_id: str,
        *,
        after_sequence: Optional[int] = None,
        timeout: Optional[float] = None,
        metadata: CallMetadata = (),
    ) -> AsyncIterator[Event]:
        cursor = calls.WatchCursor(app, user, session_id, after_sequence, self.retry)
        clock = calls.WatchDeadline(timeout)
        while True:
            err: Optional[AdkError] = None
            try:
                if cursor.needs_anchor:
                    cursor.after = await self._unary(
                        clock.remaining(self.timeout), metadata, calls.last_sequence(app, user, session_id)
                    )
                stream = self.sessions.WatchSession(
                    cursor.request(), timeout=clock.remaining(None), metadata=self.metadata + tuple(metadata)
                )
                try:
                    async for message in stream:
                        yield cursor.seen(message)
                finally:
                    stream.cancel()  # a no-op once the stream has ended
            except grpc.RpcError as raw:
                err = from_rpc_error(raw)
            # Reconnect backoff of a dropped watch; it then resumes from its last sequence.
            await asyncio.sleep(cursor.dropped(err))

    async def get_user_state(
        self,
        app: str,
        user: str,
        *,
        timeout: Timeout = DEFAULT,
        metadata: CallMetadata = (),
    ) -> Dict[str, JsonValue]:
        return await self._unary(timeout, metadata, calls.get_user_state(app, user))

    async def get_app_state(
        self,
        app: str,
        *,
        timeout: Timeout = DEFAULT,
        metadata: CallMetadata = (),
    ) -> Dict[str, JsonValue]:
        return await self._unary(timeout, metadata, calls.get_app_state(app))

    async def update_app_state(
        self,
        app: str,
        state_delta: StateDict,
        *,
        timeout: Timeout = DEFAULT,
        metadata: CallMetadata = (),
    ) -> Dict[str, JsonValue]:
        return await self._unary(timeout, metadata, calls.update_app_state(app, state_delta))

    async def fork_session(
        self,
        app: str,
        user: str,
        session_id: str,
        up_to_event_id: str,
        *,
        new_session_id: Optional[str] = None,
        timeout: Timeout = DEFAULT,
        metadata: CallMetadata = (),
    ) -> Session:
        return await self._unary(
            timeout,
            metadata,
            calls.fork_session(app, user, session_id, up_to_event_id=up_to_event_id, new_session_id=new_session_id)
        )

    # ---- artifacts --------------------------------------------------------------

    async def save_artifact(
        self,
        app: str,
        user: str,
        session_id: str,
        file_name: str,
        data: Union[bytes, str],
        mime_type: Optional[str] = None,
        *,
        custom_metadata: Optional[StateDict] = None,
        version: Optional[int] = None,
        timeout: Timeout = DEFAULT,
        metadata: CallMetadata = (),
    ) -> int:
        return await self._unary(
            timeout,
            metadata,
            calls.save_artifact(
                app, user, session_id, file_name, data, mime_type, custom_metadata=custom_metadata, version=version
            )
        )

    async def upload_artifact(
        self,
        app: str,
        user: str,
        session_id: str,
        file_name: str,
        chunks: AsyncChunks,
        *,
        mime_type: Optional[str] = None,
        version: Optional[int] = None,
        custom_metadata: Optional[StateDict] = None,
        size_bytes: Optional[int] = None,
        is_text: bool = False,
        timeout: Optional[float] = None,
        metadata: CallMetadata = (),
    ) -> int:
        """Streams an artifact up from an async iterable (or iterable, or binary file) of chunks."""
        header = calls.upload_header(
            app,
            user,
            session_id,
            file_name,
            mime_type=mime_type,
            version=version,
            custom_metadata=custom_metadata,
            size_bytes=size_bytes,
            is_text=is_text,
        )
        return await self._upload(header, lambda: chunks, safe=False, timeout=timeout, metadata=metadata)

    async def upload_file(
        self,
        app: str,
        user: str,
        session_id: str,
        file_name: str,
        path: PathLike,
        *,
        mime_type: Optional[str] = None,
        version: Optional[int] = None,
        custom_metadata: Optional[StateDict] = None,
        timeout: Optional[float] = None,
        metadata: CallMetadata = (),
    ) -> int:
        guessed, size = calls.file_header_args(path, mime_type)
        header = calls.upload_header(
            app,
            user,
            session_id,
            file_name,
            mime_type=guessed,
            version=version,
            custom_metadata=custom_metadata,
            size_bytes=size,
            is_text=False,
        )
        # The file is read in 256 KiB blocks on the event loop: a local read that short does
        # not hold the loop up noticeably, and needs no thread per chunk.
        return await self._upload(
            header, lambda: calls.file_chunks(path), safe=version is not None, timeout=timeout, metadata=metadata
        )

    async def _upload(
        self,
        header: Any,
        chunks: Callable[[], AsyncChunks],
        *,
        safe: bool,
        timeout: Optional[float],
        metadata: CallMetadata,
    ) -> int:
        method = self.artifacts.UploadArtifact
        reply = await call_with_retry_async(
            self.retry,
            safe,
            lambda: method(
                calls.upload_messages_async(header, chunks()), timeout=timeout, metadata=self.metadata + tuple(metadata)
            ),
        )
        return int(reply.version)

    async def load_artifact(
        self,
        app: str,
        user: str,
        session_id: str,
        file_name: str,
        version: Optional[int] = None,
        *,
        timeout: Timeout = DEFAULT,
        metadata: CallMetadata = (),
    ) -> Artifact:
        return await self._unary(timeout, metadata, calls.load_artifact(app, user, session_id, file_name, version))

    async def download_artifact(
        self,
        app: str,
        user: str,
        session_id: str,
        file_name: str,
        version: Optional[int] = None,
        *,
        chunk_size: int = 0,
        timeout: Optional[float] = None,
        metadata: CallMetadata = (),
    ) -> AsyncDownload:
        request = calls.download_request(app, user, session_id, file_name, version, chunk_size)

        async def start() -> Tuple[Any, ArtifactMetadata]:
            stream = self.artifacts.DownloadArtifact(request, timeout=timeout, metadata=self.metadata + tuple(metadata))
            try:
                first = await stream.read()
                return stream, calls.download_metadata(None if first is grpc.aio.EOF else first)
            except BaseException:
                stream.cancel()
                raise

        stream, meta = await call_with_retry_async(self.retry, True, start)
        return AsyncDownload(meta, _chunks(stream))

    async def download_file(
        self,
        app: str,
        user: str,
        session_id: str,
        file_name: str,
        path: PathLike,
        version: Optional[int] = None,
        *,
        chunk_size: int = 0,
        timeout: Optional[float] = None,
        metadata: CallMetadata = (),
    ) -> ArtifactMetadata:
        partial = calls.part_file(path)
        async with await self.download_artifact(
            app, user, session_id, file_name, version, chunk_size=chunk_size, timeout=timeout, metadata=metadata
        ) as download:
            try:
                with open(partial, "wb") as out:
                    async for chunk in download:
                        out.write(chunk)
            except BaseException:
                if os.path.exists(partial):
                    os.remove(partial)
                raise
        os.replace(partial, path)
        return download.metadata

    async def get_artifact_metadata(
        self,
        app: str,
        user: str,
        session_id: str,
        file_name: str,
        version: Optional[int] = None,
        *,
        timeout: Timeout = DEFAULT,
        metadata: CallMetadata = (),
    ) -> ArtifactMetadata:
        return await self._unary(
            timeout, metadata, calls.get_artifact_metadata(app, user, session_id, file_name, version)
        )

    async def list_artifacts(
        self,
        app: str,
        user: str,
        session_id: str,
        *,
        timeout: Timeout = DEFAULT,
        metadata: CallMetadata = (),
    ) -> List[str]:
        return await self._unary(timeout, metadata, calls.list_artifacts(app, user, session_id))

    async def list_versions(
        self,
        app: str,
        user: str,
        session_id: str,
        file_name: str,
        *,
        timeout: Timeout = DEFAULT,
        metadata: CallMetadata = (),
    ) -> List[int]:
        return await self._unary(timeout, metadata, calls.list_versions(app, user, session_id, file_name))

    async def delete_artifact(
        self,
        app: str,
        user: str,
        session_id: str,
        file_name: str,
        version: Optional[int] = None,
        *,
        timeout: Timeout = DEFAULT,
        metadata: CallMetadata = (),
    ) -> None:
        await self._unary(timeout, metadata, calls.delete_artifact(app, user, session_id, file_name, version))

    # ---- memory -----------------------------------------------------------------

    async def add_session_to_memory(
        self,
        app: str,
        user: str,
        session_id: str,
        *,
        timeout: Timeout = DEFAULT,
        metadata: CallMetadata = (),
    ) -> List[str]:
        return await self._unary(timeout, metadata, calls.add_session_to_memory(app, user, session_id))

    async def add_events_to_memory(
        self,
        app: str,
        user: str,
        session_id: str,
        events: Sequence[Union[Event, event_pb2.Event]],
        *,
        custom_metadata: Optional[StateDict] = None,
        timeout: Timeout = DEFAULT,
        metadata: CallMetadata = (),
    ) -> List[str]:
        return await self._unary(
            timeout, metadata, calls.add_events_to_memory(app, user, session_id, events, custom_metadata)
        )

    async def add_memory(
        self,
        app: str,
        user: str,
        memories: Sequence[Union[MemoryInput, str]],
        *,
        custom_metadata: Optional[StateDict] = None,
        timeout: Timeout = DEFAULT,
        metadata: CallMetadata = (),
    ) -> List[str]:
        return await self._unary(timeout, metadata, calls.add_memory(app, user, memories, custom_metadata))

    async def search_memory(
        self,
        app: str,
        user: str,
        query: str,
        *,
        limit: int = 0,
        timeout: Timeout = DEFAULT,
        metadata: CallMetadata = (),
    ) -> List[Memory]:
        return await self._unary(timeout, metadata, calls.search_memory(app, user, query, limit))

    async def delete_memory(
        self,
        app: str,
        user: str,
        memory_id: str,
        *,
        timeout: Timeout = DEFAULT,
        metadata: CallMetadata = (),
    ) -> bool:
        return await self._unary(timeout, metadata, calls.delete_memory(app, user, memory_id))

    # ---- runner -----------------------------------------------------------------

    def run(
        self,
        app: str,
        user: str,
        session_id: str,
        message: MessageInput,
        *,
        streaming: bool = False,
        state_delta: Optional[StateDict] = None,
        create_session: bool = False,
        max_llm_calls: int = 0,
        keep_running: bool = False,
        on_busy: Optional[OnBusy] = None,
        timeout: Optional[float] = None,
        metadata: CallMetadata = (),
    ) -> AsyncIterator[Event]:
        """Leaving the ``async for`` early (or ``aclose()``) cancels the call and so the invocation."""
        request = calls.run_request(
            app,
            user,
            session_id,
            message,
            streaming=streaming,
            state_delta=state_delta,
            create_session=create_session,
            max_llm_calls=max_llm_calls,
            keep_running=keep_running,
            on_busy=on_busy,
        )
        return _events(self.runner.Run(request, timeout=timeout, metadata=self.metadata + tuple(metadata)))

    async def run_with_tools(
        self,
        app: str,
        user: str,
        session_id: str,
        message: MessageInput,
        answer: AsyncToolAnswer,
        *,
        streaming: bool = False,
        state_delta: Optional[StateDict] = None,
        create_session: bool = False,
        max_llm_calls: int = 0,
        on_busy: Optional[OnBusy] = None,
        timeout: Optional[float] = None,
        metadata: CallMetadata = (),
    ) -> AsyncIterator[Event]:
        """``AdkClient.run_with_tools``; ``answer`` may be a coroutine function."""
        next_message: Optional[MessageInput] = message
        first = True
        while next_message is not None:
            pending: List[Tuple[FunctionCall, Event]] = []
            async for event in self.run(
                app,
                user,
                session_id,
                next_message,
                streaming=streaming,
                state_delta=state_delta if first else None,
                create_session=create_session and first,
                max_llm_calls=max_llm_calls,
                on_busy=on_busy,
                timeout=timeout,
                metadata=metadata,
            ):
                pending.extend((call, event) for call in event.client_tool_calls)
                yield event
            first = False
            answered: List[Tuple[FunctionCall, JsonValue]] = []
            for call, event in pending:
                result = answer(call, event)
                answered.append((call, await result if inspect.isawaitable(result) else result))
            next_message = calls.tool_answers(answered) if answered else None

    async def cancel(
        self,
        app: str,
        user: str,
        session_id: str,
        invocation_id: str,
        *,
        timeout: Timeout = DEFAULT,
        metadata: CallMetadata = (),
    ) -> bool:
        return await self._unary(timeout, metadata, calls.cancel(app, user, session_id, invocation_id))

    async def rewind(
        self,
        app: str,
        user: str,
        session_id: str,
        rewind_before_invocation_id: str,
        *,
        timeout: Timeout = DEFAULT,
        metadata: CallMetadata = (),
    ) -> Event:
        return await self._unary(timeout, metadata, calls.rewind(app, user, session_id, rewind_before_invocation_id))

    async def list_apps(
        self,
        *,
        timeout: Timeout = DEFAULT,
        metadata: CallMetadata = (),
    ) -> List[App]:
        return await self._unary(timeout, metadata, calls.list_apps())

    async def get_app(
        self,
        app: str,
        *,
        timeout: Timeout = DEFAULT,
        metadata: CallMetadata = (),
    ) -> App:
        return await self._unary(timeout, metadata, calls.get_app(app))


async def _events(call: Any) -> AsyncIterator[Event]:
    try:
        async for message in call:
            yield Event.from_proto(message)
    except grpc.RpcError as err:
        raise from_rpc_error(err) from err
    finally:
        call.cancel()  # a no-op once the stream has ended


async def _chunks(call: Any) -> AsyncIterator[bytes]:
    # read(), not async for: the metadata was read() and grpc.aio forbids mixing the two.
    try:
        while (message := await call.read()) is not grpc.aio.EOF:
            if message.WhichOneof("message") == "chunk":
                yield message.chunk
    except grpc.RpcError as err:
        raise from_rpc_error(err) from err
    finally:
        call.cancel()
