"""Every RPC of adk.v1 as data: the request, whether repeating it is safe, and how its reply
becomes a view. ``AdkClient`` (sync) and ``AsyncAdkClient`` (grpc.aio) both build their calls
here and only differ in how they wait, so every rule (which calls are retried, how a watch
resumes, how an upload is chunked, how client-tool calls are answered) is written once.
"""
from __future__ import annotations

import enum
import mimetypes
import os
import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import (
    IO,
    Any,
    AsyncIterable,
    AsyncIterator,
    Awaitable,
    Callable,
    Generic,
    Iterable,
    Iterator,
    List,
    Literal,
    Mapping,
    Optional,
    Sequence,
    Tuple,
    TypeVar,
    Union,
)

import grpc
from google.protobuf import duration_pb2, timestamp_pb2
from google.protobuf.message import Message

from ._convert import JsonValue, dict_to_struct, python_to_value, struct_to_dict
from .errors import AdkError, from_rpc_error
from ._retry import RetryPolicy, may_retry
from .types import (
    App,
    Artifact,
    ArtifactMetadata,
    Blob,
    Content,
    Event,
    FunctionCall,
    GeneratedMemory,
    IngestResult,
    Memory,
    MemoryRevision,
    MessageInput,
    Part,
    Session,
    function_response,
    to_content,
)
from .v1 import artifact_pb2, event_pb2, memory_pb2, runner_pb2, session_pb2

T = TypeVar("T")
StateDict = Mapping[str, JsonValue]
Service = Literal["sessions", "artifacts", "memory", "runner"]
#: Bytes to upload: chunks from anywhere, or a binary file object read in chunks.
Chunks = Union[Iterable[bytes], IO[bytes]]
AsyncChunks = Union[AsyncIterable[bytes], Iterable[bytes], IO[bytes]]
PathLike = Union[str, "os.PathLike[str]"]
#: Answers a client tool's call (``run_with_tools``): the tool's result, as JSON.
ToolAnswer = Callable[[FunctionCall, Event], JsonValue]
#: ``ToolAnswer`` of ``AsyncAdkClient``: the result, or an awaitable of it.
AsyncToolAnswer = Callable[[FunctionCall, Event], Union[JsonValue, Awaitable[JsonValue]]]
#: What ``run`` does when another invocation runs on the session (None: the app's default).
OnBusy = Literal["reject", "enqueue", "interrupt", "rollback"]

class UseDefault(enum.Enum):
    """The type of ``DEFAULT``."""

    DEFAULT = "DEFAULT"


#: A call's ``timeout`` when it names none: the client's (``AdkClient(timeout=…)``). A call's
#: ``timeout`` in seconds replaces it, ``None`` gives that call no deadline (as in grpcio).
DEFAULT = UseDefault.DEFAULT
Timeout = Union[float, None, UseDefault]
#: A call's ``metadata``: sent after the client's own (``AdkClient(metadata=…)``).
CallMetadata = Sequence[Tuple[str, str]]


def deadline_of(timeout: Timeout, default: Optional[float]) -> Optional[float]:
    """The seconds a call may take: its own ``timeout``, else the client's."""
    return default if isinstance(timeout, UseDefault) else timeout


class WatchDeadline:
    """A watch's own deadline (``timeout`` seconds from its start, None: none), which its
    reconnections share: each gets what is left, so the watch ends with DEADLINE_EXCEEDED
    when it passes."""

    def __init__(self, timeout: Optional[float]) -> None:
        self.end = None if timeout is None else time.monotonic() + timeout

    def remaining(self, default: Optional[float]) -> Optional[float]:
        """The seconds left, at most ``default`` (a call's own bound), or ``default`` when the
        watch has no deadline. Never 0, which grpcio would take as no deadline."""
        if self.end is None:
            return default
        left = max(self.end - time.monotonic(), 0.001)
        return left if default is None else min(left, default)


#: Each upload message carries at most this much, well under gRPC's 4 MiB message limit.
CHUNK_BYTES = 256 * 1024


@dataclass(frozen=True)
class Unary(Generic[T]):
    """One unary call: ``safe`` when repeating it cannot do anything twice (it is then
    retried); ``result`` turns the reply into what the client returns."""

    service: Service
    method: str
    request: Message
    safe: bool
    result: Callable[[Any], T]


@dataclass(frozen=True)
class Page(Generic[T]):
    items: List[T]
    next_page_token: str


def channel_options(policy: RetryPolicy, options: Sequence[Tuple[str, Any]]) -> List[Tuple[str, Any]]:
    """The channel options: gRPC reconnects a lost connection with its own backoff (1 s
    doubling to 120 s by default), and calls fail at once while it waits; it follows the
    retry policy instead, so a restarted server is reached again within ``max_backoff``.
    Options given by the caller win."""
    given = {key for key, _ in options}
    ours = [
        ("grpc.initial_reconnect_backoff_ms", max(1, int(policy.backoff * 1000))),
        ("grpc.max_reconnect_backoff_ms", max(1, int(policy.max_backoff * 1000))),
    ]
    return [option for option in ours if option[0] not in given] + list(options)


class TypedStub:
    """A generated stub whose unary calls raise the typed exceptions of ``errors.py``
    (streaming calls return the call as it is): ``AdkClient.sessions`` and the others."""

    def __init__(self, stub: Any) -> None:
        self._stub = stub

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._stub, name)

        def call(*args: Any, **kwargs: Any) -> Any:
            try:
                return method(*args, **kwargs)
            except grpc.RpcError as err:
                raise from_rpc_error(err) from err

        return call


def _none(_reply: Any) -> None:
    return None


# ---- sessions -------------------------------------------------------------------------


def create_session(
    app: str,
    user: str,
    *,
    state: Optional[StateDict],
    session_id: Optional[str],
    ttl: Union[timedelta, float, None],
) -> Unary[Session]:
    request = session_pb2.CreateSessionRequest(
        app_name=app, user_id=user, session_id=session_id or "", state=dict_to_struct(state)
    )
    if ttl is not None:
        request.ttl.CopyFrom(_duration(ttl))
    # Not safe: a create whose reply was lost would fail with ALREADY_EXISTS when repeated.
    return Unary("sessions", "CreateSession", request, False, Session.from_proto)


def get_session(
    app: str,
    user: str,
    session_id: str,
    *,
    num_recent_events: Optional[int],
    after: Optional[datetime],
    since_compaction: bool,
) -> Unary[Session]:
    request = session_pb2.GetSessionRequest(
        app_name=app, user_id=user, session_id=session_id, since_compaction=since_compaction
    )
    if num_recent_events is not None:
        request.num_recent_events = num_recent_events
    if after is not None:
        request.after.CopyFrom(_timestamp(after))
    return Unary("sessions", "GetSession", request, True, Session.from_proto)


def list_sessions(app: str, user: str, page_size: int, page_token: str) -> Unary[Page[Session]]:
    request = session_pb2.ListSessionsRequest(app_name=app, user_id=user, page_size=page_size, page_token=page_token)
    return Unary(
        "sessions",
        "ListSessions",
        request,
        True,
        lambda r: Page([Session.from_proto(s) for s in r.sessions], r.next_page_token),
    )


def delete_session(app: str, user: str, session_id: str) -> Unary[None]:
    request = session_pb2.DeleteSessionRequest(app_name=app, user_id=user, session_id=session_id)
    return Unary("sessions", "DeleteSession", request, False, _none)


def append_event(
    app: str,
    user: str,
    session_id: str,
    *,
    author: str,
    text: Optional[str],
    parts: Sequence[Part],
    state_delta: Optional[StateDict],
    id: Optional[str],
    invocation_id: Optional[str],
    event: Optional[event_pb2.Event],
    expect_last_event_id: Optional[str],
    expect_last_sequence: Optional[int],
) -> Unary[Event]:
    if event is None:
        event = event_pb2.Event(author=author, id=id or "", invocation_id=invocation_id or "")
        message_parts = ([Part(text=text)] if text is not None else []) + list(parts)
        if message_parts:
            role = "user" if author == "user" else "model"
            event.content.CopyFrom(Content(role, message_parts).to_proto())
        for key, value in (state_delta or {}).items():
            event.actions.state_delta[key].CopyFrom(python_to_value(value))
    elif text is not None or parts or state_delta is not None or id is not None or invocation_id is not None:
        raise TypeError("append_event: pass either event, or text/parts/state_delta/id/invocation_id")
    request = session_pb2.AppendEventRequest(app_name=app, user_id=user, session_id=session_id, event=event)
    if expect_last_event_id is not None and expect_last_sequence is not None:
        raise TypeError("append_event: expect_last_event_id or expect_last_sequence, not both")
    if expect_last_event_id is not None:
        request.precondition.last_event_id = expect_last_event_id
    elif expect_last_sequence is not None:
        request.precondition.last_sequence = expect_last_sequence
    # With an id, a repeated append returns the stored event instead of storing a second one
    # (even when its precondition no longer holds): safe.
    return Unary("sessions", "AppendEvent", request, bool(event.id), Event.from_proto)


def list_events(
    app: str, user: str, session_id: str, page_size: int, newest_first: bool, page_token: str
) -> Unary[Page[Event]]:
    request = session_pb2.ListEventsRequest(
        app_name=app,
        user_id=user,
        session_id=session_id,
        page_size=page_size,
        page_token=page_token,
        newest_first=newest_first,
    )
    return Unary(
        "sessions",
        "ListEvents",
        request,
        True,
        lambda r: Page([Event.from_proto(e) for e in r.events], r.next_page_token),
    )


def last_sequence(app: str, user: str, session_id: str) -> Unary[int]:
    """The sequence of the session's last event (0 when it has none)."""
    request = session_pb2.ListEventsRequest(
        app_name=app, user_id=user, session_id=session_id, page_size=1, newest_first=True
    )
    return Unary("sessions", "ListEvents", request, True, lambda r: r.events[0].sequence if r.events else 0)


class WatchCursor:
    """Where a WatchSession stands, so that a dropped stream resumes after the last event
    seen: nothing missed, nothing twice. ``after`` None means "from now on"."""

    def __init__(self, app: str, user: str, session_id: str, after: Optional[int], policy: RetryPolicy) -> None:
        self.app, self.user, self.session_id = app, user, session_id
        self.after = after
        self.policy = policy
        self.failures = 0

    @property
    def needs_anchor(self) -> bool:
        """A watch "from now on" first reads where the log ends (``last_sequence``) and
        watches after that: were it to drop before its first event, it resumes from there,
        so nothing appended after it started is missed, even while it was reconnecting."""
        return self.after is None

    def request(self) -> session_pb2.WatchSessionRequest:
        request = session_pb2.WatchSessionRequest(app_name=self.app, user_id=self.user, session_id=self.session_id)
        if self.after is not None:
            request.after_sequence = self.after
        return request

    def seen(self, event: event_pb2.Event) -> Event:
        self.failures = 0
        self.after = event.sequence
        return Event.from_proto(event)

    def dropped(self, err: Optional[AdkError]) -> float:
        """The wait before reconnecting after the stream ended (``err`` None: the server
        closed it, e.g. on shutdown), or raises ``err`` when reconnecting cannot help
        (the session was deleted, bad input). Keeps reconnecting while the server is
        unreachable, the backoff capped at the policy's ``max_backoff``."""
        if err is not None and not may_retry(err):
            raise err
        self.failures += 1
        return self.policy.delay(min(self.failures, 16), err)


def get_user_state(app: str, user: str) -> Unary[dict[str, JsonValue]]:
    request = session_pb2.GetUserStateRequest(app_name=app, user_id=user)
    return Unary("sessions", "GetUserState", request, True, lambda r: struct_to_dict(r.state))


def get_app_state(app: str) -> Unary[dict[str, JsonValue]]:
    request = session_pb2.GetAppStateRequest(app_name=app)
    return Unary("sessions", "GetAppState", request, True, lambda r: struct_to_dict(r.state))


def update_app_state(app: str, state_delta: StateDict) -> Unary[dict[str, JsonValue]]:
    request = session_pb2.UpdateAppStateRequest(app_name=app, state_delta=dict_to_struct(state_delta))
    # Setting the same values twice ends the same, but a repeat could undo another admin's
    # change made in between: tried once.
    return Unary("sessions", "UpdateAppState", request, False, lambda r: struct_to_dict(r.state))


def fork_session(
    app: str, user: str, session_id: str, *, up_to_event_id: str, new_session_id: Optional[str]
) -> Unary[Session]:
    request = session_pb2.ForkSessionRequest(
        app_name=app,
        user_id=user,
        session_id=session_id,
        up_to_event_id=up_to_event_id,
        new_session_id=new_session_id or "",
    )
    return Unary("sessions", "ForkSession", request, False, Session.from_proto)


# ---- artifacts ------------------------------------------------------------------------


def ref(app: str, user: str, session_id: str, file_name: str) -> artifact_pb2.ArtifactRef:
    return artifact_pb2.ArtifactRef(app_name=app, user_id=user, session_id=session_id, file_name=file_name)


def save_artifact(
    app: str,
    user: str,
    session_id: str,
    file_name: str,
    data: Union[bytes, str],
    mime_type: Optional[str],
    *,
    custom_metadata: Optional[StateDict],
    version: Optional[int],
) -> Unary[int]:
    if isinstance(data, str) and mime_type in (None, "text/plain"):
        part = Part(text=data)
    else:
        raw = data.encode("utf-8") if isinstance(data, str) else bytes(data)
        part = Part(inline_data=Blob(mime_type or "application/octet-stream", raw))
    request = artifact_pb2.SaveArtifactRequest(ref=ref(app, user, session_id, file_name), part=part.to_proto())
    if custom_metadata:
        request.custom_metadata.CopyFrom(dict_to_struct(custom_metadata))
    if version is not None:
        request.version = version
    # Versions are immutable: repeating an explicit version cannot store a second one.
    return Unary("artifacts", "SaveArtifact", request, version is not None, lambda r: r.version)


def load_artifact(app: str, user: str, session_id: str, file_name: str, version: Optional[int]) -> Unary[Artifact]:
    request = artifact_pb2.LoadArtifactRequest(ref=ref(app, user, session_id, file_name), version=version)
    return Unary("artifacts", "LoadArtifact", request, True, Artifact.from_proto)


def delete_artifact(app: str, user: str, session_id: str, file_name: str, version: Optional[int]) -> Unary[None]:
    request = artifact_pb2.DeleteArtifactRequest(ref=ref(app, user, session_id, file_name), version=version)
    return Unary("artifacts", "DeleteArtifact", request, False, _none)


def list_artifacts(app: str, user: str, session_id: str) -> Unary[List[str]]:
    request = artifact_pb2.ListArtifactsRequest(app_name=app, user_id=user, session_id=session_id)
    return Unary("artifacts", "ListArtifacts", request, True, lambda r: list(r.file_names))


def list_versions(app: str, user: str, session_id: str, file_name: str) -> Unary[List[int]]:
    request = artifact_pb2.ListVersionsRequest(ref=ref(app, user, session_id, file_name))
    return Unary("artifacts", "ListVersions", request, True, lambda r: list(r.versions))


def get_artifact_metadata(
    app: str, user: str, session_id: str, file_name: str, version: Optional[int]
) -> Unary[ArtifactMetadata]:
    request = artifact_pb2.GetArtifactMetadataRequest(ref=ref(app, user, session_id, file_name), version=version)
    return Unary("artifacts", "GetArtifactMetadata", request, True, ArtifactMetadata.from_proto)


def upload_header(
    app: str,
    user: str,
    session_id: str,
    file_name: str,
    *,
    mime_type: Optional[str],
    version: Optional[int],
    custom_metadata: Optional[StateDict],
    size_bytes: Optional[int],
    is_text: bool,
) -> artifact_pb2.UploadHeader:
    header = artifact_pb2.UploadHeader(
        ref=ref(app, user, session_id, file_name),
        mime_type=mime_type or ("text/plain" if is_text else "application/octet-stream"),
        version=version,
        is_text=is_text,
        size_bytes=size_bytes,
    )
    if custom_metadata:
        header.custom_metadata.CopyFrom(dict_to_struct(custom_metadata))
    return header


def file_header_args(path: PathLike, mime_type: Optional[str]) -> Tuple[str, int]:
    """A file's MIME type (given, else guessed from its name) and size."""
    guessed = mime_type or mimetypes.guess_type(os.fspath(path))[0] or "application/octet-stream"
    return guessed, os.path.getsize(path)


def _split(chunk: bytes) -> Iterator[bytes]:
    # Big chunks are split so each message stays well under the 4 MiB message limit.
    view = memoryview(chunk)
    for offset in range(0, len(view), CHUNK_BYTES):
        yield bytes(view[offset : offset + CHUNK_BYTES])


def _read_chunks(file: IO[bytes]) -> Iterator[bytes]:
    while block := file.read(CHUNK_BYTES):
        yield block


def file_chunks(path: PathLike) -> Iterator[bytes]:
    """A file's bytes, a chunk at a time (the file is open only while they are read)."""
    with open(path, "rb") as file:
        yield from _read_chunks(file)


def upload_messages(header: artifact_pb2.UploadHeader, chunks: Chunks) -> Iterator[artifact_pb2.UploadArtifactRequest]:
    yield artifact_pb2.UploadArtifactRequest(header=header)
    source: Iterable[bytes] = _read_chunks(chunks) if hasattr(chunks, "read") else chunks  # type: ignore[arg-type]
    for chunk in source:
        for piece in _split(chunk):
            yield artifact_pb2.UploadArtifactRequest(chunk=piece)


async def upload_messages_async(
    header: artifact_pb2.UploadHeader, chunks: AsyncChunks
) -> AsyncIterator[artifact_pb2.UploadArtifactRequest]:
    if not hasattr(chunks, "__aiter__"):
        for message in upload_messages(header, chunks):
            yield message
        return
    yield artifact_pb2.UploadArtifactRequest(header=header)
    async for chunk in chunks:
        for piece in _split(chunk):
            yield artifact_pb2.UploadArtifactRequest(chunk=piece)


def download_request(
    app: str, user: str, session_id: str, file_name: str, version: Optional[int], chunk_size: int
) -> artifact_pb2.DownloadArtifactRequest:
    return artifact_pb2.DownloadArtifactRequest(
        ref=ref(app, user, session_id, file_name), version=version, chunk_size=chunk_size
    )


def download_metadata(first: Optional[artifact_pb2.DownloadArtifactResponse]) -> ArtifactMetadata:
    if first is None or first.WhichOneof("message") != "metadata":
        raise RuntimeError("DownloadArtifact: the stream did not start with the metadata")
    return ArtifactMetadata.from_proto(first.metadata)


def part_file(path: PathLike) -> str:
    """Where a download is written until it is complete, so a failed one never leaves a
    truncated file at ``path``."""
    return os.fspath(path) + ".part"


# ---- memory ---------------------------------------------------------------------------


@dataclass(frozen=True)
class MemoryInput:
    """A memory to add: its text (or a whole ``Content``), who said it, metadata, and an
    optional ``id`` (an entry with an id the user already has replaces it)."""

    text: Optional[str] = None
    content: Optional[Content] = None
    author: str = ""
    custom_metadata: Optional[StateDict] = None
    id: str = ""


def add_session_to_memory(app: str, user: str, session_id: str) -> Unary[List[str]]:
    request = memory_pb2.AddSessionToMemoryRequest(app_name=app, user_id=user, session_id=session_id)
    # A write: tried once, as every write but an append with its id and a save with its version.
    return Unary("memory", "AddSessionToMemory", request, False, lambda r: list(r.memory_ids))


def add_events_to_memory(
    app: str,
    user: str,
    session_id: str,
    events: Sequence[Union[Event, event_pb2.Event]],
    custom_metadata: Optional[StateDict],
) -> Unary[List[str]]:
    request = memory_pb2.AddEventsToMemoryRequest(
        app_name=app,
        user_id=user,
        session_id=session_id,
        events=[e.proto if isinstance(e, Event) else e for e in events],
        custom_metadata=dict_to_struct(custom_metadata),
    )
    return Unary("memory", "AddEventsToMemory", request, False, lambda r: list(r.memory_ids))


def add_memory(
    app: str, user: str, memories: Sequence[Union[MemoryInput, str]], custom_metadata: Optional[StateDict]
) -> Unary[List[str]]:
    entries = []
    for m in memories:
        m = MemoryInput(text=m) if isinstance(m, str) else m
        content = to_content(m.content if m.content is not None else (m.text or ""))
        entries.append(
            memory_pb2.MemoryEntry(
                id=m.id, content=content, author=m.author, custom_metadata=dict_to_struct(m.custom_metadata)
            )
        )
    request = memory_pb2.AddMemoryRequest(
        app_name=app, user_id=user, memories=entries, custom_metadata=dict_to_struct(custom_metadata)
    )
    return Unary("memory", "AddMemory", request, False, lambda r: list(r.memory_ids))


def search_memory(app: str, user: str, query: str, limit: int) -> Unary[List[Memory]]:
    request = memory_pb2.SearchMemoryRequest(app_name=app, user_id=user, query=query, limit=limit)
    return Unary("memory", "SearchMemory", request, True, lambda r: [Memory.from_proto(m) for m in r.memories])


def generate_memories(
    app: str,
    user: str,
    session_id: str,
    events: Sequence[Union[Event, event_pb2.Event]],
    topics: Sequence[Union[str, Tuple[str, str]]],
    ttl_seconds: int,
) -> Unary[List[GeneratedMemory]]:
    request = memory_pb2.GenerateMemoriesRequest(
        app_name=app,
        user_id=user,
        source_session_id=session_id,
        events=[e.proto if isinstance(e, Event) else e for e in events],
        topics=[_memory_topic(t) for t in topics],
        ttl_seconds=ttl_seconds,
    )
    # A retry generates nothing twice (the server skips events generated from).
    return Unary(
        "memory", "GenerateMemories", request, True, lambda r: [GeneratedMemory.from_proto(m) for m in r.memories]
    )


def _memory_topic(topic: Union[str, Tuple[str, str]]) -> memory_pb2.MemoryTopic:
    """A managed topic's label, or (label, description)."""
    if isinstance(topic, str):
        return memory_pb2.MemoryTopic(label=topic)
    label, description = topic
    return memory_pb2.MemoryTopic(label=label, description=description)


def ingest_events(
    app: str,
    user: str,
    events: Sequence[Union[Event, event_pb2.Event]],
    stream_id: str,
    force_flush: bool,
) -> Unary[IngestResult]:
    request = memory_pb2.IngestEventsRequest(
        app_name=app,
        user_id=user,
        stream_id=stream_id,
        events=[e.proto if isinstance(e, Event) else e for e in events],
        force_flush=force_flush,
    )
    # A retry buffers nothing twice (the server keeps each event once, by id).
    return Unary("memory", "IngestEvents", request, True, IngestResult.from_proto)


def list_memory_revisions(app: str, user: str, memory_id: str) -> Unary[List[MemoryRevision]]:
    request = memory_pb2.ListMemoryRevisionsRequest(app_name=app, user_id=user, memory_id=memory_id)
    return Unary(
        "memory", "ListMemoryRevisions", request, True, lambda r: [MemoryRevision.from_proto(m) for m in r.revisions]
    )


def delete_memory(app: str, user: str, memory_id: str) -> Unary[bool]:
    request = memory_pb2.DeleteMemoryRequest(app_name=app, user_id=user, memory_id=memory_id)
    # A repeat after a lost reply would say False though it deleted: tried once.
    return Unary("memory", "DeleteMemory", request, False, lambda r: bool(r.deleted))


# ---- runner ---------------------------------------------------------------------------

_ON_BUSY = {
    "reject": runner_pb2.ON_BUSY_REJECT,
    "enqueue": runner_pb2.ON_BUSY_ENQUEUE,
    "interrupt": runner_pb2.ON_BUSY_INTERRUPT,
    "rollback": runner_pb2.ON_BUSY_ROLLBACK,
}


def run_request(
    app: str,
    user: str,
    session_id: str,
    message: MessageInput,
    *,
    streaming: bool,
    state_delta: Optional[StateDict],
    create_session: bool,
    max_llm_calls: int,
    include_thoughts_from_other_agents: bool,
    keep_running: bool,
    on_busy: Optional[OnBusy],
) -> runner_pb2.RunRequest:
    if on_busy is not None and on_busy not in _ON_BUSY:
        raise ValueError(f"on_busy must be one of {sorted(_ON_BUSY)}, not {on_busy!r}")
    mode = runner_pb2.STREAMING_MODE_SSE if streaming else runner_pb2.STREAMING_MODE_NONE
    request = runner_pb2.RunRequest(
        app_name=app,
        user_id=user,
        session_id=session_id,
        new_message=to_content(message),
        run_config=runner_pb2.RunConfig(
            streaming_mode=mode,
            max_llm_calls=max_llm_calls,
            include_thoughts_from_other_agents=include_thoughts_from_other_agents,
        ),
        create_session=create_session,
        keep_running=keep_running,
        on_busy=_ON_BUSY[on_busy] if on_busy is not None else runner_pb2.ON_BUSY_UNSPECIFIED,
    )
    for key, value in (state_delta or {}).items():
        request.state_delta[key].CopyFrom(python_to_value(value))
    return request


def tool_answers(answered: Sequence[Tuple[FunctionCall, JsonValue]]) -> Content:
    """One message answering every client-tool call of a round, resuming the invocation."""
    return Content("user", [p for call, result in answered for p in function_response(call, result).parts])


def list_apps() -> Unary[List[App]]:
    return Unary("runner", "ListApps", runner_pb2.ListAppsRequest(), True, lambda r: [App.from_proto(a) for a in r.apps])


def get_app(app: str) -> Unary[App]:
    return Unary("runner", "GetApp", runner_pb2.GetAppRequest(app_name=app), True, App.from_proto)


def cancel(app: str, user: str, session_id: str, invocation_id: str) -> Unary[bool]:
    request = runner_pb2.CancelRequest(app_name=app, user_id=user, session_id=session_id, invocation_id=invocation_id)
    # Cancelling twice is the same as once: safe.
    return Unary("runner", "Cancel", request, True, lambda r: bool(r.cancelled))


def rewind(app: str, user: str, session_id: str, rewind_before_invocation_id: str) -> Unary[Event]:
    request = runner_pb2.RewindRequest(
        app_name=app, user_id=user, session_id=session_id, rewind_before_invocation_id=rewind_before_invocation_id
    )
    return Unary("runner", "Rewind", request, False, Event.from_proto)


# ---- conversions ----------------------------------------------------------------------


def _duration(ttl: Union[timedelta, float]) -> duration_pb2.Duration:
    d = duration_pb2.Duration()
    d.FromTimedelta(ttl if isinstance(ttl, timedelta) else timedelta(seconds=ttl))
    return d


def _timestamp(at: datetime) -> timestamp_pb2.Timestamp:
    ts = timestamp_pb2.Timestamp()
    ts.FromDatetime(at)
    return ts
