"""This suite as a backend of ADK Python (google-adk >= 2.13): ``GrpcSessionService``,
``GrpcArtifactService`` and ``GrpcMemoryService`` implement ADK's ``BaseSessionService``,
``BaseArtifactService`` and ``BaseMemoryService`` over gRPC (``grpc.aio``).

    from adk_client.adk import GrpcSessionService, GrpcArtifactService

    runner = Runner(agent=root_agent, app_name="my_app",
                    session_service=GrpcSessionService("adk-grpc://localhost:50051"),
                    artifact_service=GrpcArtifactService("adk-grpc://localhost:50051"))

The server does the work (state scopes and merging, ``temp:`` keys, event filters,
validation); these classes only translate. ADK's artifact versions are 0-based, the
suite's 1-based: the classes translate, also inside ``artifact://`` URIs. Errors come as
ADK's own exceptions: ``AlreadyExistsError``, ``InputValidationError`` (a ``ValueError``)
for bad input, ``StaleSessionError`` when a session changed since it was read,
``SessionNotFoundError`` when appending to a missing session; a missing session or
artifact reads as ``None``. Other failures raise ``grpc.aio.AioRpcError``.

``adk web`` / ``adk api_server``: ``register()`` adds the URI scheme ``adk-grpc`` to ADK's
service registry; a ``services.yaml`` next to the agents does it without code (see the
README, "Use it from ADK Python").
"""
from __future__ import annotations

import asyncio
import re
from typing import Any, Dict, List, Mapping, Optional, Tuple, Union, cast
from urllib.parse import urlparse

import grpc
from google.adk.artifacts import artifact_util
from google.adk.artifacts.base_artifact_service import ArtifactVersion, BaseArtifactService, ensure_part
from google.adk.errors import StaleSessionError
from google.adk.errors.already_exists_error import AlreadyExistsError
from google.adk.errors.input_validation_error import InputValidationError
from google.adk.errors.session_not_found_error import SessionNotFoundError
from google.adk.events import Event
from google.adk.memory.base_memory_service import BaseMemoryService, SearchMemoryResponse
from google.adk.memory.memory_entry import MemoryEntry
from google.adk.sessions.base_session_service import BaseSessionService, GetSessionConfig, ListSessionsResponse
from google.adk.sessions.session import Session
from google.genai import types
from google.protobuf import struct_pb2

from ._adk_events import event_from_proto, event_to_proto, float_to_timestamp, part_from_proto, part_to_proto, timestamp_to_float
from ._convert import JsonValue, dict_to_struct, struct_to_dict
from .v1 import artifact_pb2, artifact_pb2_grpc, memory_pb2, memory_pb2_grpc, session_pb2, session_pb2_grpc

#: The URI scheme ``register()`` adds to ADK's service registry: ``adk-grpc://host:port``.
SCHEME = "adk-grpc"


def target_of(uri: str) -> str:
    """``adk-grpc://host:port`` (or a bare ``host:port``) -> ``host:port``."""
    if "://" not in uri:
        return uri
    parsed = urlparse(uri)
    if parsed.scheme != SCHEME or not parsed.netloc:
        raise ValueError(f"expected {SCHEME}://host:port, got {uri!r}")
    return parsed.netloc


class _Channel:
    """A ``grpc.aio`` channel per event loop: an aio channel only works on the loop it
    was made on, and ADK apps (and tests) may run one service object on several loops."""

    def __init__(self, target: str, options: List[Tuple[str, Any]]) -> None:
        self.target, self._options = target, options
        self._channels: Dict[int, Tuple[asyncio.AbstractEventLoop, grpc.aio.Channel]] = {}

    def get(self) -> grpc.aio.Channel:
        loop = asyncio.get_running_loop()
        # Forget channels of loops that are gone (their id may be reused).
        self._channels = {k: v for k, v in self._channels.items() if not v[0].is_closed()}
        entry = self._channels.get(id(loop))
        if entry is None or entry[0] is not loop:
            entry = (loop, grpc.aio.insecure_channel(self.target, options=self._options))
            self._channels[id(loop)] = entry
        return entry[1]

    async def close(self) -> None:
        loop = asyncio.get_running_loop()
        entry = self._channels.pop(id(loop), None)
        if entry is not None:
            await entry[1].close()


def _invalid(err: grpc.aio.AioRpcError) -> InputValidationError:
    return InputValidationError(err.details() or "invalid argument")


class GrpcSessionService(BaseSessionService):
    """ADK's ``BaseSessionService`` over ``adk.v1.SessionService``."""

    def __init__(self, uri: Optional[str] = None, *, target: Optional[str] = None,
                 timeout: Optional[float] = 30.0, options: Optional[List[Tuple[str, Any]]] = None,
                 **_registry_kwargs: Any) -> None:
        """``uri`` is ``adk-grpc://host:port`` (as ADK's registry passes it), or give
        ``target="host:port"``. ADK's registry also passes ``agents_dir``: ignored."""
        address = target or (target_of(uri) if uri else None)
        if not address:
            raise ValueError("GrpcSessionService needs uri='adk-grpc://host:port' or target='host:port'")
        self._channel = _Channel(address, list(options or []))
        self._timeout = timeout

    def _stub(self) -> session_pb2_grpc.SessionServiceStub:
        return session_pb2_grpc.SessionServiceStub(self._channel.get())

    async def close(self) -> None:
        await self._channel.close()

    async def create_session(self, *, app_name: str, user_id: str, state: Optional[Dict[str, Any]] = None,
                             session_id: Optional[str] = None) -> Session:
        request = session_pb2.CreateSessionRequest(
            app_name=app_name, user_id=user_id, session_id=(session_id or "").strip(),
            state=dict_to_struct(state or {}))
        try:
            created = await self._stub().CreateSession(request, timeout=self._timeout)
        except grpc.aio.AioRpcError as err:
            if err.code() == grpc.StatusCode.ALREADY_EXISTS:
                raise AlreadyExistsError(f"Session with id {session_id} already exists.") from err
            if err.code() == grpc.StatusCode.INVALID_ARGUMENT:
                raise _invalid(err) from err
            raise
        return _session_from_proto(created)

    async def get_session(self, *, app_name: str, user_id: str, session_id: str,
                          config: Optional[GetSessionConfig] = None) -> Optional[Session]:
        request = session_pb2.GetSessionRequest(app_name=app_name, user_id=user_id, session_id=session_id)
        if config is not None and config.num_recent_events is not None:
            request.num_recent_events = config.num_recent_events
        if config is not None and config.after_timestamp is not None:
            request.after.CopyFrom(float_to_timestamp(config.after_timestamp))
        try:
            found = await self._stub().GetSession(request, timeout=self._timeout)
        except grpc.aio.AioRpcError as err:
            if err.code() == grpc.StatusCode.NOT_FOUND:
                return None
            if err.code() == grpc.StatusCode.INVALID_ARGUMENT:
                raise _invalid(err) from err
            raise
        return _session_from_proto(found)

    async def list_sessions(self, *, app_name: str, user_id: Optional[str] = None) -> ListSessionsResponse:
        sessions: List[Session] = []
        page_token = ""
        while True:
            request = session_pb2.ListSessionsRequest(
                app_name=app_name, user_id=user_id or "", page_size=1000, page_token=page_token)
            try:
                page = await self._stub().ListSessions(request, timeout=self._timeout)
            except grpc.aio.AioRpcError as err:
                if err.code() == grpc.StatusCode.INVALID_ARGUMENT:
                    raise _invalid(err) from err
                raise
            sessions.extend(_session_from_proto(s) for s in page.sessions)
            page_token = page.next_page_token
            if not page_token:
                return ListSessionsResponse(sessions=sessions)

    async def delete_session(self, *, app_name: str, user_id: str, session_id: str) -> None:
        request = session_pb2.DeleteSessionRequest(app_name=app_name, user_id=user_id, session_id=session_id)
        try:
            await self._stub().DeleteSession(request, timeout=self._timeout)
        except grpc.aio.AioRpcError as err:
            if err.code() == grpc.StatusCode.INVALID_ARGUMENT:
                raise _invalid(err) from err
            raise

    async def get_user_state(self, *, app_name: str, user_id: str) -> Dict[str, Any]:
        request = session_pb2.GetUserStateRequest(app_name=app_name, user_id=user_id)
        reply = await self._stub().GetUserState(request, timeout=self._timeout)
        return struct_to_dict(reply.state)

    async def get_app_state(self, *, app_name: str) -> Dict[str, Any]:
        """The app's ``app:`` state, keys without the prefix (no ADK base method has it)."""
        reply = await self._stub().GetAppState(session_pb2.GetAppStateRequest(app_name=app_name),
                                               timeout=self._timeout)
        return struct_to_dict(reply.state)

    async def append_event(self, session: Session, event: Event) -> Event:
        """Appends on the server (which applies the state delta by scope and drops
        ``temp:`` keys), then mirrors the stored event into the caller's ``session``
        object as ADK's base class does, so the running invocation sees its own changes."""
        if event.partial:
            return event
        request = session_pb2.AppendEventRequest(
            app_name=session.app_name, user_id=session.user_id, session_id=session.id,
            event=event_to_proto(event))
        # The session was read at this sequence: the server refuses the append (ABORTED)
        # when another writer appended since, as ADK's persistent services do.
        marker = session._storage_update_marker
        if marker is not None:
            request.precondition.last_sequence = int(marker)
        try:
            stored = await self._stub().AppendEvent(request, timeout=self._timeout)
        except grpc.aio.AioRpcError as err:
            if err.code() == grpc.StatusCode.ABORTED:
                raise StaleSessionError(
                    f"Session {session.id} changed since it was read: get it again. ({err.details()})") from err
            if err.code() == grpc.StatusCode.NOT_FOUND:
                raise SessionNotFoundError(f"Session {session.id} not found.") from err
            if err.code() == grpc.StatusCode.INVALID_ARGUMENT:
                raise _invalid(err) from err
            raise
        stored_event = event_from_proto(stored)
        # ADK's own helper: temp: values live in the in-memory session for the invocation.
        self._apply_temp_state(session, event)
        # The caller's event becomes the stored one (id and timestamp filled in, no temp:
        # keys), and joins the caller's session, as with ADK's services.
        event.id, event.timestamp = stored_event.id, stored_event.timestamp
        event.actions.state_delta = dict(stored_event.actions.state_delta)
        self._commit_event_to_session(session, event)
        session.last_update_time = event.timestamp
        session._storage_update_marker = str(stored.sequence)
        return event


def _session_from_proto(pb: session_pb2.Session) -> Session:
    session = Session(
        id=pb.id,
        app_name=pb.app_name,
        user_id=pb.user_id,
        state=struct_to_dict(pb.state),
        events=[event_from_proto(e) for e in pb.events],
        last_update_time=timestamp_to_float(pb.last_update_time),
    )
    session._storage_update_marker = str(pb.event_count)
    return session


# ---- artifacts -------------------------------------------------------------------------

# ADK's artifact reference URI; the version is the last segment.
_ARTIFACT_URI = re.compile(r"^(artifact://apps/.+/artifacts/.+/versions/)(\d+)$")


def _shift_reference(uri: str, by: int) -> str:
    """Moves the version of an ``artifact://`` URI between ADK's 0-based and our 1-based."""
    match = _ARTIFACT_URI.match(uri)
    if not match:
        return uri
    return f"{match.group(1)}{int(match.group(2)) + by}"


def _canonical_uri(app_name: str, user_id: str, session_id: Optional[str], filename: str, version: int) -> str:
    """ADK's ``artifact://`` URI of a version (0-based, as ADK reads it)."""
    if filename.startswith("user:") or not session_id:
        return f"artifact://apps/{app_name}/users/{user_id}/artifacts/{filename}/versions/{version}"
    return f"artifact://apps/{app_name}/users/{user_id}/sessions/{session_id}/artifacts/{filename}/versions/{version}"


class GrpcArtifactService(BaseArtifactService):
    """ADK's ``BaseArtifactService`` over ``adk.v1.ArtifactService`` (0-based versions,
    as ADK counts them, on the suite's 1-based ones)."""

    def __init__(self, uri: Optional[str] = None, *, target: Optional[str] = None,
                 timeout: Optional[float] = 60.0, options: Optional[List[Tuple[str, Any]]] = None,
                 **_registry_kwargs: Any) -> None:
        address = target or (target_of(uri) if uri else None)
        if not address:
            raise ValueError("GrpcArtifactService needs uri='adk-grpc://host:port' or target='host:port'")
        self._channel = _Channel(address, list(options or []))
        self._timeout = timeout

    def _stub(self) -> artifact_pb2_grpc.ArtifactServiceStub:
        return artifact_pb2_grpc.ArtifactServiceStub(self._channel.get())

    async def close(self) -> None:
        await self._channel.close()

    @staticmethod
    def _ref(app_name: str, user_id: str, filename: str, session_id: Optional[str]) -> artifact_pb2.ArtifactRef:
        return artifact_pb2.ArtifactRef(app_name=app_name, user_id=user_id, session_id=session_id or "",
                                        file_name=filename)

    async def _call(self, method: str, request: Any, *, missing: Any = ...) -> Any:
        """Calls an RPC; NOT_FOUND returns ``missing`` when given, INVALID_ARGUMENT and
        FAILED_PRECONDITION (a reference chain too long) raise InputValidationError."""
        try:
            return await getattr(self._stub(), method)(request, timeout=self._timeout)
        except grpc.aio.AioRpcError as err:
            if err.code() == grpc.StatusCode.NOT_FOUND and missing is not ...:
                return missing
            if err.code() in (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.FAILED_PRECONDITION):
                raise _invalid(err) from err
            if err.code() == grpc.StatusCode.ALREADY_EXISTS:
                raise AlreadyExistsError(err.details() or "artifact version exists") from err
            raise

    async def save_artifact(self, *, app_name: str, user_id: str, filename: str,
                            artifact: Union[types.Part, Dict[str, Any]], session_id: Optional[str] = None,
                            custom_metadata: Optional[Dict[str, Any]] = None) -> int:
        part = ensure_part(artifact)
        pb = part_to_proto(part)
        if pb.HasField("file_data"):
            pb.file_data.file_uri = _shift_reference(pb.file_data.file_uri, +1)
        request = artifact_pb2.SaveArtifactRequest(
            ref=self._ref(app_name, user_id, filename, session_id), part=pb,
            custom_metadata=dict_to_struct(custom_metadata or {}))
        reply: artifact_pb2.SaveArtifactResponse = await self._call("SaveArtifact", request)
        return reply.version - 1

    async def load_artifact(self, *, app_name: str, user_id: str, filename: str,
                            session_id: Optional[str] = None, version: Optional[int] = None) -> Optional[types.Part]:
        request = artifact_pb2.LoadArtifactRequest(ref=self._ref(app_name, user_id, filename, session_id))
        if version is not None:
            if version < 0:
                return None
            request.version = version + 1
        reply = await self._call("LoadArtifact", request, missing=None)
        if reply is None:
            return None
        part = part_from_proto(reply.part)
        # ADK's rewind saves a tombstone version: ADK's own services load it as absent.
        if part == types.Part() or artifact_util._is_rewind_tombstone(part):
            return None
        if part.file_data is not None and part.file_data.file_uri:
            part.file_data.file_uri = _shift_reference(part.file_data.file_uri, -1)
        return part

    async def list_artifact_keys(self, *, app_name: str, user_id: str, session_id: Optional[str] = None) -> List[str]:
        request = artifact_pb2.ListArtifactsRequest(app_name=app_name, user_id=user_id, session_id=session_id or "")
        reply = await self._call("ListArtifacts", request)
        return list(reply.file_names)

    async def delete_artifact(self, *, app_name: str, user_id: str, filename: str,
                              session_id: Optional[str] = None) -> None:
        request = artifact_pb2.DeleteArtifactRequest(ref=self._ref(app_name, user_id, filename, session_id))
        await self._call("DeleteArtifact", request)

    async def list_versions(self, *, app_name: str, user_id: str, filename: str,
                            session_id: Optional[str] = None) -> List[int]:
        request = artifact_pb2.ListVersionsRequest(ref=self._ref(app_name, user_id, filename, session_id))
        reply = await self._call("ListVersions", request)
        return sorted(v - 1 for v in reply.versions)  # ADK lists oldest first

    async def list_artifact_versions(self, *, app_name: str, user_id: str, filename: str,
                                     session_id: Optional[str] = None) -> List[ArtifactVersion]:
        found = []
        for version in await self.list_versions(app_name=app_name, user_id=user_id, filename=filename,
                                                session_id=session_id):
            meta = await self.get_artifact_version(app_name=app_name, user_id=user_id, filename=filename,
                                                   session_id=session_id, version=version)
            if meta is not None:  # deleted between the two calls
                found.append(meta)
        return found

    async def get_artifact_version(self, *, app_name: str, user_id: str, filename: str,
                                   session_id: Optional[str] = None,
                                   version: Optional[int] = None) -> Optional[ArtifactVersion]:
        request = artifact_pb2.GetArtifactMetadataRequest(ref=self._ref(app_name, user_id, filename, session_id))
        if version is not None:
            if version < 0:
                return None
            request.version = version + 1
        meta = await self._call("GetArtifactMetadata", request, missing=None)
        if meta is None:
            return None
        adk_version = meta.version - 1
        return ArtifactVersion(
            version=adk_version,
            canonical_uri=_canonical_uri(app_name, user_id, session_id, filename, adk_version),
            custom_metadata=struct_to_dict(meta.custom_metadata),
            create_time=timestamp_to_float(meta.create_time),
            mime_type=meta.mime_type or None,
        )


# ---- memory -----------------------------------------------------------------------------


def _memory_entry_from_proto(pb: memory_pb2.MemoryEntry) -> MemoryEntry:
    """A stored memory as ADK's ``MemoryEntry``; its timestamp as ADK writes it (ISO 8601)."""
    from datetime import datetime, timezone

    timestamp = None
    if pb.HasField("timestamp"):
        seconds = timestamp_to_float(pb.timestamp)
        timestamp = datetime.fromtimestamp(seconds, tz=timezone.utc).isoformat()
    content = types.Content(role=pb.content.role or None, parts=[part_from_proto(p) for p in pb.content.parts])
    return MemoryEntry(id=pb.id or None, content=content, author=pb.author or None, timestamp=timestamp,
                       custom_metadata=struct_to_dict(pb.custom_metadata))


def _memory_entry_to_proto(entry: MemoryEntry) -> memory_pb2.MemoryEntry:
    """ADK's ``MemoryEntry`` for AddMemory; an ISO 8601 timestamp becomes a Timestamp."""
    from datetime import datetime, timezone

    pb = memory_pb2.MemoryEntry(id=entry.id or "", author=entry.author or "",
                                custom_metadata=dict_to_struct(entry.custom_metadata or {}))
    pb.content.role = entry.content.role or ""
    pb.content.parts.extend(part_to_proto(p) for p in entry.content.parts or [])
    if entry.timestamp:
        when = datetime.fromisoformat(entry.timestamp)
        if when.tzinfo is None:
            when = when.replace(tzinfo=timezone.utc)
        pb.timestamp.CopyFrom(float_to_timestamp(when.timestamp()))
    return pb


class GrpcMemoryService(BaseMemoryService):
    """ADK's ``BaseMemoryService`` over ``adk.v1.MemoryService``: memories scoped to
    (app, user), searched on the server. For an app the server generates memories for
    (``--memory-generation``), events become facts as with ADK's Memory Bank service
    (ingested by default, generated at once when custom_metadata asks); for any other app
    each event is a memory, and a session added again replaces its memories (a memory's id
    is its event's id)."""

    def __init__(self, uri: Optional[str] = None, *, target: Optional[str] = None,
                 timeout: Optional[float] = 30.0, options: Optional[List[Tuple[str, Any]]] = None,
                 **_registry_kwargs: Any) -> None:
        address = target or (target_of(uri) if uri else None)
        if not address:
            raise ValueError("GrpcMemoryService needs uri='adk-grpc://host:port' or target='host:port'")
        self._channel = _Channel(address, list(options or []))
        self._timeout = timeout

    def _stub(self) -> memory_pb2_grpc.MemoryServiceStub:
        return memory_pb2_grpc.MemoryServiceStub(self._channel.get())

    async def close(self) -> None:
        await self._channel.close()

    async def _call(self, method: str, request: Any) -> Any:
        try:
            return await getattr(self._stub(), method)(request, timeout=self._timeout)
        except grpc.aio.AioRpcError as err:
            if err.code() == grpc.StatusCode.INVALID_ARGUMENT:
                raise _invalid(err) from err
            if err.code() == grpc.StatusCode.NOT_FOUND:
                raise SessionNotFoundError(err.details() or "session not found") from err
            raise

    async def add_session_to_memory(self, session: Session) -> None:
        """Adds the session's events as the client holds them (ADK passes the session
        object), so events not stored on this server are remembered too."""
        await self.add_events_to_memory(app_name=session.app_name, user_id=session.user_id,
                                        events=session.events, session_id=session.id)

    async def add_events_to_memory(self, *, app_name: str, user_id: str, events: Any,
                                   session_id: Optional[str] = None,
                                   custom_metadata: Optional[Mapping[str, object]] = None) -> None:
        """ADK's ``VertexAiMemoryBankService`` paths: the events go to the user's ingest
        buffer on the server (IngestEvents; ``custom_metadata`` may give ``stream_id``,
        else the session's id, and ``force_flush``), whose model generates facts from them
        when an event count or an idle time is reached; or, when ``custom_metadata`` asks
        for what only Memory Bank's generation has (``ttl``, ``revision_ttl``,
        ``allowed_topics``, ``wait_for_completion``...), the server extracts and
        consolidates their facts at once (GenerateMemories), with those topics and ttl. For
        an app the server has no generation model for, the events are added as memories,
        one per event (AddEventsToMemory), as before generation existed."""
        if _generates_memories(custom_metadata):
            await self.generate_memories(app_name=app_name, user_id=user_id, events=events,
                                         custom_metadata=custom_metadata)
            return
        metadata = custom_metadata or {}
        try:
            await self.ingest_events(app_name=app_name, user_id=user_id, events=events,
                                     stream_id=cast(Optional[str], metadata.get("stream_id")) or session_id,
                                     force_flush=bool(metadata.get("force_flush")))
            return
        except grpc.aio.AioRpcError as err:
            if err.code() != grpc.StatusCode.FAILED_PRECONDITION:
                raise
        kept = {key: value for key, value in metadata.items() if key not in _INGEST_KEYS}
        request = memory_pb2.AddEventsToMemoryRequest(
            app_name=app_name, user_id=user_id, session_id=session_id or "",
            events=[event_to_proto(e) for e in events],
            custom_metadata=_metadata_struct(kept))
        await self._call("AddEventsToMemory", request)

    async def ingest_events(self, *, app_name: str, user_id: str, events: Any,
                            stream_id: Optional[str] = None, force_flush: bool = False) -> Any:
        """IngestEvents: buffers the events for the server's generation; with
        ``force_flush`` generates from the user's whole buffer first. Returns the server's
        reply (``buffered_events``, and the flush's ``memories``)."""
        request = memory_pb2.IngestEventsRequest(
            app_name=app_name, user_id=user_id, stream_id=stream_id or "",
            events=[event_to_proto(e) for e in events], force_flush=force_flush)
        return await self._call("IngestEvents", request)

    async def generate_memories(self, *, app_name: str, user_id: str, events: Any = (),
                                session_id: Optional[str] = None,
                                custom_metadata: Optional[Mapping[str, object]] = None) -> List[Any]:
        """GenerateMemories from the events, or from the stored session ``session_id``;
        returns the server's ``GeneratedMemory`` changes (memory and action)."""
        metadata = custom_metadata or {}
        topics = metadata.get("allowed_topics") or ()
        if isinstance(topics, str):
            topics = [topics]
        request = memory_pb2.GenerateMemoriesRequest(
            app_name=app_name, user_id=user_id, source_session_id=session_id or "",
            events=[event_to_proto(e) for e in events],
            topics=[memory_pb2.MemoryTopic(label=str(t)) for t in cast(Any, topics)],
            ttl_seconds=_ttl_seconds(metadata.get("revision_ttl") or metadata.get("ttl")))
        reply = await self._call("GenerateMemories", request)
        return list(reply.memories)

    async def add_memory(self, *, app_name: str, user_id: str, memories: Any,
                         custom_metadata: Optional[Mapping[str, object]] = None) -> None:
        request = memory_pb2.AddMemoryRequest(
            app_name=app_name, user_id=user_id, memories=[_memory_entry_to_proto(m) for m in memories],
            custom_metadata=_metadata_struct(custom_metadata))
        await self._call("AddMemory", request)

    async def search_memory(self, *, app_name: str, user_id: str, query: str) -> SearchMemoryResponse:
        reply = await self._call("SearchMemory",
                                 memory_pb2.SearchMemoryRequest(app_name=app_name, user_id=user_id, query=query))
        return SearchMemoryResponse(memories=[_memory_entry_from_proto(m) for m in reply.memories])

    async def delete_memory(self, *, app_name: str, user_id: str, memory_id: Optional[str] = None) -> None:
        if not memory_id:
            return
        await self._call("DeleteMemory", memory_pb2.DeleteMemoryRequest(
            app_name=app_name, user_id=user_id, memory_id=memory_id))


# ---- ADK's service registry ------------------------------------------------------------


def register(scheme: str = SCHEME) -> None:
    """Adds ``adk-grpc://host:port`` to ADK's service registry, for session, artifact and
    memory services (``adk web --session_service_uri=adk-grpc://…``)."""
    from google.adk.cli.service_registry import get_service_registry

    registry = get_service_registry()
    registry.register_session_service(scheme, lambda uri, **kwargs: GrpcSessionService(uri, **kwargs))
    registry.register_artifact_service(scheme, lambda uri, **kwargs: GrpcArtifactService(uri, **kwargs))
    registry.register_memory_service(scheme, lambda uri, **kwargs: GrpcMemoryService(uri, **kwargs))


# The custom_metadata keys ADK's VertexAiMemoryBankService sends to memories.generate and not
# to memories.ingest_events: any of them makes add_events_to_memory generate.
_GENERATE_KEYS = frozenset({
    "allowed_topics", "disable_consolidation", "disable_memory_revisions", "metadata",
    "metadata_merge_strategy", "revision_expire_time", "revision_labels", "revision_ttl", "ttl",
    "wait_for_completion",
})


# The custom_metadata keys ADK's VertexAiMemoryBankService sends to memories.ingest_events
# (generation_trigger_config is the server's per-app `ingest` setting here, so it is ignored).
_INGEST_KEYS = frozenset({"force_flush", "generation_trigger_config", "stream_id"})


def _generates_memories(custom_metadata: Optional[Mapping[str, object]]) -> bool:
    return any(key in _GENERATE_KEYS for key in (custom_metadata or {}))


def _ttl_seconds(ttl: object) -> int:
    """A ttl as ADK passes it to Memory Bank ("6000s", a number of seconds, a timedelta)
    in whole seconds; 0 (the app's) when absent."""
    if ttl is None:
        return 0
    if hasattr(ttl, "total_seconds"):
        return int(cast(Any, ttl).total_seconds())
    text = str(ttl).strip()
    return int(float(text[:-1] if text.endswith("s") else text))


def _metadata_struct(custom_metadata: Optional[Mapping[str, object]]) -> struct_pb2.Struct:
    # ADK types custom metadata as objects; a value that is not JSON raises TypeError here.
    return dict_to_struct(cast(Mapping[str, JsonValue], custom_metadata or {}))
