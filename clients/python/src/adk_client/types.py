"""Plain results of the AdkClient calls that read sessions and artifacts."""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Dict, List, Optional, Union

from ._convert import JsonValue, struct_to_dict, timestamp_to_datetime
from .v1 import artifact_pb2, event_pb2, session_pb2


@dataclass(frozen=True)
class Session:
    """A session: its merged state (app -> user -> session, keys keep their prefixes)
    and its events (oldest first; empty in listings)."""

    app_name: str
    user_id: str
    id: str
    state: Dict[str, JsonValue]
    events: List[event_pb2.Event] = field(default_factory=list)
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
            events=list(msg.events),
            event_count=msg.event_count,
            create_time=timestamp_to_datetime(msg, "create_time"),
            last_update_time=timestamp_to_datetime(msg, "last_update_time"),
            expire_time=timestamp_to_datetime(msg, "expire_time"),
        )


@dataclass(frozen=True)
class Artifact:
    """One loaded artifact version: ``data`` is ``str`` for text parts, ``bytes`` otherwise."""

    file_name: str
    version: int
    mime_type: str
    data: Union[bytes, str]
    size_bytes: int = 0
    custom_metadata: Dict[str, JsonValue] = field(default_factory=dict)
    create_time: Optional[datetime] = None

    @property
    def is_text(self) -> bool:
        return isinstance(self.data, str)

    @classmethod
    def from_proto(cls, msg: artifact_pb2.LoadArtifactResponse) -> "Artifact":
        meta = msg.metadata
        kind = msg.part.WhichOneof("kind")
        if kind == "text":
            data: Union[bytes, str] = msg.part.text
        elif kind == "inline_data":
            data = msg.part.inline_data.data
        else:  # the service stores text and inline data only
            raise ValueError(f"unexpected artifact part kind: {kind}")
        return cls(
            file_name=meta.file_name,
            version=msg.version,
            mime_type=meta.mime_type or (msg.part.inline_data.mime_type if kind == "inline_data" else "text/plain"),
            data=data,
            size_bytes=meta.size_bytes,
            custom_metadata=struct_to_dict(meta.custom_metadata),
            create_time=timestamp_to_datetime(meta, "create_time"),
        )
