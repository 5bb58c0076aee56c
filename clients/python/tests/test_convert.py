"""Struct <-> dict conversions, without a server."""
from __future__ import annotations

import math
from typing import Any, Dict

import pytest
from google.protobuf import struct_pb2

from adk_client import dict_to_struct, python_to_value, struct_to_dict, value_to_python


def test_round_trip() -> None:
    value: Dict[str, Any] = {"s": "x", "i": 2, "f": 0.5, "t": True, "n": None, "l": [1, [2], {"k": "v"}], "d": {"e": {}}}
    assert struct_to_dict(dict_to_struct(value)) == value


def test_numbers_are_doubles_integral_ones_come_back_as_int() -> None:
    assert value_to_python(python_to_value(3)) == 3 and isinstance(value_to_python(python_to_value(3)), int)
    assert value_to_python(python_to_value(3.0)) == 3
    assert value_to_python(python_to_value(2.5)) == 2.5
    big = python_to_value(2.0**60)
    assert isinstance(value_to_python(big), float)
    inf = value_to_python(python_to_value(float("inf")))
    assert isinstance(inf, float) and math.isinf(inf)


def test_unset_value_is_none_and_bad_types_raise() -> None:
    assert value_to_python(struct_pb2.Value()) is None
    with pytest.raises(TypeError):
        python_to_value(object())  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        dict_to_struct({1: "x"})  # type: ignore[dict-item]
