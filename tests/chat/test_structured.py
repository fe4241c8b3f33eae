"""Chat Completions structured output: `response_format` and `strict` tools, validated before publishing.

The same schema subset, limits and gate as Responses' `text.format`: a valid result arrives
whole after the generation, an invalid one fails without a single content or argument
delta, and an unsupported schema is a 400 naming the keyword before the engine is asked.
"""

from __future__ import annotations

import json

import httpx
import openai
import pydantic
import pytest

from tests.chat.test_families_through_chat import glm_call

ASK = [{"role": "user", "content": "Count the apples."}]
SCHEMA = {
    "type": "object",
    "properties": {"fruit": {"type": "string"}, "count": {"type": "integer"}},
    "required": ["fruit", "count"],
    "additionalProperties": False,
}
JSON_SCHEMA = {"type": "json_schema", "json_schema": {"name": "count", "strict": True, "schema": SCHEMA}}
VALID = '{"fruit": "apple", "count": 3}'
STRICT_TOOL = {"type": "function", "function": {"name": "record", "strict": True, "parameters": SCHEMA}}


class Count(pydantic.BaseModel):
    fruit: str
    count: int


@pytest.mark.parametrize("fmt", [{"type": "text"}, {"type": "json_object"}, JSON_SCHEMA])
def test_each_format_is_accepted(start_server, fmt):
    server = start_server([VALID])
    completion = server.client().chat.completions.create(model="m", messages=ASK, response_format=fmt)
    assert completion.choices[0].message.content == VALID
    prompt = server.engine.last_prompt_text
    assert ("JSON" in prompt) == (fmt["type"] != "text")
    if fmt is JSON_SCHEMA:
        assert '"count"' in prompt and "Schema name: count" in prompt


def test_sdk_parse_with_a_pydantic_model(start_server):
    server = start_server([VALID])
    parsed = server.client().chat.completions.parse(model="m", messages=ASK, response_format=Count)
    assert parsed.choices[0].message.parsed == Count(fruit="apple", count=3)


def test_output_cut_by_the_limit_is_a_200_length_with_no_content_which_parse_raises(start_server):
    """What came back "200 with empty content" under a schema: the output limit reached while the answer was held.
    The cut JSON is never published (as Responses' `incomplete`); `finish_reason` says why, and the SDK's `parse`
    raises `LengthFinishReasonError` rather than hand back an empty object."""
    server = start_server([VALID])
    client = server.client()
    completion = client.chat.completions.create(model="m", messages=ASK, response_format=JSON_SCHEMA, max_tokens=3)
    choice = completion.choices[0]
    assert choice.finish_reason == "length" and not choice.message.content
    assert completion.usage.completion_tokens == 3
    with pytest.raises(openai.LengthFinishReasonError):
        client.chat.completions.parse(model="m", messages=ASK, response_format=Count, max_tokens=3)


@pytest.mark.parametrize("output", ['{"fruit": "apple", "count": "three"}', "Sure! " + VALID, '{"fruit": "apple"'])
def test_invalid_output_fails_without_content(start_server, output):
    server = start_server([output])
    client = server.client()
    with pytest.raises(openai.InternalServerError) as caught:
        client.chat.completions.create(model="m", messages=ASK, response_format=JSON_SCHEMA)
    assert caught.value.body["code"] == "invalid_structured_output"
    with server.http() as http, http.stream("POST", "/v1/chat/completions",
                                            json={"messages": ASK, "response_format": JSON_SCHEMA, "stream": True}) as answer:
        frames = [json.loads(line[6:]) for line in answer.iter_lines() if line.startswith("data: ")]
    contents = [f["choices"][0]["delta"].get("content") for f in frames if f.get("choices")]
    assert contents == [""]  # the opening chunk only: nothing generated was published
    assert frames[-1]["error"]["code"] == "invalid_structured_output"


def test_valid_streamed_output_arrives_whole(start_server):
    server = start_server([VALID])
    chunks = list(server.client().chat.completions.create(model="m", messages=ASK, response_format=JSON_SCHEMA, stream=True))
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == VALID
    assert chunks[-1].choices[0].finish_reason == "stop"


@pytest.mark.parametrize("fmt, param", [
    ({"type": "json_schema", "json_schema": {"name": "n", "schema": {**SCHEMA, "properties": {"fruit": {"type": "string", "pattern": "a+"}}}}},
     "response_format.json_schema.schema.properties.fruit.pattern"),
    ({"type": "json_schema", "json_schema": {"name": "n", "strict": True, "schema": {"type": "object", "properties": {"a": {"type": "string"}}}}},
     "response_format.json_schema.schema"),
    ({"type": "json_schema", "json_schema": {"schema": SCHEMA}}, "response_format.json_schema.name"),
    ({"type": "json_schema"}, "response_format.json_schema"),
    ({"type": "json_schema", "json_schema": {"name": "n", "schema": SCHEMA, "extra": 1}}, "response_format.json_schema.extra"),
    ({"type": "grammar"}, "response_format.type"),
    ({}, "response_format.type"),
    ("json", "response_format"),
])
def test_unsupported_formats_are_400s_naming_the_field(start_server, fmt, param):
    server = start_server([VALID])
    with server.http() as http:
        answer = http.post("/v1/chat/completions", json={"messages": ASK, "response_format": fmt})
    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert error["type"] == "invalid_request_error"
    assert error["param"] is not None and error["param"].startswith(param), error
    assert server.engine.calls == 0


def test_strict_tool_with_valid_arguments_is_published(start_server):
    server = start_server(["</think>" + glm_call("record", fruit="apple", count=3)], family="glm")
    completion = server.client().chat.completions.create(model="m", messages=ASK, tools=[STRICT_TOOL])
    call = completion.choices[0].message.tool_calls[0]
    assert (call.function.name, json.loads(call.function.arguments)) == ("record", {"fruit": "apple", "count": 3})


def test_strict_tool_with_invalid_arguments_fails_without_argument_chunks(start_server):
    server = start_server(["</think>" + glm_call("record", fruit="apple")], family="glm")
    with server.http() as http, http.stream("POST", "/v1/chat/completions",
                                            json={"messages": ASK, "tools": [STRICT_TOOL], "stream": True}) as answer:
        frames = [json.loads(line[6:]) for line in answer.iter_lines() if line.startswith("data: ")]
    assert not any(f["choices"][0]["delta"].get("tool_calls") for f in frames if f.get("choices"))
    assert frames[-1]["error"]["code"] == "invalid_structured_output"
    loose = {"type": "function", "function": {"name": "record", "parameters": SCHEMA}}
    server.engine.set_script(["</think>" + glm_call("record", fruit="apple")])
    completion = server.client().chat.completions.create(model="m", messages=ASK, tools=[loose])
    assert completion.choices[0].message.tool_calls[0].function.name == "record"  # not strict: as generated


def test_strict_tool_with_an_unsupported_schema_is_a_400(start_server):
    server = start_server(["x"])
    tool = {"type": "function", "function": {"name": "f", "strict": True,
                                             "parameters": {"type": "object", "properties": {"a": {"$ref": "#/x"}}}}}
    with server.http() as http:
        answer = http.post("/v1/chat/completions", json={"messages": ASK, "tools": [tool]})
    assert answer.status_code == 400
    assert answer.json()["error"]["param"].startswith("tools[0].function.parameters")
    assert server.engine.calls == 0
