"""Validate-before-publish: JSON formats and strict tools publish only a fully valid result.

Invalid output fails the response with the consumed usage and without a single content
or argument delta; valid output arrives after the whole generation, in one burst.
"""

from __future__ import annotations

import json

import jsonschema
import pydantic
import pytest

from tests.chat.test_families_through_chat import chatml_call, glm_call
from tests.gated_engine import GatedEngine, serving

from tests.responses.api.shapes import CALL, FAILED, MESSAGE, OPENING
from tests.responses.api.sse import post_json, read_stream
from tests.responses.api.test_text_and_reasoning import tokens

ASK = "Count the apples."
SCHEMA = {
    "type": "object",
    "properties": {"fruit": {"type": "string"}, "count": {"type": "integer"}},
    "required": ["fruit", "count"],
    "additionalProperties": False,
}
JSON_SCHEMA = {"format": {"type": "json_schema", "name": "count", "strict": True, "schema": SCHEMA}}
JSON_OBJECT = {"format": {"type": "json_object"}}
VALID = '{"fruit": "apple", "count": 3}'
FAILED_STREAM = OPENING + FAILED
STRICT_TOOL = {"type": "function", "name": "record", "strict": True, "parameters": SCHEMA}
LOOSE_TOOL = {"type": "function", "name": "record", "parameters": SCHEMA}


def assert_failed_without_content(stream, server, script: str, *fragments: str) -> None:
    assert stream.shape() == FAILED_STREAM
    error = stream.of("error")[0]
    assert error.code == "invalid_structured_output"
    for fragment in fragments:
        assert fragment in error.message
    final = stream.final
    assert final.status == "failed" and final.output == []
    assert final.usage.output_tokens == len(tokens(server, script))  # consumed usage is still reported


def test_valid_json_schema_output_is_published_after_validation(start_server):
    server = start_server([VALID])
    with server.http() as http:
        stream = read_stream(http, {"model": "m", "input": ASK, "text": JSON_SCHEMA})
    assert stream.shape() == OPENING + MESSAGE + ["response.completed"]
    value = json.loads(stream.final.output_text)
    jsonschema.validate(value, SCHEMA)
    assert value == {"fruit": "apple", "count": 3}
    assert stream.final.text.format.type == "json_schema" and stream.final.text.format.name == "count"
    prompt = server.engine.last_prompt_text
    assert "JSON" in prompt and '"additionalProperties":false' in prompt  # the schema is in the instructions


def test_valid_output_arrives_in_one_burst_after_the_whole_generation():
    """Proven by order on the server, not by timing: the engine logs each token and the server each body
    it sends, on one event loop that pulls one token at a time, so a delta published before validation
    would be sent between two tokens."""
    script = '{"fruit": "apple", "count": 3, ' + ", ".join(f'"k{i}": {i}' for i in range(8)) + "}"
    schema = {"type": "object", "required": ["fruit", "count"]}
    engine = GatedEngine([script])
    text = {"format": {"type": "json_schema", "name": "count", "schema": schema}}
    with serving(engine) as server, server.http() as http:
        stream = read_stream(http, {"model": "m", "input": ASK, "text": text})
        generated = len(tokens(server, script))
    assert stream.shape() == OPENING + MESSAGE + ["response.completed"]
    assert len(stream.of("response.output_text.delta")) == generated
    log = engine.log
    last_token = max(i for i, (kind, _) in enumerate(log) if kind == "token")
    assert log[last_token] == ("token", generated)
    sent = [(i, body) for i, (kind, body) in enumerate(log) if kind == "sent"]
    opening = [i for i, body in sent if b"response.in_progress" in body]
    with_deltas = [i for i, body in sent if b"response.output_text.delta" in body]
    assert opening[0] < log.index(("token", 1)), "the opening is not held"
    assert with_deltas[0] > last_token, "no delta is sent before the engine's last token"
    assert with_deltas == list(range(with_deltas[0], with_deltas[0] + generated)), "the deltas go out back to back"


def test_an_engine_failure_in_structured_output_publishes_no_content(start_server):
    server = start_server([{"text": VALID, "fail_after": 3}])
    assert len(tokens(server, VALID)) > 3
    with server.http() as http:
        stream = read_stream(http, {"model": "m", "input": ASK, "text": JSON_SCHEMA})
    assert stream.shape() == FAILED_STREAM  # the three generated tokens were held, never published
    assert stream.of("error")[0].code == "engine_error"
    assert stream.final.usage.output_tokens == 3


@pytest.mark.parametrize(
    ("script", "fragment"),
    [
        ('{"fruit": "apple", "count": 3', "not valid JSON"),
        ('{"fruit": "apple", "count": "three"}', "does not match the schema"),
        ('{"fruit": "apple"}', "does not match the schema"),
        ('Sure! {"fruit": "apple", "count": 3}', "not valid JSON"),
    ],
    ids=["unterminated", "wrong type", "missing property", "prose around it"],
)
def test_invalid_json_schema_output_fails_without_deltas(start_server, script, fragment):
    server = start_server([script])
    with server.http() as http:
        stream = read_stream(http, {"model": "m", "input": ASK, "text": JSON_SCHEMA})
    assert_failed_without_content(stream, server, script, fragment)


def test_invalid_json_schema_output_non_streaming(start_server):
    script = '{"fruit": "apple", "count": "three"}'
    server = start_server([script])
    with server.http() as http:
        response, _ = post_json(http, {"model": "m", "input": ASK, "text": JSON_SCHEMA})
    assert response.status == "failed" and response.output == []
    assert "does not match the schema" in response.error.message
    assert response.usage.output_tokens == len(tokens(server, script))


def test_output_limit_in_structured_output_is_incomplete_without_content(start_server):
    script = '{"fruit": "apple", "count": 3, ' + ", ".join(f'"k{i}": {i}' for i in range(20)) + "}"
    server = start_server([script])
    text = {"format": {"type": "json_schema", "name": "count", "schema": {"type": "object"}}}
    with server.http() as http:
        stream = read_stream(http, {"model": "m", "input": ASK, "text": text, "max_output_tokens": 16})
    assert stream.shape() == OPENING + ["response.incomplete"]
    final = stream.final
    assert final.incomplete_details.reason == "max_output_tokens"
    assert final.output == [] and final.usage.output_tokens == 16


def test_reasoning_is_held_with_the_answer_and_not_validated(start_server):
    script = "Three apples.</think>" + VALID
    server = start_server([script], family="glm")
    with server.http() as http:
        stream = read_stream(http, {"model": "m", "input": ASK, "text": JSON_SCHEMA})
    assert [item.type for item in stream.final.output] == ["reasoning", "message"]
    assert stream.final.output[0].content[0].text == "Three apples."
    assert json.loads(stream.final.output_text) == {"fruit": "apple", "count": 3}


def test_json_object_valid(start_server):
    server = start_server(['{"anything": [1, 2]}'])
    with server.http() as http:
        stream = read_stream(http, {"model": "m", "input": ASK, "text": JSON_OBJECT})
    assert stream.shape() == OPENING + MESSAGE + ["response.completed"]
    assert json.loads(stream.final.output_text) == {"anything": [1, 2]}
    assert "JSON object" in server.engine.last_prompt_text


@pytest.mark.parametrize("script", ["[1, 2]", "not json at all"], ids=["array", "prose"])
def test_json_object_invalid(start_server, script):
    server = start_server([script])
    with server.http() as http:
        stream = read_stream(http, {"model": "m", "input": ASK, "text": JSON_OBJECT})
    assert_failed_without_content(stream, server, script)


# -- strict tools -----------------------------------------------------------------------



def test_strict_tool_with_valid_arguments(start_server):
    script = chatml_call("record", fruit="apple", count=3)
    server = start_server([script])
    with server.http() as http:
        stream = read_stream(http, {"model": "m", "input": ASK, "tools": [STRICT_TOOL]})
    assert stream.shape() == OPENING + CALL + ["response.completed"]
    [call] = stream.final.output
    assert call.name == "record" and json.loads(call.arguments) == {"fruit": "apple", "count": 3}
    assert stream.final.tools[0].strict is True


@pytest.mark.parametrize(
    "script",
    [chatml_call("record", fruit="apple", count="three"), chatml_call("record", fruit="apple")],
    ids=["wrong type", "missing property"],
)
def test_strict_tool_with_invalid_arguments_fails_without_argument_events(start_server, script):
    server = start_server([script])
    with server.http() as http:
        stream = read_stream(http, {"model": "m", "input": ASK, "tools": [STRICT_TOOL]})
    assert_failed_without_content(stream, server, script, "'record'")


def test_strict_tool_validation_in_glm_syntax(start_server):
    script = "Record it.</think>" + glm_call("record", fruit="apple", count="many")
    server = start_server([script], family="glm")
    with server.http() as http:
        stream = read_stream(http, {"model": "m", "input": ASK, "tools": [STRICT_TOOL]})
    assert stream.shape() == FAILED_STREAM
    assert stream.of("response.function_call_arguments.delta") == []


def test_non_strict_tool_arguments_are_published_as_generated(start_server):
    script = chatml_call("record", fruit="apple", count="three")
    server = start_server([script])
    with server.http() as http:
        stream = read_stream(http, {"model": "m", "input": ASK, "tools": [LOOSE_TOOL]})
    assert stream.shape() == OPENING + CALL + ["response.completed"]
    assert json.loads(stream.final.output[0].arguments) == {"fruit": "apple", "count": "three"}


# -- the SDK's parse helper ----------------------------------------------------------------


class FruitCount(pydantic.BaseModel):
    fruit: str
    count: int


def test_sdk_parse_with_a_pydantic_model(start_server):
    server = start_server([VALID])
    parsed = server.client().responses.parse(model="m", input=ASK, text_format=FruitCount)
    assert parsed.status == "completed"
    assert parsed.output_parsed == FruitCount(fruit="apple", count=3)
    assert parsed.text.format.type == "json_schema" and parsed.text.format.strict is True
    assert "FruitCount" in server.engine.last_prompt_text


def test_sdk_parse_of_a_violating_output_is_a_failed_response(start_server):
    server = start_server(['{"fruit": "apple", "count": "three"}'])
    parsed = server.client().responses.parse(model="m", input=ASK, text_format=FruitCount)
    assert parsed.status == "failed" and parsed.output == []
