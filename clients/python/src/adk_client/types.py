"""Plain views of the adk.v1 messages the clients return and take.

State, tool arguments, tool results, schemas and metadata are JSON values (dicts, lists,
str, numbers, None: never ``google.protobuf.Struct``/``Value``), times are aware UTC
datetimes, int64 are ints. Each view is built from its message in one place
(``from_proto``), and the inputs (``Content``, ``Part``) turn back into messages with
``to_proto``. An ``Event`` keeps its whole message as ``proto`` for fields left out here.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Dict, List, Optional, Union

from ._convert import (
    JsonValue,
    python_to_value,
    struct_to_dict,
    timestamp_to_datetime,
    value_map_to_dict,
    value_to_python,
)
from .v1 import artifact_pb2, content_pb2, event_pb2, memory_pb2, runner_pb2, session_pb2


@dataclass(frozen=True)
class FunctionCall:
    """A tool call the model made; ``id`` is what the answer names ("" when none was given)."""

    name: str
    id: str = ""
    args: JsonValue = None


@dataclass(frozen=True)
class FunctionResponse:
    """A tool's result, answering the call with the same ``id``."""

    name: str
    id: str = ""
    response: JsonValue = None


@dataclass(frozen=True)
class Blob:
    mime_type: str
    data: bytes
    display_name: Optional[str] = None


@dataclass(frozen=True)
class FileData:
    mime_type: str
    file_uri: str
    display_name: Optional[str] = None


@dataclass(frozen=True)
class Part:
    """One part of a message: exactly one of ``text``, ``inline_data``, ``file_data``,
    ``function_call``, ``function_response`` is set (none for executable code and its
    results, which stay in ``Event.proto``)."""

    text: Optional[str] = None
    thought: bool = False
    inline_data: Optional[Blob] = None
    file_data: Optional[FileData] = None
    function_call: Optional[FunctionCall] = None
    function_response: Optional[FunctionResponse] = None

    @classmethod
    def from_proto(cls, msg: content_pb2.Part) -> "Part":
        kind = msg.WhichOneof("kind")
        thought = msg.thought
        if kind == "text":
            return cls(text=msg.text, thought=thought)
        if kind == "inline_data":
            b = msg.inline_data
            name = b.display_name if b.HasField("display_name") else None
            return cls(inline_data=Blob(b.mime_type, b.data, name), thought=thought)
        if kind == "file_data":
            f = msg.file_data
            name = f.display_name if f.HasField("display_name") else None
            return cls(file_data=FileData(f.mime_type, f.file_uri, name), thought=thought)
        if kind == "function_call":
            c = msg.function_call
            return cls(function_call=FunctionCall(c.name, c.id, value_to_python(c.args)))
        if kind == "function_response":
            r = msg.function_response
            return cls(function_response=FunctionResponse(r.name, r.id, value_to_python(r.response)))
        return cls(thought=thought)

    def to_proto(self) -> content_pb2.Part:
        part = content_pb2.Part()
        if self.thought:
            part.thought = True
        if self.text is not None:
            part.text = self.text
        elif self.inline_data is not None:
            b = self.inline_data
            part.inline_data.CopyFrom(content_pb2.Blob(mime_type=b.mime_type, data=b.data, display_name=b.display_name))
        elif self.file_data is not None:
            f = self.file_data
            part.file_data.CopyFrom(
                content_pb2.FileData(mime_type=f.mime_type, file_uri=f.file_uri, display_name=f.display_name)
            )
        elif self.function_call is not None:
            c = self.function_call
            part.function_call.CopyFrom(
                content_pb2.FunctionCall(name=c.name, id=c.id or None, args=python_to_value(c.args))
            )
        elif self.function_response is not None:
            r = self.function_response
            part.function_response.CopyFrom(
                content_pb2.FunctionResponse(name=r.name, id=r.id or None, response=python_to_value(r.response))
            )
        else:
            raise ValueError("Part: set one of text, inline_data, file_data, function_call, function_response")
        return part


@dataclass(frozen=True)
class Content:
    """A message: who speaks (``"user"`` or ``"model"``) and its parts."""

    role: str
    parts: List[Part] = field(default_factory=list)

    @classmethod
    def from_proto(cls, msg: content_pb2.Content) -> "Content":
        return cls(role=msg.role, parts=[Part.from_proto(p) for p in msg.parts])

    def to_proto(self) -> content_pb2.Content:
        return content_pb2.Content(role=self.role, parts=[p.to_proto() for p in self.parts])

    @property
    def text(self) -> str:
        """The text parts (thoughts left out), joined."""
        return "".join(p.text for p in self.parts if p.text is not None and not p.thought)


#: What ``run`` and memory calls take as a message: text, a ``Content``, or the message.
MessageInput = Union[str, Content, content_pb2.Content]


def to_content(message: MessageInput, role: str = "user") -> content_pb2.Content:
    if isinstance(message, str):
        return content_pb2.Content(role=role, parts=[content_pb2.Part(text=message)])
    if isinstance(message, Content):
        return message.to_proto()
    return message


@dataclass(frozen=True)
class Event:
    """An event of a session or a run. ``sequence`` is its position in the session (1, 2,
    …; 0 for partial events, which are never stored). ``proto`` is the whole message."""

    id: str
    invocation_id: str
    author: str
    branch: str
    sequence: int
    timestamp: Optional[datetime]
    partial: bool
    turn_complete: bool
    interrupted: bool
    error_code: Optional[str]
    error_message: Optional[str]
    content: Optional[Content]
    long_running_tool_ids: List[str]
    state_delta: Dict[str, JsonValue]
    artifact_delta: Dict[str, int]
    proto: event_pb2.Event = field(repr=False, compare=False)

    @classmethod
    def from_proto(cls, msg: event_pb2.Event) -> "Event":
        return cls(
            id=msg.id,
            invocation_id=msg.invocation_id,
            author=msg.author,
            branch=msg.branch,
            sequence=msg.sequence,
            timestamp=timestamp_to_datetime(msg, "timestamp"),
            partial=msg.partial,
            turn_complete=msg.turn_complete,
            interrupted=msg.interrupted,
            error_code=msg.error_code if msg.HasField("error_code") else None,
            error_message=msg.error_message if msg.HasField("error_message") else None,
            content=Content.from_proto(msg.content) if msg.HasField("content") else None,
            long_running_tool_ids=list(msg.long_running_tool_ids),
            state_delta=value_map_to_dict(msg.actions.state_delta),
            artifact_delta=dict(msg.actions.artifact_delta),
            proto=msg,
        )

    @property
    def text(self) -> str:
        """The text parts (thoughts left out), joined; "" when there are none."""
        return self.content.text if self.content is not None else ""

    @property
    def function_calls(self) -> List[FunctionCall]:
        parts = self.content.parts if self.content is not None else []
        return [p.function_call for p in parts if p.function_call is not None]

    @property
    def function_responses(self) -> List[FunctionResponse]:
        parts = self.content.parts if self.content is not None else []
        return [p.function_response for p in parts if p.function_response is not None]

    @property
    def client_tool_calls(self) -> List[FunctionCall]:
        """The calls the client answers (long-running tools): ``function_response`` each."""
        return [c for c in self.function_calls if c.id and c.id in self.long_running_tool_ids]


@dataclass(frozen=True)
class Session:
    """A session: its merged state (app -> user -> session, keys keep their prefixes)
    and its events (oldest first; empty in listings)."""

    app_name: str
    user_id: str
    id: str
    state: Dict[str, JsonValue]
    events: List[Event] = field(default_factory=list)
    event_count: int = 0
    create_time: Optional[datetime] = None
    last_update_time: Optional[datetime] = None
    expire_time: Optional[datetime] = None

    @classmethod
    def from_proto(cls, msg: session_pb2.Session) -> "Session":
        return cls(
            app_name=msg.app_name,
            user_id=msg.user_id,
            id=msg.id,
            state=struct_to_dict(msg.state),
            events=[Event.from_proto(e) for e in msg.events],
            event_count=msg.event_count,
            create_time=timestamp_to_datetime(msg, "create_time"),
            last_update_time=timestamp_to_datetime(msg, "last_update_time"),
            expire_time=timestamp_to_datetime(msg, "expire_time"),
        )


@dataclass(frozen=True)
class ArtifactMetadata:
    """What is recorded about one artifact version (without its bytes)."""

    file_name: str
    version: int
    mime_type: str
    size_bytes: int
    is_text: bool
    is_file_uri: bool
    custom_metadata: Dict[str, JsonValue]
    create_time: Optional[datetime]
    #: The saved part's display name (inline or file data), if it had one.
    display_name: Optional[str] = None

    @classmethod
    def from_proto(cls, msg: artifact_pb2.ArtifactMetadata) -> "ArtifactMetadata":
        return cls(
            file_name=msg.file_name,
            version=msg.version,
            mime_type=msg.mime_type,
            size_bytes=msg.size_bytes,
            is_text=msg.is_text,
            is_file_uri=msg.is_file_uri,
            custom_metadata=struct_to_dict(msg.custom_metadata),
            create_time=timestamp_to_datetime(msg, "create_time"),
            display_name=msg.display_name if msg.HasField("display_name") else None,
        )


@dataclass(frozen=True)
class Artifact:
    """One loaded artifact version: ``data`` is ``str`` for text parts, ``bytes`` for
    inline data; a file_data part's URI is ``file_uri``."""

    file_name: str
    version: int
    mime_type: str
    data: Union[bytes, str]
    size_bytes: int = 0
    custom_metadata: Dict[str, JsonValue] = field(default_factory=dict)
    create_time: Optional[datetime] = None
    file_uri: Optional[str] = None

    @property
    def is_text(self) -> bool:
        return isinstance(self.data, str)

    @classmethod
    def from_proto(cls, msg: artifact_pb2.LoadArtifactResponse) -> "Artifact":
        meta = msg.metadata
        kind = msg.part.WhichOneof("kind")
        file_uri = None
        data: Union[bytes, str]
        if kind == "text":
            data, mime = msg.part.text, "text/plain"
        elif kind == "inline_data":
            data, mime = msg.part.inline_data.data, msg.part.inline_data.mime_type
        elif kind == "file_data":
            data, mime, file_uri = b"", msg.part.file_data.mime_type, msg.part.file_data.file_uri
        else:  # the service stores text, inline data and file data only
            raise ValueError(f"unexpected artifact part kind: {kind}")
        return cls(
            file_name=meta.file_name,
            version=msg.version,
            mime_type=meta.mime_type or mime,
            data=data,
            size_bytes=meta.size_bytes,
            custom_metadata=struct_to_dict(meta.custom_metadata),
            create_time=timestamp_to_datetime(meta, "create_time"),
            file_uri=file_uri,
        )


@dataclass(frozen=True)
class Memory:
    """One memory of a user (``search_memory``)."""

    id: str
    content: Optional[Content]
    author: str
    timestamp: Optional[datetime]
    custom_metadata: Dict[str, JsonValue]
    #: Set on a memory the server generated (``generate_memories``, ``ingest_events``).
    fact: Optional["MemoryFact"] = None

    @property
    def text(self) -> str:
        return self.content.text if self.content is not None else ""

    @classmethod
    def from_proto(cls, msg: memory_pb2.MemoryEntry) -> "Memory":
        return cls(
            id=msg.id,
            content=Content.from_proto(msg.content) if msg.HasField("content") else None,
            author=msg.author,
            timestamp=timestamp_to_datetime(msg, "timestamp"),
            custom_metadata=struct_to_dict(msg.custom_metadata),
            fact=MemoryFact.from_proto(msg.fact) if msg.HasField("fact") else None,
        )


def _memory_action(action: int) -> str:
    """``"CREATED"``, ``"UPDATED"`` or ``"DELETED"``."""
    return memory_pb2.MemoryAction.Name(action).removeprefix("MEMORY_ACTION_")


@dataclass(frozen=True)
class MemoryFact:
    """What a generated memory carries besides its text: its topics, its revision (1 when
    created) and the events it came from."""

    topics: List[str]
    revision: int
    source_event_ids: List[str]
    create_time: Optional[datetime]
    update_time: Optional[datetime]
    expire_time: Optional[datetime]

    @classmethod
    def from_proto(cls, msg: memory_pb2.MemoryFact) -> "MemoryFact":
        return cls(
            topics=list(msg.topics),
            revision=msg.revision,
            source_event_ids=list(msg.source_event_ids),
            create_time=timestamp_to_datetime(msg, "create_time"),
            update_time=timestamp_to_datetime(msg, "update_time"),
            expire_time=timestamp_to_datetime(msg, "expire_time"),
        )


@dataclass(frozen=True)
class GeneratedMemory:
    """One change of a generation: ``action`` is "CREATED", "UPDATED" or "DELETED"; a
    deleted ``memory`` as it was."""

    memory: Memory
    action: str

    @classmethod
    def from_proto(cls, msg: memory_pb2.GeneratedMemory) -> "GeneratedMemory":
        return cls(memory=Memory.from_proto(msg.memory), action=_memory_action(msg.action))


@dataclass(frozen=True)
class IngestResult:
    """What ``ingest_events`` did: the user's buffered events after it (0 after a flush)
    and, with ``force_flush``, the generation's changes."""

    buffered_events: int
    memories: List[GeneratedMemory]

    @classmethod
    def from_proto(cls, msg: memory_pb2.IngestEventsResponse) -> "IngestResult":
        return cls(
            buffered_events=msg.buffered_events,
            memories=[GeneratedMemory.from_proto(m) for m in msg.memories],
        )


@dataclass(frozen=True)
class MemoryRevision:
    """One revision of a generated memory (``list_memory_revisions``): the fact as it read
    then (empty for a deletion) and the action that made it."""

    revision: int
    fact: str
    topics: List[str]
    source_event_ids: List[str]
    create_time: Optional[datetime]
    action: str

    @classmethod
    def from_proto(cls, msg: memory_pb2.MemoryRevision) -> "MemoryRevision":
        return cls(
            revision=msg.revision,
            fact=msg.fact,
            topics=list(msg.topics),
            source_event_ids=list(msg.source_event_ids),
            create_time=timestamp_to_datetime(msg, "create_time"),
            action=_memory_action(msg.action),
        )


@dataclass(frozen=True)
class ToolsetInfo:
    """What the runner knows of a toolset (an MCP server): ``state`` is "NOT_STARTED",
    "CONNECTING", "CONNECTED" or "FAILING" (``error`` says why); ``tools`` are the server's
    tools as the model sees them, known once it connected (``tools_known``)."""

    state: str
    error: str
    tools_known: bool
    tools: List["ToolInfo"]

    @classmethod
    def from_proto(cls, msg: runner_pb2.ToolsetInfo) -> "ToolsetInfo":
        return cls(
            state=runner_pb2.ToolsetState.Name(msg.state).removeprefix("TOOLSET_STATE_"),
            error=msg.error,
            tools_known=msg.tools_known,
            tools=[ToolInfo.from_proto(t) for t in msg.tools],
        )


@dataclass(frozen=True)
class ToolInfo:
    """A tool as the model sees it; the schemas are JSON Schema documents. ``toolset`` is set
    when the entry is a toolset rather than one tool."""

    name: str
    description: str
    parameters_schema: JsonValue
    response_schema: JsonValue
    long_running: bool
    toolset: Optional[ToolsetInfo] = None

    @classmethod
    def from_proto(cls, msg: runner_pb2.ToolInfo) -> "ToolInfo":
        return cls(
            name=msg.name,
            description=msg.description,
            parameters_schema=value_to_python(msg.parameters_schema),
            response_schema=value_to_python(msg.response_schema),
            long_running=msg.long_running,
            toolset=ToolsetInfo.from_proto(msg.toolset) if msg.HasField("toolset") else None,
        )


@dataclass(frozen=True)
class AgentInfo:
    """One agent of an app's tree: ``kind`` is "llm", "sequential", "parallel", "loop" or "custom";
    ``mode`` an llm agent's ("chat", "task" or "single_turn", ADK 2's), empty for other kinds."""

    name: str
    description: str
    kind: str
    model: str
    tools: List[ToolInfo]
    sub_agents: List["AgentInfo"]
    mode: str = ""

    @classmethod
    def from_proto(cls, msg: runner_pb2.AgentInfo) -> "AgentInfo":
        return cls(
            name=msg.name,
            description=msg.description,
            kind=msg.kind,
            model=msg.model,
            tools=[ToolInfo.from_proto(t) for t in msg.tools],
            sub_agents=[AgentInfo.from_proto(a) for a in msg.sub_agents],
            mode=msg.mode,
        )


@dataclass(frozen=True)
class App:
    """An app the runner serves: its name and its agent tree."""

    name: str
    root_agent: AgentInfo

    @classmethod
    def from_proto(cls, msg: runner_pb2.App) -> "App":
        return cls(name=msg.name, root_agent=AgentInfo.from_proto(msg.root_agent))


def function_response(call: FunctionCall, response: JsonValue) -> Content:
    """The message answering a client tool's call: pass it to ``run`` to resume the invocation."""
    return Content("user", [Part(function_response=FunctionResponse(call.name, call.id, response))])


# ---- helpers over events, views or messages alike ------------------------------------

AnyEvent = Union[Event, event_pb2.Event]


def _view(event: AnyEvent) -> Event:
    return event if isinstance(event, Event) else Event.from_proto(event)


def event_text(event: AnyEvent) -> str:
    """The text of an event's parts, concatenated ("" when it has none)."""
    return _view(event).text


def state_delta(event: AnyEvent) -> Dict[str, JsonValue]:
    """An event's ``actions.state_delta`` as a dict."""
    return event.state_delta if isinstance(event, Event) else value_map_to_dict(event.actions.state_delta)


def function_calls(event: AnyEvent) -> List[FunctionCall]:
    """The tool calls an event asks for (answer the client's with ``function_response``)."""
    return _view(event).function_calls
