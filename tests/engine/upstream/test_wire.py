"""The upstream wire format, without an upstream: request bodies, stream events, error mapping (the transport's
own failures are `test_event_stream.py`'s)."""

from __future__ import annotations

import orjson
import pytest

from maya_server.engine.base import SamplingParams
from maya_server.engine.upstream.health import UpstreamCollector, UpstreamHealth, public_url
from maya_server.engine.upstream.wire import (
    completion_request,
    error_from_response,
    parse_error_event,
    parse_event,
)
from maya_server.errors import UpstreamError, UpstreamRejected

PARAMS = SamplingParams(max_tokens=16, temperature=0.5, top_p=0.9, seed=3, presence_penalty=0.5, frequency_penalty=-1.0)


def test_every_request_streams_token_ids_with_usage():
    for kind in ("vllm", "sglang", "openai"):
        body = completion_request(kind, "m", [1, 2, 3], PARAMS, {9, 4})
        assert body["prompt"] == [1, 2, 3] and body["model"] == "m"
        assert (body["max_tokens"], body["temperature"], body["top_p"], body["seed"]) == (16, 0.5, 0.9, 3)
        assert (body["presence_penalty"], body["frequency_penalty"]) == (0.5, -1.0)
        assert body["stream"] is True and body["stream_options"] == {"include_usage": True}


def test_llama_server_gets_openai_sampling_and_sends_ids_without_probabilities():
    from maya_server.engine.upstream.wire import native_completion_request

    body = native_completion_request([1], SamplingParams(max_tokens=4))
    assert body["return_tokens"] is True and "n_probs" not in body
    assert body["top_k"] == 0 and body["min_p"] == 0.0 and body["top_p"] == 1.0 and body["cache_prompt"] is True
    assert "model" not in body and "seed" not in body


def test_vllm_keeps_special_tokens_stops_on_ids_and_returns_ids():
    body = completion_request("vllm", "glm", [1], PARAMS, {9, 4})
    assert body["stop_token_ids"] == [4, 9]
    assert body["skip_special_tokens"] is False and body["spaces_between_special_tokens"] is False
    assert body["logprobs"] == 1 and body["return_tokens_as_token_ids"] is True


def test_sglang_keeps_special_tokens_and_stops_on_ids():
    body = completion_request("sglang", "glm", [1], PARAMS, {9})
    assert body["stop_token_ids"] == [9] and body["skip_special_tokens"] is False
    assert "logprobs" not in body


def _event(choice: dict | None = None, **extra) -> str:
    payload = {"object": "text_completion", "choices": [choice] if choice else [], **extra}
    return orjson.dumps(payload).decode()


def test_llama_server_chunk_ids_come_from_logprobs_content():
    chunk = parse_event(_event({"text": "Hello", "index": 0, "finish_reason": None,
                                "logprobs": {"content": [{"id": 19556, "token": "Hello", "logprob": -2.1}]}}))
    assert chunk.text == "Hello" and chunk.token_ids == (19556,) and chunk.finish_reason is None


def test_vllm_chunk_ids_come_from_token_id_strings_or_a_token_ids_list():
    chunk = parse_event(_event({"text": "ab", "finish_reason": None,
                                "logprobs": {"tokens": ["token_id:5", "token_id:77"], "token_logprobs": [0, 0]}}))
    assert chunk.token_ids == (5, 77)
    assert parse_event(_event({"text": "x", "token_ids": [8, 9], "finish_reason": "stop"})).token_ids == (8, 9)


def test_text_only_chunks_have_no_ids():
    chunk = parse_event(_event({"text": "<think>", "finish_reason": None, "logprobs": None}))
    assert chunk.text == "<think>" and chunk.token_ids is None
    chunk = parse_event(_event({"text": "x", "logprobs": {"tokens": ["x"]}}))
    assert chunk.token_ids is None


def test_usage_and_cached_tokens_from_either_field():
    usage = {"prompt_tokens": 10, "completion_tokens": 3, "prompt_tokens_details": {"cached_tokens": 7}}
    chunk = parse_event(_event(usage=usage))
    assert (chunk.completion_tokens, chunk.cached_tokens) == (3, 7)
    llama = parse_event(_event({"text": "", "finish_reason": "stop"}, usage={"completion_tokens": 3}, timings={"cache_n": 4}))
    assert llama.cached_tokens == 4 and llama.finish_reason == "stop"
    assert parse_event(" [DONE]") is None


@pytest.mark.parametrize("payload", ["{not json", "[1, 2]"])
def test_unreadable_events_are_upstream_errors(payload):
    with pytest.raises(UpstreamError):
        parse_event(payload)


def test_an_error_event_mid_stream_raises_its_mapping():
    with pytest.raises(UpstreamRejected) as caught:
        parse_event('{"error": {"code": 400, "message": "the request exceeds the available context size", '
                    '"type": "exceed_context_size_error"}}')
    assert caught.value.status == 400 and caught.value.code == "context_length_exceeded"
    assert parse_error_event('{"code": 500, "message": "boom"}').status == 502


@pytest.mark.parametrize(
    ("status", "body", "expected_status", "code"),
    [
        (400, {"error": {"message": "request exceeds the available context size", "type": "exceed_context_size_error"}},
         400, "context_length_exceeded"),
        (400, {"object": "error", "message": "This model's maximum context length is 8192 tokens. However, you requested 9000",
               "type": "BadRequestError", "code": 400}, 400, "context_length_exceeded"),
        (400, {"object": "error", "message": "The input (9000 tokens) is longer than the model's context length (8192 tokens)."},
         400, "context_length_exceeded"),
        (422, {"detail": "temperature must be >= 0"}, 400, "upstream_rejected"),
        (429, {}, 429, "upstream_overloaded"),
        (503, {"error": {"message": "Loading model"}}, 503, "upstream_unavailable"),
        (401, {"error": {"message": "Invalid API Key"}}, 502, "upstream_error"),
        (500, {"error": {"message": "CUDA out of memory at /secret/path"}}, 502, "upstream_error"),
    ],
)
def test_upstream_answers_map_to_openai_errors(status, body, expected_status, code):
    error = error_from_response(status, orjson.dumps(body))
    assert (error.status, error.code) == (expected_status, code)
    assert isinstance(error, UpstreamError)
    assert error.body()["error"]["type"] in ("invalid_request_error", "rate_limit_error", "server_error")
    if status >= 500:
        assert "secret" not in error.message  # an upstream's internals are not the client's business


@pytest.mark.parametrize("status, says", [(413, "HTTP 413, the request body is larger than the engine accepts"),
                                         (400, "HTTP 400, with no reason given")])
def test_a_refusal_without_a_message_says_its_status(status, says):
    """llama-server answers a body past its size limit with a bare 413: the client learns why."""
    for body in (b"", b"{}", b'{"error": {"message": ""}}'):
        error = error_from_response(status, body)
        assert (error.status, error.code) == (400, "upstream_rejected")
        assert says in error.message


def test_a_non_json_error_body_still_maps():
    assert error_from_response(502, b"<html>bad gateway</html>").code == "upstream_error"


def test_public_url_drops_anything_secret():
    assert public_url("http://user:pw@gpu1:8000/v1/?key=x#frag") == "http://gpu1:8000/v1"
    assert public_url("https://[::1]:9000") == "https://[::1]:9000"


def test_health_counts_failures_until_a_success():
    now = [100.0]
    health = UpstreamHealth("http://gpu1:8000", clock=lambda: now[0])
    health.record("failed", "cannot connect")
    health.record("failed", "cannot connect")
    assert health.describe()["consecutive_failures"] == 2 and health.describe()["healthy"] is False
    collected = {m.name: m for m in UpstreamCollector(health, slots=8).collect()}
    assert collected["maya:upstream_up"].samples[0].value == 0.0
    assert collected["maya:upstream_up"].samples[0].labels == {"url": "http://gpu1:8000"}
    health.record("rejected")
    assert health.describe()["healthy"] is True and health.consecutive_failures == 0
    assert health.describe()["requests"] == {"ok": 0, "rejected": 1, "failed": 2, "cancelled": 0, "abandoned": 0}


def test_a_native_completion_stream():
    from maya_server.engine.upstream.wire import native_completion_request, parse_native_event

    body = native_completion_request({"prompt_string": "a", "multimodal_data": []}, SamplingParams(max_tokens=5))
    assert (body["n_predict"], body["return_tokens"], body["top_k"], body["stream"]) == (5, True, 0, True)
    partial = parse_native_event(orjson.dumps({"content": "Hi", "tokens": [7], "stop": False,
                                               "tokens_evaluated": 40}).decode())
    assert (partial.text, partial.token_ids, partial.finish_reason, partial.prompt_tokens) == ("Hi", (7,), None, None)
    final = parse_native_event(orjson.dumps({"content": "", "tokens": [], "stop": True, "stop_type": "limit",
                                             "tokens_predicted": 5, "tokens_evaluated": 40,
                                             "tokens_cached": 44, "timings": {"cache_n": 12}}).decode())
    assert (final.finish_reason, final.completion_tokens, final.prompt_tokens, final.cached_tokens) == (
        "length", 5, 40, 12)
    with pytest.raises(UpstreamRejected):
        parse_native_event(orjson.dumps({"error": {"code": 400, "message": "Failed to tokenize prompt"}}).decode())


def test_a_multimodal_prompt_puts_each_image_at_its_position():
    from maya_server.engine.upstream.wire import multimodal_prompt

    class Letters:
        def decode(self, ids):
            return "".join(chr(96 + i) for i in ids)

    prompt = multimodal_prompt(Letters(), [1, 2, 3, 4], (b"A", b"B"), (1, 3), "<M>")
    assert prompt == {"prompt_string": "a<M>bc<M>d", "multimodal_data": ["QQ==", "Qg=="]}


def _native(content: str = "a", tokens: object = (7,), **extra) -> bytes:
    return orjson.dumps({"index": 0, "content": content, "tokens": list(tokens) if isinstance(tokens, tuple) else tokens,
                         "stop": False, "id_slot": -1, **extra})


def _openai(text: str = "a", ids: tuple = (7,), finish: str | None = None, **extra) -> bytes:
    choice = {"index": 0, "text": text, "logprobs": {"tokens": [f"token_id:{i}" for i in ids]}, "finish_reason": finish}
    return orjson.dumps({"id": "c", "object": "text_completion", "choices": [choice], **extra})


def test_a_read_of_plain_token_events_is_one_run_of_ids_and_text():
    from maya_server.engine.upstream.wire import token_run

    native = token_run([_native("The", (504,)), _native(" sun", (2388,)), _native("", [])], native=True)
    assert (native.ids, native.text, native.aligned) == ([504, 2388], "The sun", False)  # the last had none
    vllm = token_run([_openai("The", (504,)), _openai(" sun had", (2388, 761))], native=False)
    assert (vllm.ids, vllm.text, vllm.aligned) == ([504, 2388, 761], "The sun had", True)
    assert not token_run([_native("The", (504,)), _native(" sun", [])], native=True).aligned  # text without ids
    listed = orjson.dumps({"choices": [{"index": 0, "text": "x", "token_ids": [9], "finish_reason": None}]})
    assert token_run([listed, listed], native=False).ids == [9, 9]


@pytest.mark.parametrize("native, odd_one", [
    (True, orjson.dumps({"content": "", "tokens": [], "stop": True, "tokens_predicted": 2})),  # the final event
    (True, orjson.dumps({"prompt_progress": {"total": 4, "cache": 0, "processed": 4, "time_ms": 1}, "stop": False,
                         "content": "", "tokens": []})),
    (True, _native("a", [True])),                                                             # not an id
    (True, orjson.dumps({"content": "a", "stop": False})),                                    # text without ids
    (True, orjson.dumps({"error": {"code": 500, "message": "boom"}})),
    (True, b'{"content": "\\ud800", "tokens": [7], "stop": false}'),                          # a lone surrogate
    (True, b"[1]"),
    (False, b"[DONE]"),
    (False, _openai("", (), finish="stop")),
    (False, _openai("", (), usage={"prompt_tokens": 3, "completion_tokens": 2})),
    (False, orjson.dumps({"choices": [{"index": 0, "text": "a", "finish_reason": None}]})),  # SGLang: text only
    (False, orjson.dumps({"object": "error", "message": "boom", "code": 500})),
    (False, orjson.dumps({"choices": []})),
])
def test_any_other_event_leaves_the_read_to_be_parsed_event_by_event(native, odd_one):
    """`None`: the caller parses the read's events one by one (`parse_native_event`, `parse_event`), which is where
    an end, usage, progress, an error and an unusual encoding each get their meaning (or their error)."""
    from maya_server.engine.upstream.wire import token_run

    plain = _native() if native else _openai()
    assert token_run([plain, odd_one], native) is None
    assert token_run([odd_one, plain], native) is None
