"""Validate-before-publish: parsing, instance limits, schema validation and its time budget."""

from __future__ import annotations

import subprocess
import sys

import pytest

from maya_server.structured.formats import JsonObjectFormat, JsonSchemaFormat, TextFormat, output_schema
from maya_server.structured.validator import (
    MAX_INSTANCE_DEPTH, MAX_INSTANCE_NODES, MAX_OUTPUT_BYTES, StructuredValidator,
)
from maya_server.families.history import output_instructions


def json_instructions(fmt) -> str:
    """Maya's words for a format (GLM, ChatML): the format as the conversation carries it, worded by the family."""
    return output_instructions(output_schema(fmt))


COUNT_SCHEMA = {
    "type": "object",
    "properties": {"count": {"type": "integer", "minimum": 0}, "label": {"type": ["string", "null"]}},
    "required": ["count", "label"],
    "additionalProperties": False,
}


def schema_format(schema=COUNT_SCHEMA) -> JsonSchemaFormat:
    return JsonSchemaFormat.model_validate({"type": "json_schema", "name": "count", "schema": schema, "strict": True})


class SteppingClock:
    """A fake clock that advances `step` seconds every time it is read."""

    def __init__(self, step: float) -> None:
        self.now = 0.0
        self.step = step
        self.reads = 0

    def __call__(self) -> float:
        self.reads += 1
        self.now += self.step
        return self.now


def test_valid_output():
    result = StructuredValidator(COUNT_SCHEMA).validate('{"count": 3, "label": null}')
    assert result.ok and result.value == {"count": 3, "label": None} and result.reason is None


def test_bytes_input():
    assert StructuredValidator(COUNT_SCHEMA).validate(b'{"count": 3, "label": "x"}').ok


@pytest.mark.parametrize("text", ['{"count": 3', "Sure! {\"count\": 3}", '```json\n{"count": 1}\n```', "", "NaN"])
def test_invalid_json(text):
    result = StructuredValidator(COUNT_SCHEMA).validate(text)
    assert not result.ok and "not valid JSON" in result.reason


@pytest.mark.parametrize("text, kind", [("[1]", "an array"), ('"x"', "a string"), ("3", "a number"),
                                        ("null", "null"), ("true", "a boolean")])
def test_the_output_must_be_an_object(text, kind):
    result = StructuredValidator(None).validate(text)
    assert not result.ok and result.reason == f"the output must be a JSON object, not {kind}"


@pytest.mark.parametrize("text, where", [
    ('{"count": "3", "label": null}', "$.count"),
    ('{"count": -1, "label": null}', "$.count"),
    ('{"count": 1}', "$"),
    ('{"count": 1, "label": null, "extra": 1}', "$"),
    ('{"count": 1.5, "label": null}', "$.count"),
])
def test_schema_violations(text, where):
    result = StructuredValidator(COUNT_SCHEMA).validate(text)
    assert not result.ok and f"does not match the schema at '{where}'" in result.reason


def test_json_object_accepts_any_object():
    validator = StructuredValidator.for_format(JsonObjectFormat(type="json_object"))
    assert validator.validate('{"anything": [1, {"x": null}]}').ok


def test_formats_pick_their_validator():
    assert StructuredValidator.for_format(TextFormat()) is None
    assert StructuredValidator.for_format(schema_format()).validate('{"count": 0, "label": "z"}').ok
    assert not StructuredValidator.for_format(schema_format()).validate('{"count": 0}').ok


def test_output_over_the_buffer_fails():
    padding = "x" * (MAX_OUTPUT_BYTES - 20)
    assert StructuredValidator(None).validate('{"p": "%s"}' % padding).ok
    result = StructuredValidator(None).validate('{"p": "%s"}' % ("x" * MAX_OUTPUT_BYTES))
    assert not result.ok and "structured-output buffer" in result.reason


def test_the_buffer_counts_utf8_bytes():
    text = '{"p": "%s"}' % ("é" * 60)
    assert StructuredValidator(None, max_bytes=100).validate(text[:40] + '"}').ok
    result = StructuredValidator(None, max_bytes=100).validate(text)
    assert not result.ok and "100-byte" in result.reason


def test_too_many_nodes():
    within = '{"a": [%s]}' % ",".join(["0"] * (MAX_INSTANCE_NODES - 2))
    assert StructuredValidator(None).validate(within).ok
    over = '{"a": [%s]}' % ",".join(["0"] * (MAX_INSTANCE_NODES - 1))
    result = StructuredValidator(None).validate(over)
    assert not result.ok and f"more than {MAX_INSTANCE_NODES} JSON values" in result.reason


def nested_text(levels: int) -> str:
    """A JSON object with `levels` container levels, the root object being level 1."""
    return '{"a": ' * levels + "1" + "}" * levels


def test_too_deep():
    assert StructuredValidator(None).validate(nested_text(MAX_INSTANCE_DEPTH)).ok
    result = StructuredValidator(None).validate(nested_text(MAX_INSTANCE_DEPTH + 1))
    assert not result.ok and f"nested more than {MAX_INSTANCE_DEPTH} levels" in result.reason


def test_deeper_than_the_parser_allows_reads_as_too_deep():
    result = StructuredValidator(None).validate("[" * 5000 + "]" * 5000)
    assert not result.ok and "nested more than" in result.reason


def test_time_budget_exceeded_during_schema_traversal():
    clock = SteppingClock(step=0.01)
    items = {"type": "object", "properties": {"v": {"type": "integer"}}, "required": ["v"]}
    schema = {"type": "object", "properties": {"rows": {"type": "array", "items": items}}}
    text = '{"rows": [%s]}' % ",".join('{"v": 1}' for _ in range(500))
    result = StructuredValidator(schema, clock=clock).validate(text)
    assert not result.ok and "exceeded its 1-second budget" in result.reason
    assert clock.now < 1.1, "the budget is checked as the traversal goes, not after it"


def test_time_budget_is_fresh_for_each_validation():
    clock = SteppingClock(step=0.001)
    validator = StructuredValidator(COUNT_SCHEMA, clock=clock)
    for _ in range(5):
        assert validator.validate('{"count": 1, "label": "x"}').ok


def test_reasons_are_bounded():
    schema = {"type": "object", "properties": {"s": {"type": "integer"}}}
    result = StructuredValidator(schema).validate('{"s": "%s"}' % ("x" * 10_000))
    assert not result.ok and len(result.reason) <= 300


def test_json_instructions():
    assert json_instructions(TextFormat()) == ""
    assert "JSON object" in json_instructions(JsonObjectFormat(type="json_object"))
    described = JsonSchemaFormat.model_validate(
        {"type": "json_schema", "name": "count", "schema": COUNT_SCHEMA, "description": "How many."}
    )
    text = json_instructions(described)
    assert "Schema name: count" in text and "Description: How many." in text
    assert '"required":["count","label"]' in text


def test_plain_text_never_imports_jsonschema():
    script = (
        "import sys\n"
        "from maya_server.responses.request.request import parse_responses_request\n"
        "from maya_server.responses.conversion.convert import to_conversation\n"
        "from maya_server.structured.validator import StructuredValidator\n"
        "request = parse_responses_request({'input': 'hi', 'text': {'format': {'type': 'json_object'}}})\n"
        "to_conversation(request)\n"
        "StructuredValidator.for_format(request.output_format).validate('{}')\n"
        "assert not [m for m in sys.modules if m.startswith('jsonschema')], 'jsonschema was imported'\n"
    )
    subprocess.run([sys.executable, "-c", script], check=True)
