"""Everything Maya cannot honour is a 400 naming the exact parameter, before the engine is touched."""

from __future__ import annotations

import openai
import pytest

from tests.scripted import RecordingScriptedEngine
from tests.server import RunningServer, scripted_config

from tests.responses.api.sse import post_error

USER = {"role": "user", "content": "hi"}
STRICT_NO_ADDITIONAL = {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}

# id → (request fields, expected param, a fragment of the message, expected code)
CASES = {
    "unknown field": ({"frobnicate": 1}, "frobnicate", "frobnicate", None),
    "hosted tool": ({"tools": [{"type": "web_search"}]}, "tools[0].type", "web_search", None),
    "input_file part": (
        {"input": [USER, USER, {"role": "user", "content": [{"type": "input_file", "file_id": "file_1"}]}]},
        "input[2].content[0].type", "input_file", None,
    ),
    "item_reference": ({"input": [USER, {"type": "item_reference", "id": "msg_1"}]}, "input[1].type", "reference", None),
    "encrypted reasoning": (
        {"input": [{"type": "reasoning", "summary": [], "encrypted_content": "gAAAA"}, USER]},
        "input[0].encrypted_content", "decrypt", None,
    ),
    "reasoning.summary": ({"reasoning": {"effort": "low", "summary": "auto"}}, "reasoning.summary", "summar", None),
    "truncation auto": ({"truncation": "auto"}, "truncation", "auto", None),
    "service_tier flex": ({"service_tier": "flex"}, "service_tier", "flex", None),
    "service_tier priority": ({"service_tier": "priority"}, "service_tier", "priority", None),
    "conversation": ({"conversation": "conv_123"}, "conversation", "Conversations", None),
    "metadata with 17 pairs": ({"metadata": {f"k{i}": "v" for i in range(17)}}, "metadata", "16", None),
    "metadata value not a string": ({"metadata": {"k": 1}}, "metadata.k", "string", None),
    "metadata value of 513 chars": ({"metadata": {"k": "v" * 513}}, "metadata.k", "512", None),
    "prompt_cache_key of 257 chars": ({"prompt_cache_key": "k" * 257}, "prompt_cache_key", "256", None),
    "function_call call_id of 65 chars": (
        {"input": [{"type": "function_call", "call_id": "c" * 65, "name": "f", "arguments": "{}"}]},
        "input[0].call_id", "64", None,
    ),
    "function_call_output call_id of 65 chars": (
        {"input": [{"type": "function_call_output", "call_id": "c" * 65, "output": "ok"}]},
        "input[0].call_id", "64", None,
    ),
    "include another value": ({"include": ["message.output_text.logprobs"]}, "include[0]", "logprobs", None),
    "background without store": ({"background": True}, "background", "store", None),
    "max_output_tokens under 16": ({"max_output_tokens": 15}, "max_output_tokens", "16", None),
    "schema with a pattern": (
        {"text": {"format": {"type": "json_schema", "name": "x", "schema": {
            "type": "object", "properties": {"code": {"type": "string", "pattern": "^[a-z]+$"}}}}}},
        "text.format.schema.properties.code.pattern", "pattern", None,
    ),
    "strict schema without additionalProperties false": (
        {"text": {"format": {"type": "json_schema", "name": "x", "strict": True, "schema": STRICT_NO_ADDITIONAL}}},
        "text.format.schema.additionalProperties", "additionalProperties", None,
    ),
    "strict tool without additionalProperties false": (
        {"tools": [{"type": "function", "name": "f", "strict": True, "parameters": STRICT_NO_ADDITIONAL}]},
        "tools[0].parameters.additionalProperties", "additionalProperties", None,
    ),
    "image detail high": (
        {"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "https://x.test/a.png",
                                                 "detail": "high"}]}]},
        "input[0].content[0].detail", "auto", None,
    ),
    "tool_choice naming an undeclared function": (
        {"tools": [{"type": "function", "name": "f"}], "tool_choice": {"type": "function", "name": "g"}},
        "tool_choice.name", "g", None,
    ),
    "background with store false": ({"background": True, "store": False}, "background", "store", None),
    "missing input": ({"input": None}, "input", "input", None),
}


def body_of(fields: dict) -> dict:
    body = {"model": "m", "input": "hi", **fields}
    return {k: v for k, v in body.items() if v is not None}


@pytest.fixture(scope="module")
def server():
    """One server for the whole table: its engine's call count must stay 0 throughout."""
    running = RunningServer(scripted_config(), RecordingScriptedEngine(["should never be generated"]))
    yield running
    running.stop()


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
@pytest.mark.parametrize("case", list(CASES))
def test_refused_before_generation(server, case, stream):
    fields, param, fragment, code = CASES[case]
    with server.http() as http:
        error = post_error(http, {**body_of(fields), "stream": stream})  # JSON error even when streaming
    assert error["param"] == param
    assert fragment in error["message"]
    assert error["code"] == code
    assert server.engine.calls == 0


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
def test_context_overflow(start_server, stream):
    server = start_server(["never"], ctx=64)
    with server.http() as http:
        too_long = post_error(http, {"model": "m", "input": "word " * 80, "stream": stream})
        with_room = post_error(http, {"model": "m", "input": "hi", "max_output_tokens": 60, "stream": stream})
    for error in (too_long, with_room):
        assert error["param"] == "input"
        assert error["code"] == "context_length_exceeded"
        assert "64 tokens" in error["message"]
    assert server.engine.calls == 0


def test_the_sdk_raises_bad_request_with_the_param(start_server):
    server = start_server(["never"])
    client = server.client()
    with pytest.raises(openai.BadRequestError) as caught:
        client.responses.create(model="m", input="hi", tools=[{"type": "web_search"}])
    assert caught.value.status_code == 400
    assert caught.value.param == "tools[0].type"
    assert caught.value.type == "invalid_request_error"
    with pytest.raises(openai.BadRequestError) as caught:
        client.responses.create(model="m", input="hi", service_tier="priority", stream=True)
    assert caught.value.param == "service_tier"
    assert server.engine.calls == 0
