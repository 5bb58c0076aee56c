"""ADK Python's pydantic Event <-> adk.v1.Event, as docs/adk-fields.md maps them.

Both directions go through ADK's own JSON form (``model_dump(mode="json")``, snake_case
names): a typed proto field is taken out of (or put into) that JSON object, and whatever
is left lands in (or comes from) the message's ``extensions``. So a field without a typed
home, including one a newer ADK adds, round-trips, and ADK's own validators build the
objects read back (``model_validate_json``: enums from names, bytes from base64, sets
from lists).

ADK's artifact versions are 0-based, this suite's 1-based: ``artifact_delta`` values are
stored 1-based (they name the suite's versions) and read back 0-based.
"""
from __future__ import annotations

import base64
import json
import math
from decimal import Decimal
from typing import Any, Dict, Optional

from google.adk.events import Event
from google.genai import types
from google.protobuf import timestamp_pb2

from ._convert import dict_to_struct, python_to_value, struct_to_dict, value_map_to_dict, value_to_python
from .v1 import content_pb2, event_pb2

Json = Dict[str, Any]

# ---- scalars ---------------------------------------------------------------------------


def float_to_timestamp(seconds: float) -> timestamp_pb2.Timestamp:
    """An ADK float timestamp as a Timestamp; exact: the float comes back equal."""
    exact = Decimal(seconds)
    whole = math.floor(exact)
    nanos = int(((exact - whole) * 1_000_000_000).to_integral_value())
    if nanos == 1_000_000_000:
        whole, nanos = whole + 1, 0
    return timestamp_pb2.Timestamp(seconds=whole, nanos=nanos)


def timestamp_to_float(ts: timestamp_pb2.Timestamp) -> float:
    # Decimal, so the float is the nearest one to seconds + nanos, as it was sent.
    return float(Decimal(ts.seconds) + Decimal(ts.nanos) / 1_000_000_000)


def _b64decode(text: str) -> bytes:
    """pydantic writes bytes as base64 (URL-safe or standard, by version): read either."""
    return base64.b64decode(text.replace("-", "+").replace("_", "/"))


def _b64encode(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _set_optional(message: Any, fields: Json, *names: str) -> None:
    """Moves the named JSON values (when present) into same-named optional proto fields."""
    for name in names:
        if name in fields:
            setattr(message, name, fields.pop(name))


def _read_optional(message: Any, out: Json, *names: str) -> None:
    for name in names:
        if message.HasField(name):
            out[name] = getattr(message, name)


def _set_struct(message: Any, fields: Json, *names: str) -> None:
    for name in names:
        if name in fields:
            getattr(message, name).CopyFrom(dict_to_struct(fields.pop(name)))


def _read_struct(message: Any, out: Json, *names: str) -> None:
    for name in names:
        if message.HasField(name):
            out[name] = struct_to_dict(getattr(message, name))


def _set_extensions(message: Any, rest: Json) -> None:
    if rest:
        message.extensions.CopyFrom(dict_to_struct(rest))


def _merge_extensions(message: Any, out: Json) -> Json:
    """Merges a message's extensions into the JSON built from its typed fields; for a
    key holding an object on both sides (a part kind's extra fields), key by key."""
    for key, value in struct_to_dict(message.extensions).items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = {**out[key], **value}
        else:
            out[key] = value
    return out


# ---- Part and Content ------------------------------------------------------------------

# Each part kind with the fields its proto message types; the others go to extensions.
_KIND_FIELDS = {
    "inline_data": ("mime_type", "data", "display_name"),
    "file_data": ("mime_type", "file_uri", "display_name"),
    "function_call": ("name", "args", "id", "will_continue"),
    "function_response": ("name", "response", "id", "will_continue"),
    "executable_code": ("code", "language", "id"),
    "code_execution_result": ("outcome", "output", "id"),
}


def part_json_to_proto(part: Json) -> content_pb2.Part:
    rest = dict(part)
    pb = content_pb2.Part()
    kind_set = False
    if "text" in rest:
        pb.text = rest.pop("text")
        kind_set = True
    for kind, typed in _KIND_FIELDS.items():
        if kind not in rest or kind_set:
            continue  # a second kind (the proto holds one) stays whole in extensions
        fields = dict(rest.pop(kind))
        kind_set = True
        target = getattr(pb, kind)
        target.SetInParent()
        for name in typed:
            if name not in fields:
                continue
            value = fields.pop(name)
            if name in ("args", "response"):
                getattr(target, name).CopyFrom(python_to_value(value))
            elif name == "data":
                target.data = _b64decode(value)
            else:
                setattr(target, name, value)
        if fields:
            rest[kind] = fields
    _set_optional(pb, rest, "thought")
    if "thought_signature" in rest:
        pb.thought_signature = _b64decode(rest.pop("thought_signature"))
    if "video_metadata" in rest:
        video = dict(rest.pop("video_metadata"))
        _set_optional(pb.video_metadata, video, "start_offset", "end_offset", "fps")
        pb.video_metadata.SetInParent()
        if video:
            rest["video_metadata"] = video
    _set_struct(pb, rest, "part_metadata")
    _set_extensions(pb, rest)
    return pb


def part_proto_to_json(pb: content_pb2.Part) -> Json:
    out: Json = {}
    kind = pb.WhichOneof("kind")
    if kind == "text":
        out["text"] = pb.text
    elif kind is not None:
        source = getattr(pb, kind)
        fields: Json = {}
        for name in _KIND_FIELDS[kind]:
            if name in ("args", "response"):
                if source.HasField(name):
                    fields[name] = value_to_python(getattr(source, name))
            elif name == "data":
                fields[name] = _b64encode(source.data)
            elif name in ("mime_type", "file_uri", "name") and kind in ("inline_data", "file_data", "function_call", "function_response"):
                # Plain proto strings: empty is ADK's None.
                if getattr(source, name):
                    fields[name] = getattr(source, name)
            elif source.HasField(name):
                fields[name] = getattr(source, name)
        out[kind] = fields
    _read_optional(pb, out, "thought")
    if pb.HasField("thought_signature"):
        out["thought_signature"] = _b64encode(pb.thought_signature)
    if pb.HasField("video_metadata"):
        video: Json = {}
        _read_optional(pb.video_metadata, video, "start_offset", "end_offset", "fps")
        out["video_metadata"] = video
    _read_struct(pb, out, "part_metadata")
    return _merge_extensions(pb, out)


def content_json_to_proto(content: Json) -> content_pb2.Content:
    return content_pb2.Content(
        role=content.get("role") or "",
        parts=[part_json_to_proto(p) for p in content.get("parts") or []],
    )


def content_proto_to_json(pb: content_pb2.Content) -> Json:
    out: Json = {"parts": [part_proto_to_json(p) for p in pb.parts]}
    if pb.role:
        out["role"] = pb.role
    return out


def part_to_proto(part: types.Part) -> content_pb2.Part:
    return part_json_to_proto(part.model_dump(mode="json", exclude_none=True))


def part_from_proto(pb: content_pb2.Part) -> types.Part:
    return types.Part.model_validate_json(json.dumps(part_proto_to_json(pb)))


# ---- usage metadata, transcription -----------------------------------------------------

_USAGE_COUNTS = (
    "prompt_token_count",
    "candidates_token_count",
    "total_token_count",
    "cached_content_token_count",
    "thoughts_token_count",
    "tool_use_prompt_token_count",
)
_USAGE_DETAILS = (
    "prompt_tokens_details",
    "cache_tokens_details",
    "candidates_tokens_details",
    "tool_use_prompt_tokens_details",
)


def _usage_to_proto(usage: Json) -> event_pb2.UsageMetadata:
    pb = event_pb2.UsageMetadata()
    _set_optional(pb, usage, *_USAGE_COUNTS, "traffic_type")
    for name in _USAGE_DETAILS:
        for detail in usage.get(name) or []:
            item = getattr(pb, name).add()
            _set_optional(item, dict(detail), "modality", "token_count")
    return pb


def _usage_to_json(pb: event_pb2.UsageMetadata) -> Json:
    out: Json = {}
    _read_optional(pb, out, *_USAGE_COUNTS, "traffic_type")
    for name in _USAGE_DETAILS:
        details = []
        for item in getattr(pb, name):
            detail: Json = {}
            _read_optional(item, detail, "modality", "token_count")
            details.append(detail)
        if details:
            out[name] = details
    return out


def _transcription_to_proto(transcription: Json) -> event_pb2.Transcription:
    rest = dict(transcription)
    pb = event_pb2.Transcription()
    _set_optional(pb, rest, "text", "finished")
    _set_extensions(pb, rest)
    return pb


def _transcription_to_json(pb: event_pb2.Transcription) -> Json:
    out: Json = {}
    _read_optional(pb, out, "text", "finished")
    return _merge_extensions(pb, out)


# ---- EventActions ----------------------------------------------------------------------


def _actions_to_proto(actions: Json) -> event_pb2.EventActions:
    rest = dict(actions)
    pb = event_pb2.EventActions()
    for key, value in (rest.pop("state_delta", None) or {}).items():
        pb.state_delta[key].CopyFrom(python_to_value(value))
    for name, version in (rest.pop("artifact_delta", None) or {}).items():
        pb.artifact_delta[name] = version + 1  # ADK's 0-based version -> the suite's 1-based
    _set_optional(
        pb,
        rest,
        "skip_summarization",
        "transfer_to_agent",
        "escalate",
        "transfer_reason",
        "end_of_agent",
        "rewind_before_invocation_id",
    )
    auth = rest.pop("requested_auth_configs", None)
    if auth:
        pb.requested_auth_configs.CopyFrom(dict_to_struct(auth))
    for call_id, confirmation in (rest.pop("requested_tool_confirmations", None) or {}).items():
        item = pb.requested_tool_confirmations[call_id]
        item.hint = confirmation.get("hint", "")
        item.confirmed = confirmation.get("confirmed", False)
        if "payload" in confirmation:
            item.payload.CopyFrom(python_to_value(confirmation["payload"]))
    if "compaction" in rest:
        compaction = rest.pop("compaction")
        pb.compaction.start_timestamp.CopyFrom(float_to_timestamp(compaction["start_timestamp"]))
        pb.compaction.end_timestamp.CopyFrom(float_to_timestamp(compaction["end_timestamp"]))
        pb.compaction.compacted_content.CopyFrom(content_json_to_proto(compaction["compacted_content"]))
    _set_struct(pb, rest, "agent_state")
    structured = rest.pop("set_model_response", None)
    if structured is not None:
        pb.set_model_response.CopyFrom(python_to_value(structured))
    _set_extensions(pb, rest)
    return pb


def _actions_to_json(pb: event_pb2.EventActions) -> Json:
    out: Json = {
        "state_delta": value_map_to_dict(pb.state_delta),
        "artifact_delta": {name: version - 1 for name, version in pb.artifact_delta.items()},
        "requested_auth_configs": struct_to_dict(pb.requested_auth_configs),
        "requested_tool_confirmations": {
            call_id: {
                "hint": item.hint,
                "confirmed": item.confirmed,
                **({"payload": value_to_python(item.payload)} if item.HasField("payload") else {}),
            }
            for call_id, item in pb.requested_tool_confirmations.items()
        },
    }
    _read_optional(
        pb,
        out,
        "skip_summarization",
        "transfer_to_agent",
        "escalate",
        "transfer_reason",
        "end_of_agent",
        "rewind_before_invocation_id",
    )
    if pb.HasField("compaction"):
        out["compaction"] = {
            "start_timestamp": timestamp_to_float(pb.compaction.start_timestamp),
            "end_timestamp": timestamp_to_float(pb.compaction.end_timestamp),
            "compacted_content": content_proto_to_json(pb.compaction.compacted_content),
        }
    _read_struct(pb, out, "agent_state")
    if pb.HasField("set_model_response"):
        out["set_model_response"] = value_to_python(pb.set_model_response)
    return _merge_extensions(pb, out)


# ---- Event -----------------------------------------------------------------------------

_FINISH_PREFIX = "FINISH_REASON_"


def _finish_reason_to_proto(name: str) -> Optional[int]:
    proto_name = name if name.startswith(_FINISH_PREFIX) else _FINISH_PREFIX + name
    try:
        value = event_pb2.FinishReason.Value(proto_name)
    except ValueError:
        return None  # a reason newer than the proto: kept in extensions
    # The proto's 0 is "unset": an explicit FINISH_REASON_UNSPECIFIED stays in extensions.
    return value or None


def _finish_reason_to_json(value: int) -> str:
    name = event_pb2.FinishReason.Name(value)
    return name if value == event_pb2.FINISH_REASON_UNSPECIFIED else name[len(_FINISH_PREFIX):]


def _default_json(field_name: str) -> Any:
    field = Event.model_fields[field_name]
    default = field.get_default(call_default_factory=True)
    return default.model_dump(mode="json", exclude_none=True) if hasattr(default, "model_dump") else default


def event_to_proto(event: Event) -> event_pb2.Event:
    """ADK's Event as adk.v1.Event: every field typed or in an extensions object."""
    rest = event.model_dump(mode="json", exclude_none=True)
    pb = event_pb2.Event(
        id=rest.pop("id", ""),
        invocation_id=rest.pop("invocation_id", ""),
        author=rest.pop("author", ""),
        branch=rest.pop("branch", ""),
        isolation_scope=rest.pop("isolation_scope", ""),
    )
    if "output" in rest:
        pb.output.CopyFrom(python_to_value(rest.pop("output")))
    pb.timestamp.CopyFrom(float_to_timestamp(rest.pop("timestamp")))
    if "content" in rest:
        pb.content.CopyFrom(content_json_to_proto(rest.pop("content")))
    if "usage_metadata" in rest:
        pb.usage_metadata.CopyFrom(_usage_to_proto(rest.pop("usage_metadata")))
    if "finish_reason" in rest:
        value = _finish_reason_to_proto(rest["finish_reason"])
        if value is not None:
            pb.finish_reason = value  # type: ignore[assignment]  # an enum value is its int
            del rest["finish_reason"]
    _set_optional(
        pb,
        rest,
        "partial",
        "turn_complete",
        "interrupted",
        "error_code",
        "error_message",
        "model_version",
        "avg_logprobs",
        "turn_complete_reason",
    )
    pb.actions.CopyFrom(_actions_to_proto(rest.pop("actions", {})))
    if rest.get("long_running_tool_ids"):
        pb.long_running_tool_ids.extend(sorted(rest.pop("long_running_tool_ids")))
    # An empty set (ADK's runner writes one on every function call event) is not None: the
    # repeated field cannot tell them apart, so an empty one stays in extensions.
    _set_struct(pb, rest, "grounding_metadata", "citation_metadata", "custom_metadata", "logprobs_result")
    for name in ("input_transcription", "output_transcription"):
        if name in rest:
            getattr(pb, name).CopyFrom(_transcription_to_proto(rest.pop(name)))
    # A field left at its default (e.g. node_info) reads back as that default anyway.
    rest = {key: value for key, value in rest.items() if value != _default_json(key)}
    _set_extensions(pb, rest)
    return pb


def event_to_json(pb: event_pb2.Event) -> Json:
    out: Json = {
        "id": pb.id,
        "invocation_id": pb.invocation_id,
        "author": pb.author,
        "actions": _actions_to_json(pb.actions),
    }
    if pb.branch:
        out["branch"] = pb.branch
    if pb.isolation_scope:
        out["isolation_scope"] = pb.isolation_scope
    if pb.HasField("output"):
        out["output"] = value_to_python(pb.output)
    if pb.HasField("timestamp"):
        out["timestamp"] = timestamp_to_float(pb.timestamp)
    if pb.HasField("content"):
        out["content"] = content_proto_to_json(pb.content)
    if pb.HasField("usage_metadata"):
        out["usage_metadata"] = _usage_to_json(pb.usage_metadata)
    if pb.finish_reason != event_pb2.FINISH_REASON_UNSPECIFIED:
        out["finish_reason"] = _finish_reason_to_json(pb.finish_reason)
    _read_optional(
        pb,
        out,
        "partial",
        "turn_complete",
        "interrupted",
        "error_code",
        "error_message",
        "model_version",
        "avg_logprobs",
        "turn_complete_reason",
    )
    if pb.long_running_tool_ids:
        out["long_running_tool_ids"] = list(pb.long_running_tool_ids)
    _read_struct(pb, out, "grounding_metadata", "citation_metadata", "custom_metadata", "logprobs_result")
    for name in ("input_transcription", "output_transcription"):
        if pb.HasField(name):
            out[name] = _transcription_to_json(getattr(pb, name))
    return _merge_extensions(pb, out)


def event_from_proto(pb: event_pb2.Event) -> Event:
    """adk.v1.Event as ADK's Event, built by ADK's own validators."""
    return Event.model_validate_json(json.dumps(event_to_json(pb)))
