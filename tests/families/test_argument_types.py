"""Reading an unquoted tool argument (GLM's format) back into JSON by the tool's schema: a parameter typed only
as string keeps its raw text, anything else is read as JSON when that yields an allowed type and kept as text
when it does not, NaN/Infinity are not JSON, and JSON nested past the call's depth limit raises `TooDeep`."""

from __future__ import annotations

import pytest

from maya_server.errors import TooDeep
from maya_server.families.argument_types import VALUE_DEPTH, parameter_schema, schema_types, typed_value
from maya_server.neutral.conversation import ToolSpec
from maya_server.util.json_depth import MAX_JSON_DEPTH

TOOL = ToolSpec("f", parameters={"type": "object", "properties": {"n": {"type": "integer"}, "bad": "string"}})


def test_parameter_schema_finds_a_property_schema_or_none():
    assert parameter_schema(TOOL, "n") == {"type": "integer"}
    assert parameter_schema(TOOL, "bad") is None and parameter_schema(TOOL, "absent") is None
    assert parameter_schema(None, "n") is None
    assert parameter_schema(ToolSpec("g"), "n") is None
    assert parameter_schema(ToolSpec("g", parameters={"properties": ["n"]}), "n") is None


@pytest.mark.parametrize("schema, types", [
    ({"type": "string"}, {"string"}),
    ({"type": ["integer", "null", 3]}, {"integer", "null"}),
    ({"const": 1.5}, {"number"}),
    ({"enum": ["a", 1, None]}, {"string", "integer", "number", "null"}),
    ({"enum": [True]}, {"boolean"}),
    ({"enum": []}, set()),
    ({"anyOf": [{"type": "string"}, {"type": "array"}]}, {"string", "array"}),
    ({"oneOf": [{"const": {}}]}, {"object"}),
    ({"anyOf": []}, set()),
    ({"description": "anything"}, set()),
    (None, set()),
    ("string", set()),
])
def test_schema_types_reads_type_const_enum_and_unions(schema, types):
    assert schema_types(schema) == types


@pytest.mark.parametrize("raw, schema, value", [
    ("42", {"type": "string"}, "42"),
    ("42", {"type": "integer"}, 42),
    ("42", {"type": "number"}, 42),
    ("42", None, 42),
    ("1.5", {"type": "integer"}, "1.5"),
    ("true", {"type": "boolean"}, True),
    ("true", {"type": "string", "description": "x"}, "true"),
    ("null", {"type": ["string", "null"]}, None),
    ('{"a": [1]}', {"type": "object"}, {"a": [1]}),
    ("[1, 2]", {"anyOf": [{"type": "array"}, {"type": "string"}]}, [1, 2]),
    ("hello world", {"type": "integer"}, "hello world"),
    ("hello", None, "hello"),
    ("NaN", {"type": "number"}, "NaN"),
    ("-Infinity", None, "-Infinity"),
    ('"quoted"', {"type": "integer"}, '"quoted"'),
    ('"quoted"', {"enum": ["quoted", 1]}, "quoted"),
])
def test_typed_value_reads_json_only_when_the_schema_allows_its_type(raw, schema, value):
    result = typed_value(raw, schema)
    assert result == value and type(result) is type(value)


def test_value_depth_leaves_room_for_the_arguments_object():
    assert VALUE_DEPTH == MAX_JSON_DEPTH - 1


def test_json_nested_past_the_value_depth_raises_too_deep_and_at_the_limit_passes():
    at_limit = "[" * VALUE_DEPTH + "]" * VALUE_DEPTH
    assert isinstance(typed_value(at_limit, None), list)
    too_deep = "[" * (VALUE_DEPTH + 1) + "]" * (VALUE_DEPTH + 1)
    with pytest.raises(TooDeep):
        typed_value(too_deep, {"type": "array"})
    assert typed_value(too_deep, {"type": "string"}) == too_deep  # a string parameter is never parsed
