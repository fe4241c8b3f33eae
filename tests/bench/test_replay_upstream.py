"""The relay bench's replay upstream (bench/relay) stands in for real engines faithfully.

A live llama-server (SmolLM2, greedy) is recorded here, with the bench's own
recorder, and replayed by the C replay server in llama-server's, vLLM's and
SGLang's wire formats: the replayed streams parse to the same events as the
live ones, and Maya (`--engine upstream`, in-process) answers the same text
with the same token counts whichever of them it relays. Everything runs on
127.0.0.1; every process started here is stopped here.
"""

from __future__ import annotations

import time
from dataclasses import replace

import httpx
import orjson
import pytest

from bench.relay.record import MODEL_ALIAS, PROMPT, prompt_ids, record
from bench.relay.floor_bench import start_bare, start_framework
from bench.relay.replay import FORMATS, RECORDINGS, ReplayUpstream, build_script
from maya_server.config import ServerConfig, default_model_path
from maya_server.engine.base import SamplingParams
from maya_server.engine.upstream.wire import (
    completion_request, native_completion_request, parse_event, parse_native_event,
)
from maya_server.engine_setup import create_engine
from maya_server.model.hf_tokenizer import HfTokenizer
from tests.gguf_model_dir import write_model_dir
from tests.llama_server import LlamaServer
from tests.server import RunningServer

pytestmark = pytest.mark.upstream

TOKENS = 40
"""Tokens recorded here: enough for a few sentences, quick on one CPU thread."""


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory) -> str:
    return str(write_model_dir(default_model_path(), tmp_path_factory.mktemp("smollm2")))


@pytest.fixture(scope="module")
def ids(tokenizer_dir) -> list[int]:
    return prompt_ids(HfTokenizer.from_model_dir(tokenizer_dir))


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    server = LlamaServer(default_model_path(), ctx=2048, parallel=1, extra_args=("--alias", MODEL_ALIAS),
                         log_path=tmp_path_factory.mktemp("logs") / "llama-server.log")
    yield server
    server.stop()


@pytest.fixture(scope="module")
def recordings(llama, ids, tmp_path_factory):
    out = tmp_path_factory.mktemp("recordings")
    record(llama.url, out, ids, TOKENS)
    return out


@pytest.fixture(scope="module")
def replays(recordings):
    started: dict[str, ReplayUpstream] = {}
    try:
        for fmt in FORMATS:
            started[fmt] = ReplayUpstream(fmt, recordings=recordings, slots=4)
            started[fmt].start()
        yield started
    finally:
        for replay in started.values():
            replay.stop()


def stream_events(url: str, path: str, body: dict, parse) -> list:
    with httpx.stream("POST", url + path, json=body, timeout=120) as response:
        assert response.status_code == 200
        return [parse(line[5:].lstrip()) for line in response.iter_lines() if line.startswith("data:")]


def without_cache(chunks: list) -> list:
    """The recording was llama-server's first sight of the prompt, a later live answer reuses its cache."""
    return [replace(chunk, cached_tokens=None) if chunk is not None else None for chunk in chunks]


def maya_answers(upstream_url: str, tokenizer_dir: str, prompt: str, max_tokens: int, apis=("chat", "responses")) -> dict:
    """What Maya in front of `upstream_url` streams back: {api: (text, prompt tokens, completion tokens, finish)}."""
    config = ServerConfig(engine="upstream", family="chatml", upstream_url=upstream_url, tokenizer=tokenizer_dir,
                          upstream_read_timeout=60.0)
    server = RunningServer(config, create_engine(config))
    try:
        client = server.client()
        answers = {}
        if "chat" in apis:
            chunks = list(client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": prompt}], temperature=0, max_tokens=max_tokens,
                stream=True, stream_options={"include_usage": True}))
            text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
            finish = next(c.choices[0].finish_reason for c in reversed(chunks) if c.choices and c.choices[0].finish_reason)
            usage = chunks[-1].usage
            answers["chat"] = (text, usage.prompt_tokens, usage.completion_tokens, finish)
        if "responses" in apis:
            final = None
            for event in client.responses.create(model="m", input=prompt, temperature=0, max_output_tokens=max_tokens,
                                                 stream=True, store=False):
                if event.type in ("response.completed", "response.incomplete"):
                    final = event.response
            answers["responses"] = (final.output_text, final.usage.input_tokens, final.usage.output_tokens,
                                    final.status)
        return answers
    finally:
        server.stop()


@pytest.fixture(scope="module")
def live_answers(llama, tokenizer_dir, recordings):
    return maya_answers(llama.url, tokenizer_dir, PROMPT, TOKENS)


def test_the_committed_recordings_make_a_script_for_every_format():
    for fmt in FORMATS:
        script = build_script(fmt)
        assert script.startswith(b"REPLAY 1\n") and b"\nT /v1/completions " in script


@pytest.mark.parametrize("max_tokens", [TOKENS, 17])
def test_replayed_llama_server_streams_parse_as_the_live_ones(llama, replays, ids, max_tokens):
    params = SamplingParams(max_tokens=max_tokens, temperature=0)
    for path, body, parse in (
        ("/v1/completions", completion_request("openai", None, ids, params, ()), parse_event),
        ("/completion", native_completion_request(ids, params), parse_native_event),
    ):
        live = stream_events(llama.url, path, body, parse)
        replayed = stream_events(replays["llama-server"].url, path, body, parse)
        assert len(live) == len(replayed) >= max_tokens + 1, path
        assert without_cache(replayed) == without_cache(live), path


@pytest.mark.parametrize("fmt", ["vllm", "sglang"])
def test_vllm_and_sglang_replays_carry_the_same_generation(llama, replays, ids, fmt):
    params = SamplingParams(max_tokens=TOKENS, temperature=0)
    live = [c for c in stream_events(llama.url, "/v1/completions",
                                     completion_request("openai", None, ids, params, ()), parse_event) if c]
    replayed = [c for c in stream_events(replays[fmt].url, "/v1/completions",
                                         completion_request(fmt, MODEL_ALIAS, ids, params, {2}), parse_event) if c]
    assert "".join(c.text for c in replayed) == "".join(c.text for c in live)
    if fmt == "vllm":  # vLLM's "token_id:N" logprobs carry the ids, SGLang sends text only
        assert [i for c in replayed for i in c.token_ids or ()] == [i for c in live for i in c.token_ids or ()]
    usage = replayed[-1]
    assert (usage.prompt_tokens, usage.completion_tokens) == (len(ids), TOKENS)
    assert [c.finish_reason for c in replayed if c.finish_reason] == ["length"]


def test_maya_relays_the_llama_server_replay_as_the_live_one(replays, tokenizer_dir, live_answers):
    replayed = maya_answers(replays["llama-server"].url, tokenizer_dir, PROMPT, TOKENS)
    assert live_answers["chat"][0] and live_answers["chat"][2] == TOKENS
    assert replayed == live_answers


@pytest.mark.parametrize("fmt", ["vllm", "sglang"])
def test_vllm_and_sglang_replays_drive_maya_to_the_same_text(replays, tokenizer_dir, live_answers, fmt):
    replayed = maya_answers(replays[fmt].url, tokenizer_dir, PROMPT, TOKENS)
    assert replayed == live_answers


def test_the_replay_repeats_its_tokens_up_to_max_tokens(replays, tokenizer_dir, live_answers):
    wanted = 2 * TOKENS + 3
    text, prompt, completion, finish = maya_answers(replays["vllm"].url, tokenizer_dir, PROMPT, wanted, ("chat",))["chat"]
    recorded = live_answers["chat"][0]
    assert (completion, finish, prompt) == (wanted, "length", live_answers["chat"][1])
    assert text.startswith(recorded + recorded) and len(text) > 2 * len(recorded)


def test_a_rate_paces_each_stream(recordings, ids):
    body = completion_request("vllm", MODEL_ALIAS, ids, SamplingParams(max_tokens=11, temperature=0), ())
    with ReplayUpstream("vllm", rate=50, recordings=recordings) as replay:
        started = time.monotonic()
        chunks = stream_events(replay.url, "/v1/completions", body, parse_event)
        elapsed = time.monotonic() - started
    assert sum(1 for c in chunks if c and c.token_ids) == 11
    assert elapsed >= 0.19  # 11 tokens at 50/s: the first at once, then one every 20 ms (load only adds to it)


def test_the_replay_answers_the_start_up_probe_like_each_engine(replays):
    from maya_server.engine.upstream.probe import probe_upstream
    expected = {"llama-server": ("llama-server", 4), "vllm": ("vllm", None), "sglang": ("sglang", None)}
    for fmt, replay in replays.items():
        with httpx.Client(base_url=replay.url, timeout=10) as client:
            info = probe_upstream(client)
        assert (info.kind, info.slots) == expected[fmt]
        assert info.model == MODEL_ALIAS and info.context_size == 32768
        body = orjson.dumps({"prompt": [1, 2], "max_tokens": 1})
        assert httpx.post(replay.url + "/v1/unknown", content=body).status_code == 404


@pytest.mark.parametrize("start", [start_bare, start_framework], ids=["bare", "framework"])
def test_the_floor_relays_stream_every_replayed_token_as_a_chunk(start):
    """`bare_relay.py` and `framework_relay.py`, the floors `floor_bench.py` measures Maya against, do the work they
    are said to do: each upstream event parsed and written as one chunk of the token's text, then the usage the
    load client counts."""
    meta = orjson.loads((RECORDINGS / "meta.json").read_bytes())
    tokens = 12
    with ReplayUpstream("llama-server") as replay:
        relay, url = start(replay.port, tokens)
        try:
            with httpx.Client(timeout=30) as http:
                for _ in range(2):  # the connection is kept alive between answers
                    answer = http.post(url + "/v1/chat/completions", json={"stream": True})
                    events = [line[6:] for line in answer.text.split("\n") if line.startswith("data: ")]
                    assert events[-1] == "[DONE]"
                    usage = orjson.loads(events[-2])["usage"]
                    texts = [orjson.loads(event)["choices"][0]["delta"]["content"] for event in events[:-2]]
                    assert usage["completion_tokens"] == len(texts) == tokens
                    assert meta["text"].startswith("".join(texts))
        finally:
            relay.terminate()
            relay.wait(timeout=10)
