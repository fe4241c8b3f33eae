"""Whatever characters a model writes reach the client intact through an upstream engine, in both APIs.

A fake upstream (tests/fake_upstream.py) speaks llama-server's, vLLM's and SGLang's
stream formats with the JSON written raw, as they write it, cut into small writes; the
answer holds every character a line splitter treats as a line end, NUL, emoji split
across writes and across tokens, and (text-only engines) lone surrogate escapes.
"""

from __future__ import annotations

import json

import pytest

from maya_server.config import ServerConfig
from maya_server.engine_setup import create_engine

from tests.fake_upstream import FakeUpstream
from tests.gguf_model_dir import smollm2_tokenizer
from tests.recorder import Recorder
from tests.server import RunningServer

ODD_TEXT = ("one\u2028two\u2029three\u0085four\x0bfive\x0csix\x1c\x1d\x1eseven\r\neight\rnine\x00ten "
            "😀🐉 日本語 \u200b\ufeff \U0010fffd end")
MESSAGES = [{"role": "user", "content": "hi"}]


@pytest.fixture(scope="module", params=["llama-server", "vllm", "sglang"])
def maya(request, tokenizer_dir):
    upstream = FakeUpstream(request.param, smollm2_tokenizer())
    config = ServerConfig(engine="upstream", family="chatml", upstream_url=upstream.url, tokenizer=tokenizer_dir,
                          upstream_read_timeout=30.0)
    recorder = Recorder()
    server = RunningServer(config, create_engine(config), wrap=recorder)
    yield server, upstream
    server.stop()
    upstream.stop()
    recorder.check()


def answers(server) -> dict[str, str]:
    client = server.client()
    chat = client.chat.completions.create(model="m", messages=MESSAGES).choices[0].message.content
    chat_stream = "".join(chunk.choices[0].delta.content or "" for chunk in
                          client.chat.completions.create(model="m", messages=MESSAGES, stream=True) if chunk.choices)
    responses = client.responses.create(model="m", input="hi").output_text
    events = list(client.responses.create(model="m", input="hi", stream=True))
    assert events[-1].type == "response.completed"
    streamed = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert streamed == next(e.text for e in events if e.type == "response.output_text.done")
    return {"chat": chat, "chat stream": chat_stream, "responses": responses, "responses stream": streamed}


def generated(upstream: FakeUpstream, text: str) -> str:
    """What the engine generated: its token ids' text where it sends ids (the test tokenizer's round trip
    loses U+001D), the text itself where it sends only text."""
    if upstream.kind == "sglang":
        return text
    return upstream.tokenizer.decode(upstream.tokenizer.encode(text, special=False))


def test_line_like_characters_nul_and_emoji_come_out_intact(maya):
    server, upstream = maya
    upstream.answer = ODD_TEXT
    expected = generated(upstream, ODD_TEXT)
    assert all(c in expected for c in "\u2028\u2029\u0085\x00\r😀")
    for api, text in answers(server).items():
        assert text == expected, api


def test_lone_surrogate_escapes_become_replacement_characters(maya):
    server, upstream = maya
    if upstream.kind != "sglang":
        pytest.skip("engines that send token ids are decoded by Maya; only a text-only engine's text is used")
    upstream.raw_pieces = [json.dumps("a\u2028b"), '"\\ud800c"', '"\\udc00"', '"\\ud83d\\ude00 d\\u0000"']
    try:
        for api, text in answers(server).items():
            assert text == "a\u2028b\ufffdc\ufffd😀 d\x00", api
    finally:
        upstream.raw_pieces = None


def test_the_sse_maya_writes_escapes_line_like_characters(maya):
    """A client that splits Maya's stream with a text splitter (httpx's iter_lines) still reads whole events."""
    server, upstream = maya
    upstream.answer = ODD_TEXT
    with server.http() as http, http.stream("POST", "/v1/chat/completions",
                                            json={"messages": MESSAGES, "stream": True}) as answer:
        lines = [line for line in answer.iter_lines() if line]
    payloads = [json.loads(line[6:]) for line in lines if line.startswith("data: {")]
    assert all(line.startswith("data: ") for line in lines)
    text = "".join(p["choices"][0]["delta"].get("content") or "" for p in payloads if p["choices"])
    assert text == generated(upstream, ODD_TEXT)
