"""`parse_format` and the instructions a format becomes: the one output-format parser both APIs share.

Each API hands over the flat format object with its own prefix (`text.format`,
`response_format`); every refusal is a 400 whose param walks from that prefix, schema keywords
included, so an unsupported schema never reaches generation. The instructions are what the model
is asked for: nothing for text, "a JSON object" for json_object, the schema itself for json_schema.
"""

from __future__ import annotations

import orjson
import pytest

from maya_server.errors import InvalidRequestError
from maya_server.structured.formats import (
    JsonObjectFormat, JsonSchemaFormat, TextFormat, output_schema, parse_format,
)
from maya_server.families.history import output_instructions


def json_instructions(fmt) -> str:
    """Maya's words for a format (GLM, ChatML): the format as the conversation carries it, worded by the family."""
    return output_instructions(output_schema(fmt))


PREFIX = ("text", "format")
SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"],
          "additionalProperties": False}


def refused(raw, prefix=PREFIX) -> InvalidRequestError:
    with pytest.raises(InvalidRequestError) as caught:
        parse_format(raw, prefix)
    return caught.value


def test_each_supported_type_parses_to_its_model():
    assert isinstance(parse_format({"type": "text"}, PREFIX), TextFormat)
    assert isinstance(parse_format({"type": "json_object"}, PREFIX), JsonObjectFormat)
    fmt = parse_format({"type": "json_schema", "name": "weather", "schema": SCHEMA, "strict": True}, PREFIX)
    assert isinstance(fmt, JsonSchemaFormat) and fmt.json_schema == SCHEMA and fmt.strict is True
    assert fmt.model_dump(by_alias=True, exclude_none=True)["schema"] == SCHEMA  # the wire name is `schema`


@pytest.mark.parametrize("raw, param, words", [
    ("json_object", "text.format", "Invalid type for 'text.format': expected an object."),
    ({}, "text.format.type", "Missing required parameter: 'text.format.type'."),
    ({"type": "xml"}, "text.format.type", "'xml'. Supported values are 'text', 'json_object' and 'json_schema'."),
    ({"type": ["text"]}, "text.format.type", "expected a string"),
    ({"type": "json_schema", "name": "n"}, "text.format.schema", "Missing required parameter"),
    ({"type": "json_schema", "name": "has space", "schema": SCHEMA}, "text.format.name", "Invalid value"),
    ({"type": "json_schema", "name": "n" * 65, "schema": SCHEMA}, "text.format.name", "Invalid value"),
    ({"type": "json_schema", "name": "n", "schema": SCHEMA, "strict": "yes"}, "text.format.strict", "Invalid value"),
    ({"type": "text", "verbosity": "low"}, "text.format.verbosity", "Unrecognized request argument"),
])
def test_a_bad_format_is_a_400_naming_the_field(raw, param, words):
    error = refused(raw)
    assert error.status == 400 and error.param == param and words in error.message


def test_the_schema_is_checked_against_the_subset_at_parse_time():
    with_pattern = {"type": "object", "properties": {"city": {"type": "string", "pattern": "^A"}}}
    error = refused({"type": "json_schema", "name": "n", "schema": with_pattern}, ("response_format",))
    assert error.param == "response_format.schema.properties.city.pattern"
    assert refused({"type": "json_schema", "name": "n", "schema": {"type": "array"}}).param == "text.format.schema.type"


def test_strict_adds_openais_rule_and_only_strict_does():
    open_schema = {"type": "object", "properties": {"a": {"type": "string"}}}
    assert parse_format({"type": "json_schema", "name": "n", "schema": open_schema}, PREFIX)
    error = refused({"type": "json_schema", "name": "n", "schema": open_schema, "strict": True})
    assert error.param == "text.format.schema.additionalProperties"


def test_instructions_ask_for_what_the_format_names():
    assert json_instructions(TextFormat()) == ""
    assert "valid JSON object" in json_instructions(JsonObjectFormat(type="json_object"))
    fmt = parse_format({"type": "json_schema", "name": "weather", "description": "Tomorrow, ✓", "schema": SCHEMA},
                       PREFIX)
    lines = json_instructions(fmt).split("\n")
    assert lines[1:] == ["Schema name: weather", "Description: Tomorrow, ✓", orjson.dumps(SCHEMA).decode()]
    undescribed = parse_format({"type": "json_schema", "name": "w", "schema": SCHEMA}, PREFIX)
    assert not any(line.startswith("Description") for line in json_instructions(undescribed).split("\n"))
