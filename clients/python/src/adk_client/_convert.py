"""Conversions between protobuf's JSON-like types and plain Python values."""
from __future__ import annotations

import math
from datetime import datetime, timezone
from typing import Any, Dict, List, Mapping, Optional, Union

from google.protobuf import struct_pb2, timestamp_pb2

#: A JSON value as Python holds it (what a google.protobuf.Value carries).
JsonValue = Union[None, bool, int, float, str, List[Any], Dict[str, Any]]

# Integral doubles up to 2**53 are exact, so they come back as int: JSON has one
# number type and a Struct stores every number as a double.
_MAX_SAFE_INT = 2**53


def value_to_python(value: struct_pb2.Value) -> JsonValue:
    """Converts a google.protobuf.Value to None, bool, int, float, str, list or dict."""
    kind = value.WhichOneof("kind")
    if kind is None or kind == "null_value":
        return None
    if kind == "bool_value":
        return value.bool_value
    if kind == "number_value":
        n = value.number_value
        if math.isfinite(n) and n.is_integer() and abs(n) <= _MAX_SAFE_INT:
            return int(n)
        return n
    if kind == "string_value":
        return value.string_value
    if kind == "list_value":
        return [value_to_python(v) for v in value.list_value.values]
    return struct_to_dict(value.struct_value)


def python_to_value(obj: JsonValue) -> struct_pb2.Value:
    """Converts a JSON-like Python value (nested dicts and lists allowed) to a Value."""
    value = struct_pb2.Value()
    if obj is None:
        value.null_value = struct_pb2.NULL_VALUE
    elif isinstance(obj, bool):
        value.bool_value = obj
    elif isinstance(obj, (int, float)):
        value.number_value = float(obj)
    elif isinstance(obj, str):
        value.string_value = obj
    elif isinstance(obj, Mapping):
        value.struct_value.CopyFrom(dict_to_struct(obj))
    elif isinstance(obj, (list, tuple)):
        value.list_value.values.extend(python_to_value(v) for v in obj)
    else:
        raise TypeError(f"not a JSON value: {type(obj).__name__}")
    return value


def struct_to_dict(struct: struct_pb2.Struct) -> Dict[str, JsonValue]:
    """Converts a google.protobuf.Struct to a dict."""
    return {key: value_to_python(v) for key, v in struct.fields.items()}


def dict_to_struct(obj: Optional[Mapping[str, JsonValue]]) -> struct_pb2.Struct:
    """Converts a dict with str keys and JSON-like values to a google.protobuf.Struct."""
    struct = struct_pb2.Struct()
    for key, v in (obj or {}).items():
        if not isinstance(key, str):
            raise TypeError(f"Struct keys must be str, got {type(key).__name__}")
        struct.fields[key].CopyFrom(python_to_value(v))
    return struct


def value_map_to_dict(values: Mapping[str, struct_pb2.Value]) -> Dict[str, JsonValue]:
    """Converts a map<string, Value> field (e.g. EventActions.state_delta) to a dict."""
    return {key: value_to_python(v) for key, v in values.items()}


def timestamp_to_datetime(message: Any, field: str) -> Optional[datetime]:
    """Reads a Timestamp field as an aware UTC datetime, None when unset."""
    if not message.HasField(field):
        return None
    ts: timestamp_pb2.Timestamp = getattr(message, field)
    return ts.ToDatetime(tzinfo=timezone.utc)
