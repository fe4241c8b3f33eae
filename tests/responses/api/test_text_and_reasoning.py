"""Text and reasoning through POST /v1/responses, JSON and SSE, driven with the SDK and read raw.

Every stream read with `read_stream` has each event validated by the SDK's types and its
sequence numbers, item ids, output indexes and joined deltas checked (see sse.py); these
tests add the exact event sequence, the content, and usage against the scripted engine.
"""

from __future__ import annotations

import pytest

from tests.responses.api.shapes import MESSAGE, OPENING, REASONING
from tests.responses.api.sse import post_json, read_stream

ASK = "What is the weather?"
TEXT = "Hello there friend."
TEXT_STREAM = OPENING + MESSAGE + ["response.completed"]
REASONING_THEN_TEXT = OPENING + REASONING + MESSAGE + ["response.completed"]
# family → the model's raw output: reasoning "The user wants weather.", answer "It is sunny."
# (GLM and DeepSeek-V4 prompts end inside the reasoning, so their output starts there.)
REASONING_SCRIPTS = {
    "glm": "The user wants weather.</think>It is sunny.",
    "deepseek-v4": "The user wants weather.</think>It is sunny.",
    "chatml": "<think>The user wants weather.</think>It is sunny.",
}
FAMILIES = sorted(REASONING_SCRIPTS)


def tokens(server, text: str) -> list[str]:
    """How the scripted engine splits `text` into generated tokens."""
    tokenizer = server.engine.tokenizer
    return [tokenizer.decode([i]) for i in tokenizer.encode(text, special=True)]


def assert_usage(server, usage, *, output: str, reasoning: str = "", cached: int = 0) -> None:
    """Usage equals the scripted engine's own counts for the prompt it saw and the text it generated."""
    assert usage.input_tokens == len(server.engine.prompts[-1])
    assert usage.input_tokens_details.cached_tokens == cached
    assert usage.output_tokens == len(tokens(server, output))
    assert usage.output_tokens_details.reasoning_tokens == len(tokens(server, reasoning))
    assert usage.total_tokens == usage.input_tokens + usage.output_tokens


# -- text only ------------------------------------------------------------------------


def test_text_non_streaming_with_the_sdk(start_server):
    server = start_server([TEXT])
    response = server.client().responses.create(model="m", input=ASK, store=False)
    assert response.object == "response" and response.id.startswith("resp_")
    assert response.status == "completed"
    assert response.output_text == TEXT
    [message] = response.output
    assert message.type == "message" and message.role == "assistant" and message.status == "completed"
    assert [(part.type, part.text) for part in message.content] == [("output_text", TEXT)]
    assert_usage(server, response.usage, output=TEXT)
    assert server.engine.calls == 1


def test_text_non_streaming_validates_against_the_sdk_types(start_server):
    server = start_server([TEXT])
    with server.http() as http:
        response, raw = post_json(http, {"model": "m", "input": ASK})
    assert response.output_text == TEXT
    assert raw["object"] == "response" and raw["status"] == "completed"
    assert raw["model"] == "scripted"
    assert raw["store"] is False  # not stored by default
    assert_usage(server, response.usage, output=TEXT)


def test_text_stream_event_sequence(start_server):
    server = start_server([TEXT])
    with server.http() as http:
        stream = read_stream(http, {"model": "m", "input": ASK})
    assert stream.shape() == TEXT_STREAM
    assert [e.delta for e in stream.of("response.output_text.delta")] == tokens(server, TEXT)
    assert stream.of("response.output_text.done")[0].text == TEXT
    assert stream.final.output_text == TEXT
    assert_usage(server, stream.final.usage, output=TEXT)


def test_text_with_the_sdk_stream_helper(start_server):
    server = start_server([TEXT])
    client = server.client()
    with client.responses.stream(model="m", input=ASK) as stream:
        events = list(stream)
        final = stream.get_final_response()
    assert [e.type for e in events][:2] == ["response.created", "response.in_progress"]
    assert events[-1].type == "response.completed"
    assert [e.sequence_number for e in events] == list(range(len(events)))
    assert "".join(e.delta for e in events if e.type == "response.output_text.delta") == TEXT
    assert final.output_text == TEXT and final.status == "completed"
    assert_usage(server, final.usage, output=TEXT)


def test_text_with_create_stream_true(start_server):
    server = start_server([TEXT])
    events = list(server.client().responses.create(model="m", input=ASK, stream=True))
    assert [e.sequence_number for e in events] == list(range(len(events)))
    assert "".join(e.delta for e in events if e.type == "response.output_text.delta") == TEXT
    assert events[-1].type == "response.completed"
    assert events[-1].response.output_text == TEXT


def test_cached_tokens_count_the_prefix_the_engine_reused(start_server):
    server = start_server([TEXT])
    client = server.client()
    first = client.responses.create(model="m", input=ASK)
    second = client.responses.create(model="m", input=ASK)
    assert first.usage.input_tokens_details.cached_tokens == 0
    # the scripted engine reports the common prefix with its previous prompt, less the last token
    assert second.usage.input_tokens_details.cached_tokens == second.usage.input_tokens - 1
    assert_usage(server, second.usage, output=TEXT, cached=second.usage.input_tokens - 1)


# -- reasoning ------------------------------------------------------------------------


@pytest.mark.parametrize("family", FAMILIES)
def test_reasoning_and_text_non_streaming(start_server, family):
    server = start_server([REASONING_SCRIPTS[family]], family=family)
    with server.http() as http:
        response, _ = post_json(http, {"model": "m", "input": ASK})
    reasoning, message = response.output
    assert reasoning.type == "reasoning" and reasoning.status == "completed"
    assert reasoning.summary == []
    assert [(c.type, c.text) for c in reasoning.content] == [("reasoning_text", "The user wants weather.")]
    assert message.type == "message" and message.content[0].text == "It is sunny."
    assert response.output_text == "It is sunny."
    assert_usage(server, response.usage, output=REASONING_SCRIPTS[family], reasoning="The user wants weather.")


@pytest.mark.parametrize("family", FAMILIES)
def test_reasoning_and_text_stream(start_server, family):
    server = start_server([REASONING_SCRIPTS[family]], family=family)
    with server.http() as http:
        stream = read_stream(http, {"model": "m", "input": ASK})
    assert stream.shape() == REASONING_THEN_TEXT
    assert stream.of("response.reasoning_text.done")[0].text == "The user wants weather."
    assert stream.of("response.output_text.done")[0].text == "It is sunny."
    reasoning_item, message_item = (e.item for e in stream.of("response.output_item.added"))
    assert (reasoning_item.type, message_item.type) == ("reasoning", "message")
    assert {e.output_index for e in stream.of("response.reasoning_text.delta")} == {0}
    assert {e.output_index for e in stream.of("response.output_text.delta")} == {1}
    assert_usage(server, stream.final.usage, output=REASONING_SCRIPTS[family], reasoning="The user wants weather.")


def test_reasoning_with_the_sdk_stream_helper(start_server):
    server = start_server([REASONING_SCRIPTS["glm"]], family="glm")
    with server.client().responses.stream(model="m", input=ASK) as stream:
        events = list(stream)
        final = stream.get_final_response()
    reasoning = "".join(e.delta for e in events if e.type == "response.reasoning_text.delta")
    assert reasoning == "The user wants weather."
    assert final.output[0].content[0].text == reasoning
    assert final.output_text == "It is sunny."


# -- the output limit and engine failures ----------------------------------------------

LONG = " ".join(f"word{i}" for i in range(40))


def test_output_limit_in_text_is_incomplete_stream(start_server):
    server = start_server([LONG])
    with server.http() as http:
        stream = read_stream(http, {"model": "m", "input": ASK, "max_output_tokens": 16})
    assert stream.shape() == TEXT_STREAM[:-1] + ["response.incomplete"]
    final = stream.final
    assert final.status == "incomplete"
    assert final.incomplete_details.reason == "max_output_tokens"
    assert final.max_output_tokens == 16
    [message] = final.output
    assert message.status == "incomplete"
    assert message.content[0].text == "".join(tokens(server, LONG)[:16])
    assert final.usage.output_tokens == 16
    assert server.engine.params[-1].max_tokens == 16


def test_output_limit_in_text_is_incomplete_non_streaming(start_server):
    server = start_server([LONG])
    response = server.client().responses.create(model="m", input=ASK, max_output_tokens=16)
    assert response.status == "incomplete"
    assert response.incomplete_details.reason == "max_output_tokens"
    assert response.output[0].status == "incomplete"
    assert response.output_text == "".join(tokens(server, LONG)[:16])
    assert response.usage.output_tokens == 16


def test_engine_failure_mid_stream_sends_error_then_failed(start_server):
    server = start_server([{"text": "one two three four five six", "fail_after": 3}])
    with server.http() as http:
        stream = read_stream(http, {"model": "m", "input": ASK})
    assert stream.shape() == TEXT_STREAM[:-1] + ["error", "response.failed"]
    error = stream.of("error")[0]
    assert error.code == "engine_error" and error.message
    final = stream.final
    assert final.status == "failed" and final.error.message == error.message
    assert final.output[0].status == "incomplete"
    assert final.output[0].content[0].text == "one two three"
    assert final.usage.output_tokens == 3
    assert_usage(server, final.usage, output="one two three")


def test_engine_failure_before_any_token(start_server):
    server = start_server([{"text": "never", "fail_after": 0}])
    with server.http() as http:
        stream = read_stream(http, {"model": "m", "input": ASK})
    assert stream.shape() == ["response.created", "response.in_progress", "error", "response.failed"]
    assert stream.final.output == [] and stream.final.usage.output_tokens == 0


def test_engine_failure_non_streaming_is_a_failed_response(start_server):
    server = start_server([{"text": "one two three four five six", "fail_after": 3}])
    with server.http() as http:
        response, raw = post_json(http, {"model": "m", "input": ASK})
    assert response.status == "failed"
    assert response.error.message and "scripted engine failed" in response.error.message
    assert response.usage.output_tokens == 3
    assert raw["incomplete_details"] is None


# -- the output limit inside and right after reasoning ----------------------------------

SIXTEEN_WORDS = " ".join(f"idea{i}" for i in range(16))


def test_output_limit_inside_reasoning(start_server):
    server = start_server([SIXTEEN_WORDS + " more.</think>Answer."], family="glm")
    with server.http() as http:
        stream = read_stream(http, {"model": "m", "input": ASK, "max_output_tokens": 16})
    assert stream.shape() == REASONING_THEN_TEXT[:8] + ["response.incomplete"]
    [reasoning] = stream.final.output
    assert reasoning.type == "reasoning" and reasoning.status == "incomplete"
    assert reasoning.content[0].text == SIXTEEN_WORDS
    assert stream.final.incomplete_details.reason == "max_output_tokens"
    assert stream.final.usage.output_tokens_details.reasoning_tokens == 16


def test_reasoning_closed_by_its_end_tag_is_completed_at_the_limit(start_server):
    fifteen = " ".join(f"idea{i}" for i in range(15))
    server = start_server([fifteen + "</think>Answer comes too late."], family="glm")
    with server.http() as http:
        stream = read_stream(http, {"model": "m", "input": ASK, "max_output_tokens": 16})  # 15 words + </think>
    assert stream.final.status == "incomplete"
    [reasoning] = stream.final.output
    assert reasoning.content[0].text == fifteen
    assert reasoning.status == "completed"
