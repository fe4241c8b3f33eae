"""Each upstream is told the grammar in its own field, and one that refuses it never fails a request.

A structured request sends the GBNF grammar of `pipeline/constraint.py` as llama-server's `grammar`, vLLM's
`structured_outputs.grammar` or SGLang's `ebnf`; an unknown OpenAI-style server is told none. An engine that
answers a request with a grammar with 400 gets the same request without it: the client's answer is a 200,
validated before it is published, the log has one warning, and after three refusals in a row no grammar is sent
any more; `/v1/status` says which mechanism is in use and how many refusals there were.
"""

from __future__ import annotations

import logging
from contextlib import contextmanager
from typing import Iterator

import httpx
import pytest

from maya_server.config import ServerConfig, default_model_path
from maya_server.engine.upstream.grammar_support import STOP_AFTER
from maya_server.engine_setup import create_engine

from tests.fake_upstream import FakeUpstream
from tests.gguf_model_dir import smollm2_tokenizer, write_model_dir
from tests.server import RunningServer, prometheus_values

ANSWER = '{"count": 3}'
SCHEMA = {"type": "object", "properties": {"count": {"type": "integer"}}, "required": ["count"],
          "additionalProperties": False}
FORMAT = {"type": "json_schema", "json_schema": {"name": "count", "schema": SCHEMA, "strict": True}}
FIELD = {"llama-server": "grammar", "vllm": "structured_outputs", "sglang": "ebnf"}


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory) -> str:
    return str(write_model_dir(default_model_path(), tmp_path_factory.mktemp("smollm2")))


@contextmanager
def served(kind: str, tokenizer_dir: str, *, refused: tuple[str, ...] = (),
           **overrides) -> Iterator[tuple[FakeUpstream, RunningServer]]:
    """A fake `kind` upstream answering `ANSWER` (a 400 to a body with a `refused` field) and a Maya in front."""
    upstream = FakeUpstream(kind, smollm2_tokenizer())
    upstream.answer = ANSWER
    upstream.refused_fields = refused
    config = ServerConfig(engine="upstream", family="chatml", upstream_url=upstream.url, tokenizer=tokenizer_dir,
                          upstream_read_timeout=30.0, **overrides)
    server = RunningServer(config, create_engine(config))
    try:
        yield upstream, server
    finally:
        server.stop()
        upstream.stop()


def _status(server: RunningServer) -> dict:
    return httpx.get(server.url + "/v1/status", timeout=10).json()["constrained_decoding"]


def _ask(server: RunningServer, **extra) -> httpx.Response:
    return httpx.post(server.url + "/v1/chat/completions", timeout=30, json={
        "model": "m", "messages": [{"role": "user", "content": "How many?"}], **extra})


def _completion_requests(upstream: FakeUpstream) -> list[dict]:
    return [request for request in upstream.requests if "prompt" in request]


@pytest.mark.parametrize("kind", ["llama-server", "vllm", "sglang"])
def test_each_engine_is_sent_the_grammar_in_its_own_field_and_plain_text_none(kind, tokenizer_dir):
    with served(kind, tokenizer_dir) as (upstream, server):
        structured = _ask(server, response_format=FORMAT)
        plain = _ask(server)
        status = _status(server)
    assert structured.status_code == 200 and structured.json()["choices"][0]["message"]["content"] == ANSWER
    assert plain.status_code == 200
    with_grammar, without = _completion_requests(upstream)
    grammar = with_grammar[FIELD[kind]]["grammar"] if kind == "vllm" else with_grammar[FIELD[kind]]
    assert grammar.startswith("root ::= ") and '"\\"count\\""' in grammar
    assert not {"grammar", "structured_outputs", "ebnf"} & set(without)
    assert status["enabled"] is True and status["in_use"] is True and status["refusals"] == 0
    assert status["mechanism"].startswith(kind)


def test_a_server_told_not_to_constrain_sends_no_grammar_and_says_so(tokenizer_dir):
    with served("llama-server", tokenizer_dir, constrained_decoding=False) as (upstream, server):
        answer = _ask(server, response_format=FORMAT)
        status = _status(server)
    assert answer.status_code == 200 and answer.json()["choices"][0]["message"]["content"] == ANSWER
    assert "grammar" not in _completion_requests(upstream)[0]
    assert status["enabled"] is False


@pytest.mark.parametrize("kind", ["llama-server", "vllm"])
def test_an_engine_that_refuses_the_grammar_answers_without_it_warns_once_and_is_spared_after_three(
        kind, tokenizer_dir, caplog):
    with served(kind, tokenizer_dir, refused=(FIELD[kind],)) as (upstream, server):
        with caplog.at_level(logging.WARNING, logger="maya.engine"):
            answers = [_ask(server, response_format=FORMAT) for _ in range(STOP_AFTER + 1)]
        invalid = _ask(server, response_format=FORMAT, max_tokens=2)  # still validated: cut JSON is never sent
        status = _status(server)
        counted = prometheus_values(httpx.get(server.url + "/metrics/prometheus", timeout=10).text,
                                    "maya:upstream_grammar_refusals_total")
    assert [a.status_code for a in answers] == [200] * (STOP_AFTER + 1)
    assert all(a.json()["choices"][0]["message"]["content"] == ANSWER for a in answers)
    sent = [FIELD[kind] in request for request in _completion_requests(upstream)]
    # each of the first three: refused, then sent again without; from then on none is sent
    assert sent == [True, False] * STOP_AFTER + [False, False]
    refusals = [r for r in caplog.records if "refused a grammar" in r.getMessage()]
    assert len(refusals) == 1 and "Failed to parse" in refusals[0].getMessage()
    assert invalid.status_code == 200 and invalid.json()["choices"][0]["finish_reason"] == "length"
    assert not invalid.json()["choices"][0]["message"]["content"]
    assert status == {"enabled": True, "mechanism": status["mechanism"], "in_use": False, "refusals": STOP_AFTER,
                      "last_refusal": status["last_refusal"]}
    assert "Failed to parse" in status["last_refusal"]
    assert list(counted.values()) == [float(STOP_AFTER)]


def test_a_request_the_engine_refuses_for_another_reason_fails_as_before_and_counts_no_refusal(tokenizer_dir):
    with served("llama-server", tokenizer_dir, refused=("prompt",)) as (_, server):  # every request refused
        answer = _ask(server, response_format=FORMAT)
        status = _status(server)
    assert answer.status_code == 400 and answer.json()["error"]["code"] == "upstream_rejected"
    assert status["refusals"] == 0 and status["in_use"] is True


def test_an_unknown_openai_server_is_told_no_grammar():
    from maya_server.engine.base import SamplingParams
    from maya_server.engine.upstream.wire import completion_request

    params = SamplingParams(max_tokens=4)
    body = completion_request("openai", "m", [1, 2], params, (), grammar="root ::= \"x\"")
    assert not {"grammar", "structured_outputs", "ebnf"} & set(body)
    assert completion_request("vllm", "m", [1], params, (), grammar="g")["structured_outputs"] == {"grammar": "g"}
    assert completion_request("sglang", "m", [1], params, (), grammar="g")["ebnf"] == "g"
