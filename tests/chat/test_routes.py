"""Chat Completions through the official SDK against a real server on the scripted engine."""

from __future__ import annotations

import openai
import pytest


def test_non_streaming_returns_the_scripted_text_and_usage(start_server):
    server = start_server(["The capital of France is Paris."])
    completion = server.client().chat.completions.create(
        model="anything", messages=[{"role": "user", "content": "What is the capital of France?"}]
    )
    choice = completion.choices[0]
    assert choice.message.role == "assistant"
    assert choice.message.content == "The capital of France is Paris."
    assert choice.finish_reason == "stop"
    assert completion.object == "chat.completion"
    assert completion.usage.prompt_tokens == len(server.engine.prompts[0])
    assert completion.usage.completion_tokens == len(
        server.engine.tokenizer.encode("The capital of France is Paris.", special=True)
    )
    assert completion.usage.total_tokens == completion.usage.prompt_tokens + completion.usage.completion_tokens
    assert completion.usage.prompt_tokens_details.cached_tokens == 0
    assert "What is the capital of France?" in server.engine.last_prompt_text


def test_streaming_yields_role_then_content_then_finish_and_usage(start_server):
    server = start_server(["One two three four."])
    stream = server.client().chat.completions.create(
        model="m", messages=[{"role": "user", "content": "count"}], stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    assert chunks[0].choices[0].delta.role == "assistant"
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "One two three four."
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert finishes == ["stop"]
    assert chunks[-1].choices == []
    assert chunks[-1].usage.completion_tokens == len(server.engine.tokenizer.encode(text, special=True))
    assert len({c.id for c in chunks}) == 1


def test_max_tokens_ends_with_length(start_server):
    server = start_server(["one two three four five six"])
    completion = server.client().chat.completions.create(
        model="m", messages=[{"role": "user", "content": "count"}], max_tokens=3
    )
    assert completion.choices[0].finish_reason == "length"
    assert completion.choices[0].message.content == "one two three"
    assert completion.usage.completion_tokens == 3


def test_max_completion_tokens_wins_and_reaches_the_engine(start_server):
    server = start_server(["a b c d"])
    server.client().chat.completions.create(
        model="m", messages=[{"role": "user", "content": "x"}], max_completion_tokens=2, temperature=0.5, top_p=0.9, seed=7
    )
    params = server.engine.params[-1]
    assert (params.max_tokens, params.temperature, params.top_p, params.seed) == (2, 0.5, 0.9, 7)


def test_stop_string_cuts_the_text_streamed_and_not(start_server):
    server = start_server(["alpha beta STOP gamma"])
    client = server.client()
    completion = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}], stop=["STOP"])
    assert completion.choices[0].message.content.rstrip() == "alpha beta"
    assert completion.choices[0].finish_reason == "stop"
    chunks = list(client.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}], stop="ST", stream=True))
    assert "".join(c.choices[0].delta.content or "" for c in chunks).rstrip() == "alpha beta"


def test_cached_tokens_count_the_shared_prefix(start_server):
    server = start_server(["Sure."])
    client = server.client()
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi there"}]
    client.chat.completions.create(model="m", messages=messages)
    second = client.chat.completions.create(
        model="m", messages=messages + [{"role": "assistant", "content": "Sure."}, {"role": "user", "content": "More"}]
    )
    assert second.usage.prompt_tokens_details.cached_tokens > 0


def test_context_overflow_is_400_and_the_engine_is_never_called(start_server):
    server = start_server(["never"], ctx=64)
    with pytest.raises(openai.BadRequestError) as caught:
        server.client().chat.completions.create(
            model="m", messages=[{"role": "user", "content": "word " * 40}], max_tokens=40
        )
    error = caught.value.body
    assert caught.value.status_code == 400
    assert error["code"] == "context_length_exceeded"
    assert error["type"] == "invalid_request_error"
    assert server.engine.calls == 0


def test_prompt_alone_over_the_context_is_400(start_server):
    server = start_server(["never"], ctx=32)
    with pytest.raises(openai.BadRequestError) as caught:
        server.client().chat.completions.create(model="m", messages=[{"role": "user", "content": "word " * 60}])
    assert caught.value.body["code"] == "context_length_exceeded"
    assert server.engine.calls == 0


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"messages": [{"role": "wizard", "content": "hi"}]}, "messages[0].role"),
        ({"messages": [{"role": "user"}]}, "messages[0].content"),
        ({"messages": [{"role": "user", "content": 5}]}, "messages[0].content"),
        ({"messages": [{"role": "user", "content": [{"type": "audio", "x": 1}]}]}, "messages[0].content[0].type"),
        ({"messages": [{"role": "user", "content": [{"type": ["text"], "text": "x"}]}]}, "messages[0].content[0].type"),
        ({"messages": [{"role": "assistant", "content": [{"type": {"a": 1}}]}]}, "messages[0].content[0].type"),
        ({"messages": []}, "messages"),
        ({}, "messages"),
        ({"messages": [{"role": "user", "content": "hi"}], "temperature": "hot"}, "temperature"),
        ({"messages": [{"role": "user", "content": "hi"}], "temperature": 3}, "temperature"),
        ({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 0}, "max_tokens"),
        ({"messages": [{"role": "user", "content": "hi"}], "n": 2}, "n"),
        ({"messages": [{"role": "user", "content": "hi"}], "stream": "yes"}, "stream"),
        ({"messages": [{"role": "user", "content": "hi"}], "bogus": 1}, "bogus"),
        ({"messages": [{"role": "user", "content": "hi"}], "stop": ["a", "b", "c", "d", "e"]}, "stop"),
        ({"messages": [{"role": "tool", "content": "x"}]}, "messages[0].tool_call_id"),
        ({"messages": ["hello"]}, "messages[0]"),
    ],
)
def test_malformed_bodies_are_400_with_the_param_and_no_engine_call(start_server, body, param):
    server = start_server(["never"])
    with server.http() as http:
        response = http.post("/v1/chat/completions", json=body)
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["param"] == param
    assert error["type"] == "invalid_request_error"
    assert set(error) == {"message", "type", "param", "code"}
    assert server.engine.calls == 0


@pytest.mark.parametrize("raw", [b"{not json", b"[1, 2]", b"", b'"text"'])
def test_unparseable_bodies_are_400(start_server, raw):
    server = start_server(["never"])
    with server.http() as http:
        response = http.post("/v1/chat/completions", content=raw, headers={"content-type": "application/json"})
    assert response.status_code == 400
    assert response.json()["error"]["type"] == "invalid_request_error"
    assert server.engine.calls == 0


def test_image_input_without_a_vision_encoder_is_400(start_server):
    server = start_server(["never"])
    content = [{"type": "text", "text": "what is this"}, {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]
    with pytest.raises(openai.BadRequestError) as caught:
        server.client().chat.completions.create(model="m", messages=[{"role": "user", "content": content}])
    assert caught.value.body["param"] == "messages[0].content[1].image_url.url"
    assert caught.value.body["code"] == "images_not_supported"
    assert server.engine.calls == 0


def test_unknown_route_is_an_openai_shaped_404(start_server):
    server = start_server()
    with server.http() as http:
        response = http.get("/v1/nothing-here")
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"


def test_engine_failure_mid_stream_sends_an_error_event(start_server):
    """The text made before the failure arrives, then the stream's last event is the engine error itself."""
    server = start_server([{"text": "one two three four", "fail_after": 2}])
    text = []
    with pytest.raises(openai.APIError) as caught:
        for chunk in server.client().chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}],
                                                             stream=True):
            text.append(chunk.choices[0].delta.content or "" if chunk.choices else "")
    assert caught.value.body["code"] == "engine_error" and caught.value.body["type"] == "server_error"
    assert "".join(text) and "four" not in "".join(text)


def test_engine_failure_without_stream_is_500(start_server):
    server = start_server([{"text": "one two three four", "fail_after": 2}])
    with pytest.raises(openai.InternalServerError) as caught:
        server.client().chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
    assert caught.value.body["code"] == "engine_error"


def test_penalties_reach_the_engine(start_server):
    server = start_server(["ok"])
    server.client().chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}],
                                            presence_penalty=1.5, frequency_penalty=-0.5)
    params = server.engine.params[-1]
    assert (params.presence_penalty, params.frequency_penalty) == (1.5, -0.5)
    with pytest.raises(openai.BadRequestError) as caught:
        server.client().chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}],
                                                frequency_penalty=-3)
    assert caught.value.body["param"] == "frequency_penalty"
    assert server.engine.calls == 1
