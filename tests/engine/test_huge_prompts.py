"""Huge prompts on the real embedded engine: refused before llama-server tokenizes them, and a tokenize deadline
is the request's 413, never an engine fault.

SmolLM2's longest token is 81 bytes (a newline and 80 spaces), so with a 512-token context a prompt of more than
512 x 81 characters cannot fit however it tokenizes: it is a 400 before any `/tokenize` (the tokenize cache's
misses do not move). A prompt made of that very token, just under the bound, still reaches the engine and is
answered: the bound is the vocabulary's, not a guess.
"""

from __future__ import annotations

import os
import signal

import httpx
import pytest

from tests.embedded import embedded_server
from tests.server import prometheus_values

pytestmark = pytest.mark.slow

CTX = 512
LONGEST = "\n" + " " * 80
"""SmolLM2's longest token, 81 bytes."""


@pytest.fixture(scope="module")
def server():
    with embedded_server(ctx=CTX, slots=1) as running:
        yield running


def misses(server) -> float:
    return prometheus_values(server.http().get("/metrics/prometheus").text,
                             "maya:tokenize_cache_misses")["maya:tokenize_cache_misses_total"]


def chat(server, content: str, **extra) -> httpx.Response:
    body = {"model": "m", "messages": [{"role": "user", "content": content}], "max_tokens": 1, **extra}
    with httpx.Client(base_url=server.url, timeout=120) as client:
        return client.post("/v1/chat/completions", json=body)


def test_the_engine_reports_its_longest_token(server):
    assert server.engine.max_token_bytes == len(LONGEST.encode())


@pytest.mark.parametrize("api", ["chat", "responses"])
def test_a_prompt_too_long_for_any_tokenization_is_a_400_before_tokenizing(server, api):
    before = misses(server)
    text = "x" * (CTX * len(LONGEST) + 1)
    if api == "chat":
        answer = chat(server, text)
    else:
        answer = server.http().post("/v1/responses", json={"model": "m", "input": text})

    assert answer.status_code == 400
    error = answer.json()["error"]
    assert error["code"] == "context_length_exceeded" and error["type"] == "invalid_request_error"
    assert error["param"] == ("messages" if api == "chat" else "input")
    assert "at least" in error["message"] and f"{CTX} tokens" in error["message"]
    assert misses(server) == before  # llama-server never saw it


def test_max_tokens_counts_against_the_bound(server):
    before = misses(server)
    answer = chat(server, "x" * (CTX * len(LONGEST) // 2 + 1), max_tokens=CTX // 2 + 1)

    assert answer.status_code == 400 and answer.json()["error"]["code"] == "context_length_exceeded"
    assert misses(server) == before


def test_a_prompt_just_under_the_bound_is_tokenized_and_answered(server):
    """Made of the longest token itself: nearly the whole context in characters, yet it fits."""
    answer = chat(server, LONGEST * (CTX - 64))

    assert answer.status_code == 200, answer.text
    assert CTX - 64 <= answer.json()["usage"]["prompt_tokens"] < CTX


def test_a_tokenize_deadline_is_the_requests_413_not_an_engine_fault():
    """llama-server held (SIGSTOP) while a prompt waits on its `/tokenize`: the deadline passes, and the answer
    says the prompt cost too much, not that the engine is unavailable."""
    with embedded_server(ctx=CTX, slots=1, tokenize_timeout=1.0) as held:
        pid = held.engine.process.pid
        os.kill(pid, signal.SIGSTOP)
        try:
            answer = chat(held, "Words the tokenize cache has never seen: quokka, axolotl, pangolin.")
        finally:
            os.kill(pid, signal.SIGCONT)
        assert answer.status_code == 413
        error = answer.json()["error"]
        assert error["code"] == "prompt_too_large" and error["type"] == "invalid_request_error"
        assert "--tokenize-timeout" in error["message"]
        assert chat(held, "Hello!").status_code == 200  # the engine itself was never at fault
