# Generated from aio.py by clients/python/generate_sync.py: do not edit. Edit aio.py (the
# asyncio client, the one source of both), then run `python generate_sync.py` in clients/python.
"""AdkClient: every RPC of adk.v1 (sessions, artifacts, memory, runner) behind plain,
blocking Python calls. ``adk_client.aio`` has the same client over ``grpc.aio``; both
build their requests and views in ``_calls`` and retry by ``_retry``."""
from __future__ import annotations

import time
import os
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import (
    Any,
    Iterator,
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

from . import _calls as calls
from ._calls import DEFAULT, Chunks, CallMetadata, MemoryInput, OnBusy, StateDict, Timeout, Unary
from ._convert import JsonValue
from ._retry import RetryPolicy, call_with_retry
from .errors import AdkError, from_rpc_error
from .types import (
    App,
    Artifact,
    ArtifactMetadata,
    Event,
    FunctionCall,
    GeneratedMemory,
    IngestResult,
    Memory,
    MemoryRevision,
    MessageInput,
    Part,
    Session,
)
from .v1 import artifact_pb2_grpc, event_pb2, memory_pb2_grpc, runner_pb2_grpc, session_pb2_grpc

# Defined elsewhere, and public here too.
from ._calls import ToolAnswer as ToolAnswer, PathLike as PathLike
from .types import AnyEvent as AnyEvent, event_text as event_text, function_calls as function_calls
from .types import state_delta as state_delta

T = TypeVar("T")


@dataclass
class Download:
    """A streamed artifact: its metadata, then its bytes in chunks as they arrive (never
    all in memory). Iterate it; closing it (or leaving its ``with`` block) stops the stream."""

    metadata: ArtifactMetadata
    chunks: Iterator[bytes]

    def __iter__(self) -> Iterator[bytes]:
        return self.chunks

    def close(self) -> None:
        close = getattr(self.chunks, "close", None)
        if close is not None:
            close()

    def __enter__(self) -> "Download":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AdkClient:
    """A client of ``adk.v1.SessionService``, ``ArtifactService``, ``MemoryService`` and
    ``AgentRunner``.

    ``AdkClient("localhost:50051")`` talks to ``adk-server``, which serves them all on one
    port; with the services deployed separately, give the other addresses too (memory is
    served by the session server). Failed calls raise the exception of their ``ErrorInfo``
    reason (``adk_client.errors``: ``SessionNotFound``, ``SessionBusy``, ``LimitExceeded``…),
    each a ``grpc.RpcError`` with ``.code()`` and ``.details()``.

    Calls that are safe to repeat are retried up to ``retries`` times when the server is
    unreachable (UNAVAILABLE) or says a retry may succeed (RetryInfo), after ``backoff``
    seconds doubling up to ``max_backoff`` (with jitter; the server's RetryInfo delay when
    it gives one): reads, an append whose event has an id, a save or upload with an explicit
    version, a cancel. Nothing else is ever retried: a create, a run, a delete or an append
    without an event id could happen twice.

    The generated stubs stay available as ``client.sessions``, ``client.artifacts``,
    ``client.memory`` and ``client.runner``, never retried: the blocking ones type their
    unary errors the same way, those over ``grpc.aio`` raise its ``AioRpcError`` (type it
    with ``adk_client.errors.from_rpc_error``).
    """

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
        interceptors: Sequence[Any] = (),
    ) -> None:
        """``timeout`` (seconds) bounds each unary call; streams have none unless given one.
        ``credentials`` makes the channels TLS; without, they are plaintext. ``metadata`` is
        sent with every call (e.g. ``[("authorization", "Bearer …")]``).

        Every method takes a ``timeout`` and ``metadata`` of its own too (as Google's
        generated clients do): a unary call's ``timeout`` replaces the client's (``None``:
        no deadline), a stream's bounds that stream; its ``metadata`` is sent after the
        client's."""
        self.timeout = timeout
        self.retry = RetryPolicy(retries=retries, backoff=backoff, max_backoff=max_backoff)
        self.metadata = tuple(metadata)
        options = calls.channel_options(self.retry, options)
        self._channels: Dict[str, grpc.Channel] = {}

        def channel(addr: str) -> grpc.Channel:
            if addr not in self._channels:
                # A grpc.aio channel takes its interceptors when made; a blocking one is wrapped.
                if credentials is not None:
                    ch = grpc.secure_channel(addr, credentials, options=list(options))
                else:
                    ch = grpc.insecure_channel(addr, options=list(options))
                self._channels[addr] = grpc.intercept_channel(ch, *interceptors)
            return self._channels[addr]

        self._stubs: Dict[str, Any] = {
            "sessions": session_pb2_grpc.SessionServiceStub(channel(target)),
            "artifacts": artifact_pb2_grpc.ArtifactServiceStub(channel(artifacts_target or target)),
            "memory": memory_pb2_grpc.MemoryServiceStub(channel(memory_target or target)),
            "runner": runner_pb2_grpc.AgentRunnerStub(channel(runner_target or target)),
        }
        # The generated stubs, public: the blocking ones raise the typed errors of their unary calls.
        self.sessions: Any = calls.TypedStub(self._stubs["sessions"])
        self.artifacts: Any = calls.TypedStub(self._stubs["artifacts"])
        self.memory: Any = calls.TypedStub(self._stubs["memory"])
        self.runner: Any = calls.TypedStub(self._stubs["runner"])

    def _unary(self, timeout: Timeout, metadata: CallMetadata, call: Unary[T]) -> T:
        method = getattr(self._stubs[call.service], call.method)
        seconds, md = calls.deadline_of(timeout, self.timeout), self.metadata + tuple(metadata)
        reply = call_with_retry(
            self.retry, call.safe, lambda: method(call.request, timeout=seconds, metadata=md)
        )
        return call.result(reply)

    def _pages(
        self, timeout: Timeout, metadata: CallMetadata, page: Callable[[str], Unary[calls.Page[T]]]
    ) -> Iterator[T]:
        token = ""
        while True:
            result = self._unary(timeout, metadata, page(token))
            for item in result.items:
                yield item
            token = result.next_page_token
            if not token:
                return

    def wait_for_ready(self, timeout: float = 10.0) -> None:
        """Blocks until every channel is connected; ``grpc.FutureTimeoutError`` otherwise."""
        for ch in self._channels.values():
            grpc.channel_ready_future(ch).result(timeout=timeout)

    def close(self) -> None:
        for ch in self._channels.values():
            ch.close()

    def __enter__(self) -> "AdkClient":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- sessions ---------------------------------------------------------------

    def create_session(
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
        """Creates a session (``session_id=None``: the server generates a UUID).

        ``state`` keys are split by prefix: ``app:`` and ``user:`` go to the shared
        scopes, ``temp:`` is dropped, the rest is this session's. ``ttl`` (seconds or a
        timedelta) expires it after that long without an append."""
        return self._unary(
            timeout, metadata, calls.create_session(app, user, state=state, session_id=session_id, ttl=ttl)
        )

    def get_session(
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
        """Reads a session: merged state and its events, oldest first (only the last
        ``num_recent_events``, only those at or ``after`` a time). ``SessionNotFound`` when missing."""
        return self._unary(
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
    ) -> Iterator[Session]:
        """Every session of a user (or of the whole app): merged state, no events. Pages
        (``page_size`` each, 0: the server's 100) are fetched as the loop asks for them."""
        return self._pages(timeout, metadata, lambda token: calls.list_sessions(app, user, page_size, token))

    def delete_session(
        self,
        app: str,
        user: str,
        session_id: str,
        *,
        timeout: Timeout = DEFAULT,
        metadata: CallMetadata = (),
    ) -> None:
        """Deletes a session with its events, state and artifacts (missing: fine)."""
        self._unary(timeout, metadata, calls.delete_session(app, user, session_id))

    def append_event(
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
        """Appends an event and returns it as stored (id, timestamp and sequence set).

        Build it from ``author``, ``text`` (role "user" for the user, "model" otherwise),
        ``parts``, ``state_delta``, ``id`` and ``invocation_id``, or pass a whole ``event``.
        With ``expect_last_event_id`` / ``expect_last_sequence`` (0: no events yet) it is
        stored only if the session's last event is still that one, else
        ``PreconditionFailed`` and nothing is stored. With an ``id`` it is retried: the
        server stores an id once."""
        return self._unary(
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
    ) -> Iterator[Event]:
        """The session's events, oldest first (or newest first), a page at a time as the loop asks."""
        return self._pages(
            timeout, metadata, lambda token: calls.list_events(app, user, session_id, page_size, newest_first, token)
        )

    def watch_session(
        self,
        app: str,
        user: str,
        session_id: str,
        *,
        after_sequence: Optional[int] = None,
        timeout: Optional[float] = None,
        metadata: CallMetadata = (),
    ) -> Iterator[Event]:
        """The session's events as they are appended from the time the loop starts (those
        after ``after_sequence`` first, when given: 0 replays the whole log), until the loop stops. A dropped connection or
        a restarted server is resumed from the last sequence seen, with backoff: nothing
        missed, nothing twice. Raises ``SessionNotFound`` when the session is deleted or
        expires; keeps reconnecting while the server is unreachable. ``timeout`` (seconds,
        from the first call) ends the whole watch, reconnections included, with
        ``DeadlineExceeded``."""
        cursor = calls.WatchCursor(app, user, session_id, after_sequence, self.retry)
        clock = calls.WatchDeadline(timeout)
        while True:
            err: Optional[AdkError] = None
            try:
                if cursor.needs_anchor:
                    cursor.after = self._unary(
                        clock.remaining(self.timeout), metadata, calls.last_sequence(app, user, session_id)
                    )
                stream = self._stubs["sessions"].WatchSession(
                    cursor.request(), timeout=clock.remaining(None), metadata=self.metadata + tuple(metadata)
                )
                try:
                    for message in stream:
                        yield cursor.seen(message)
                finally:
                    stream.cancel()  # a no-op once the stream has ended
            except grpc.RpcError as raw:
                err = from_rpc_error(raw)
            # Reconnect backoff of a dropped watch; it then resumes from its last sequence.
            time.sleep(cursor.dropped(err))

    def get_user_state(
        self,
        app: str,
        user: str,
        *,
        timeout: Timeout = DEFAULT,
        metadata: CallMetadata = (),
    ) -> Dict[str, JsonValue]:
        """The user's ``user:`` state, keys without their prefix."""
        return self._unary(timeout, metadata, calls.get_user_state(app, user))

    def get_app_state(
        self,
        app: str,
        *,
        timeout: Timeout = DEFAULT,
        metadata: CallMetadata = (),
    ) -> Dict[str, JsonValue]:
        """The app's ``app:`` state, keys without their prefix."""
        return self._unary(timeout, metadata, calls.get_app_state(app))

    def update_app_state(
        self,
        app: str,
        state_delta: StateDict,
        *,
        timeout: Timeout = DEFAULT,
        metadata: CallMetadata = (),
    ) -> Dict[str, JsonValue]:
        """Sets ``app:`` keys (every key must carry the prefix); returns the app's state after."""
        return self._unary(timeout, metadata, calls.update_app_state(app, state_delta))

    def fork_session(
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
        """A new session with the events up to and including ``up_to_event_id`` (the source is untouched)."""
        return self._unary(
            timeout,
            metadata,
            calls.fork_session(app, user, session_id, up_to_event_id=up_to_event_id, new_session_id=new_session_id)
        )

    # ---- artifacts --------------------------------------------------------------

    def save_artifact(
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
        """Saves the next version (or ``version``) in one message and returns its number.

        ``str`` data is stored as a text part (loaded back as ``str``) unless a MIME type
        other than text/plain is given: then it is stored as its UTF-8 bytes. ``bytes``
        are stored with ``mime_type`` (default application/octet-stream). A ``user:``
        file name is visible from every session of the user. For more than one message
        (4 MiB) use ``upload_artifact`` or ``upload_file``."""
        return self._unary(
            timeout,
            metadata,
            calls.save_artifact(
                app, user, session_id, file_name, data, mime_type, custom_metadata=custom_metadata, version=version
            )
        )

    def upload_artifact(
        self,
        app: str,
        user: str,
        session_id: str,
        file_name: str,
        chunks: Chunks,
        *,
        mime_type: Optional[str] = None,
        version: Optional[int] = None,
        custom_metadata: Optional[StateDict] = None,
        size_bytes: Optional[int] = None,
        is_text: bool = False,
        timeout: Optional[float] = None,
        metadata: CallMetadata = (),
    ) -> int:
        """Streams an artifact up (UploadArtifact) from an iterable of byte chunks (in asyncio an
        async one too) or a binary file object, never holding it all in memory; returns its
        version. Nothing is visible until the upload completes. ``size_bytes``, when known, is
        checked by the server before it stores anything; ``is_text`` stores UTF-8 bytes as text.
        A stream is consumed by its first attempt, so it is never retried (``upload_file`` is,
        with a version)."""
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
        return self._upload(header, lambda: chunks, safe=False, timeout=timeout, metadata=metadata)

    def upload_file(
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
        """Streams a file up, a chunk at a time; returns its version. The MIME type is
        guessed from the path unless given; the size is sent for the server to check. With
        an explicit ``version`` it is retried (the file is read again)."""
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
        return self._upload(
            header, lambda: calls.file_chunks(path), safe=version is not None, timeout=timeout, metadata=metadata
        )

    def _upload(
        self,
        header: Any,
        chunks: Callable[[], Chunks],
        *,
        safe: bool,
        timeout: Optional[float],
        metadata: CallMetadata,
    ) -> int:
        method = self._stubs["artifacts"].UploadArtifact
        reply = call_with_retry(
            self.retry,
            safe,
            lambda: method(
                calls.upload_messages(header, chunks()), timeout=timeout, metadata=self.metadata + tuple(metadata)
            ),
        )
        return int(reply.version)

    def load_artifact(
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
        """Loads the latest version (or ``version``) in one message; ``ArtifactNotFound`` when missing."""
        return self._unary(timeout, metadata, calls.load_artifact(app, user, session_id, file_name, version))

    def download_artifact(
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
    ) -> Download:
        """Streams an artifact down (DownloadArtifact): its metadata at once, then its
        bytes as the returned ``Download`` is iterated. Opening it is retried (nothing has
        been handed out yet); ``ArtifactNotFound`` when missing."""
        request = calls.download_request(app, user, session_id, file_name, version, chunk_size)

        method = self._stubs["artifacts"].DownloadArtifact

        def start() -> Tuple[Any, ArtifactMetadata]:
            stream = method(request, timeout=timeout, metadata=self.metadata + tuple(metadata))
            try:
                return stream, calls.download_metadata(next(stream, None))
            except BaseException:
                stream.cancel()
                raise

        stream, meta = call_with_retry(self.retry, True, start)
        return Download(meta, _chunks(stream))

    def download_file(
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
        """Streams an artifact into a file, a chunk at a time; returns its metadata. The
        file appears at ``path`` only once complete (``path + ".part"`` until then)."""
        partial = calls.part_file(path)
        with self.download_artifact(
            app, user, session_id, file_name, version, chunk_size=chunk_size, timeout=timeout, metadata=metadata
        ) as download:
            try:
                with open(partial, "wb") as out:
                    for chunk in download:
                        out.write(chunk)
            except BaseException:
                if os.path.exists(partial):
                    os.remove(partial)
                raise
        os.replace(partial, path)
        return download.metadata

    def get_artifact_metadata(
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
        """One version's metadata (the latest unless ``version``), without its bytes."""
        return self._unary(
            timeout, metadata, calls.get_artifact_metadata(app, user, session_id, file_name, version)
        )

    def list_artifacts(
        self,
        app: str,
        user: str,
        session_id: str,
        *,
        timeout: Timeout = DEFAULT,
        metadata: CallMetadata = (),
    ) -> List[str]:
        """File names visible from a session (its own and the user's ``user:`` ones), sorted."""
        return self._unary(timeout, metadata, calls.list_artifacts(app, user, session_id))

    def list_versions(
        self,
        app: str,
        user: str,
        session_id: str,
        file_name: str,
        *,
        timeout: Timeout = DEFAULT,
        metadata: CallMetadata = (),
    ) -> List[int]:
        """An artifact's versions, newest first."""
        return self._unary(timeout, metadata, calls.list_versions(app, user, session_id, file_name))

    def delete_artifact(
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
        """Deletes one version, or all of them (missing: fine)."""
        self._unary(timeout, metadata, calls.delete_artifact(app, user, session_id, file_name, version))

    # ---- memory -----------------------------------------------------------------

    def add_session_to_memory(
        self,
        app: str,
        user: str,
        session_id: str,
        *,
        timeout: Timeout = DEFAULT,
        metadata: CallMetadata = (),
    ) -> List[str]:
        """Adds a stored session's events to the user's memory; returns the memory ids."""
        return self._unary(timeout, metadata, calls.add_session_to_memory(app, user, session_id))

    def add_events_to_memory(
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
        """Adds some events (e.g. the latest turn) to the user's memory; returns the memory ids."""
        return self._unary(
            timeout, metadata, calls.add_events_to_memory(app, user, session_id, events, custom_metadata)
        )

    def add_memory(
        self,
        app: str,
        user: str,
        memories: Sequence[Union[MemoryInput, str]],
        *,
        custom_metadata: Optional[StateDict] = None,
        timeout: Timeout = DEFAULT,
        metadata: CallMetadata = (),
    ) -> List[str]:
        """Adds memories written by the app (texts, or ``MemoryInput``); returns their ids."""
        return self._unary(timeout, metadata, calls.add_memory(app, user, memories, custom_metadata))

    def search_memory(
        self,
        app: str,
        user: str,
        query: str,
        *,
        limit: int = 0,
        timeout: Timeout = DEFAULT,
        metadata: CallMetadata = (),
    ) -> List[Memory]:
        """The user's memories most relevant to ``query``, best first (``limit`` 0: 10)."""
        return self._unary(timeout, metadata, calls.search_memory(app, user, query, limit))

    def generate_memories(
        self,
        app: str,
        user: str,
        *,
        session_id: str = "",
        events: Sequence[Union[Event, event_pb2.Event]] = (),
        topics: Sequence[Union[str, Tuple[str, str]]] = (),
        ttl_seconds: int = 0,
        timeout: Timeout = DEFAULT,
        metadata: CallMetadata = (),
    ) -> List[GeneratedMemory]:
        """Has the server's model extract the facts of a stored session (``session_id``) or
        of ``events`` and consolidate them with the user's memories (Memory Bank's
        GenerateMemories); returns the memories created, updated or deleted. ``topics``:
        managed labels or (label, description), instead of the app's; ``ttl_seconds`` 0:
        the app's."""
        return self._unary(
            timeout, metadata, calls.generate_memories(app, user, session_id, events, topics, ttl_seconds)
        )

    def ingest_events(
        self,
        app: str,
        user: str,
        events: Sequence[Union[Event, event_pb2.Event]],
        *,
        stream_id: str = "",
        force_flush: bool = False,
        timeout: Timeout = DEFAULT,
        metadata: CallMetadata = (),
    ) -> IngestResult:
        """Buffers events for the server's generation (Memory Bank's IngestEvents), which
        runs when the app's event count or idle time is reached; ``force_flush`` generates
        from the user's whole buffer now and returns its changes."""
        return self._unary(timeout, metadata, calls.ingest_events(app, user, events, stream_id, force_flush))

    def list_memory_revisions(
        self,
        app: str,
        user: str,
        memory_id: str,
        *,
        timeout: Timeout = DEFAULT,
        metadata: CallMetadata = (),
    ) -> List[MemoryRevision]:
        """Every revision of one generated memory, oldest first."""
        return self._unary(timeout, metadata, calls.list_memory_revisions(app, user, memory_id))

    def delete_memory(
        self,
        app: str,
        user: str,
        memory_id: str,
        *,
        timeout: Timeout = DEFAULT,
        metadata: CallMetadata = (),
    ) -> bool:
        """Deletes one memory; False when the user had none with that id."""
        return self._unary(timeout, metadata, calls.delete_memory(app, user, memory_id))

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
        include_thoughts_from_other_agents: bool = False,
        keep_running: bool = False,
        on_busy: Optional[OnBusy] = None,
        timeout: Optional[float] = None,
        metadata: CallMetadata = (),
    ) -> Iterator[Event]:
        """Runs the app's agent on a message and yields its events as they arrive, the
        first being the message itself as stored (its ``invocation_id`` lets you ``cancel``).

        ``message`` is the user's text or a ``Content`` (e.g. ``function_response(call,
        result)`` answering a client tool). With ``streaming=True`` (SSE) the reply comes
        as ``partial`` events first, then complete; only complete events are stored.
        ``on_busy`` ("reject", "enqueue", "interrupt", "rollback") says what to do when
        another invocation runs on the session. ``include_thoughts_from_other_agents``
        (ADK's RunConfig field) tells an agent the thoughts of the other agents whose turns
        it is told (off: they stay their own). Errors raise the typed exceptions while
        iterating (``SessionBusy``…); a run is never retried. Leaving the loop early
        (``close()``, or dropping the iterator) cancels the call, which stops the invocation
        unless ``keep_running``."""
        request = calls.run_request(
            app,
            user,
            session_id,
            message,
            streaming=streaming,
            state_delta=state_delta,
            create_session=create_session,
            max_llm_calls=max_llm_calls,
            include_thoughts_from_other_agents=include_thoughts_from_other_agents,
            keep_running=keep_running,
            on_busy=on_busy,
        )
        return _events(self._stubs["runner"].Run(request, timeout=timeout, metadata=self.metadata + tuple(metadata)))

    def run_with_tools(
        self,
        app: str,
        user: str,
        session_id: str,
        message: MessageInput,
        answer: ToolAnswer,
        *,
        streaming: bool = False,
        state_delta: Optional[StateDict] = None,
        create_session: bool = False,
        max_llm_calls: int = 0,
        include_thoughts_from_other_agents: bool = False,
        on_busy: Optional[OnBusy] = None,
        timeout: Optional[float] = None,
        metadata: CallMetadata = (),
    ) -> Iterator[Event]:
        """``run``, answering every client-tool call the agent makes (``event.client_tool_calls``)
        with ``answer(call, event)`` (see ``ToolAnswer``) and resuming the invocation each
        time, until it asks for nothing more. Yields every event of every round."""
        next_message: Optional[MessageInput] = message
        first = True
        while next_message is not None:
            pending: List[Tuple[FunctionCall, Event]] = []
            for event in self.run(
                app,
                user,
                session_id,
                next_message,
                streaming=streaming,
                state_delta=state_delta if first else None,
                create_session=create_session and first,
                max_llm_calls=max_llm_calls,
                include_thoughts_from_other_agents=include_thoughts_from_other_agents,
                on_busy=on_busy,
                timeout=timeout,
                metadata=metadata,
            ):
                pending.extend((call, event) for call in event.client_tool_calls)
                yield event
            first = False
            answered: List[Tuple[FunctionCall, JsonValue]] = []
            for call, event in pending:
                answered.append((call, answer(call, event)))
            next_message = calls.tool_answers(answered) if answered else None

    def cancel(
        self,
        app: str,
        user: str,
        session_id: str,
        invocation_id: str,
        *,
        timeout: Timeout = DEFAULT,
        metadata: CallMetadata = (),
    ) -> bool:
        """Stops a running invocation (on any replica); False when none was running."""
        return self._unary(timeout, metadata, calls.cancel(app, user, session_id, invocation_id))

    def rewind(
        self,
        app: str,
        user: str,
        session_id: str,
        rewind_before_invocation_id: str,
        *,
        timeout: Timeout = DEFAULT,
        metadata: CallMetadata = (),
    ) -> Event:
        """Rewinds the session to before an invocation; returns the stored rewind event."""
        return self._unary(timeout, metadata, calls.rewind(app, user, session_id, rewind_before_invocation_id))

    def list_apps(
        self,
        *,
        timeout: Timeout = DEFAULT,
        metadata: CallMetadata = (),
    ) -> List[App]:
        """The apps the runner serves, with their agent trees and tools."""
        return self._unary(timeout, metadata, calls.list_apps())

    def get_app(
        self,
        app: str,
        *,
        timeout: Timeout = DEFAULT,
        metadata: CallMetadata = (),
    ) -> App:
        """One app's agent tree and tools (schemas as JSON); ``AppNotFound`` when unknown."""
        return self._unary(timeout, metadata, calls.get_app(app))


def _events(call: Any) -> Iterator[Event]:
    try:
        for message in call:
            yield Event.from_proto(message)
    except grpc.RpcError as err:
        raise from_rpc_error(err) from err
    finally:
        call.cancel()  # a no-op once the stream has ended


def _chunks(call: Any) -> Iterator[bytes]:
    try:
        for message in call:
            if message.WhichOneof("message") == "chunk":
                yield message.chunk
    except grpc.RpcError as err:
        raise from_rpc_error(err) from err
    finally:
        call.cancel()
