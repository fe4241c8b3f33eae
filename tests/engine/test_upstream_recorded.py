"""vLLM's and SGLang's recorded answers, replayed: Maya's upstream engine turns them into the generation they carry.

The streams in `tests/engine/recordings/` (see its README for where each shape comes from) are what vLLM and
SGLang send for Maya's own `/v1/completions` body: vLLM's ids as `"token_id:N"` in `logprobs.tokens` with
`token_ids: null` beside them and a usage chunk of no choices, SGLang's text only with `usage: null` on every
chunk. A local server replays them byte for byte (tests/fake_upstream.py); what comes out must be the
generation llama-server recorded (`generation.json`): its ids, its text, its finish and its counts.
"""

from __future__ import annotations

import asyncio
import json
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
GENERATION = json.loads((RECORDINGS / "generation.json").read_text())
MAX_TOKENS = len(GENERATION["token_ids"])
"""Asked of Maya as the recording's length, as the request that was recorded asked."""
MESSAGES = [{"role": "user", "content": GENERATION["prompt_text"]}]


def upstream_config(url: str, tokenizer_dir: str) -> ServerConfig:
    return ServerConfig(engine="upstream", family="chatml", upstream_url=url, tokenizer=tokenizer_dir,
                        upstream_read_timeout=30.0)


@pytest.fixture(scope="module", params=[("vllm", None), ("vllm", 5), ("sglang", None), ("sglang", 5)],
                ids=["vllm", "vllm-cut", "sglang", "sglang-cut"])
def replay(request):
    """The recorded exchange, one write per event (as uvicorn sends it) or cut into 5-byte writes."""
    kind, chunk_bytes = request.param
    upstream = FakeUpstream.replaying(kind, RECORDINGS, chunk_bytes=chunk_bytes)
    yield upstream
    upstream.stop()


@pytest.fixture(scope="module")
def maya(replay, tokenizer_dir):
    recorder = Recorder()
    config = upstream_config(replay.url, tokenizer_dir)
    server = RunningServer(config, create_engine(config), wrap=recorder)
    yield server
    server.stop()
    recorder.check()


def test_the_start_up_probe_reads_the_recorded_model_card(maya, replay):
    engine = maya.http().get("/v1/status").json()["engine"]
    assert engine["upstream"]["kind"] == replay.kind
    assert maya.engine.info.model == GENERATION["model"]
    assert maya.http().get("/v1/status").json()["context_size"] == 8192  # the card's max_model_len


def test_maya_asks_for_what_the_recording_answers(maya, replay):
    """The recordings answer Maya's body; if Maya stopped asking for vLLM's ids, vLLM would stop sending them."""
    maya.client().chat.completions.create(model="m", messages=MESSAGES, max_tokens=MAX_TOKENS)
    body = replay.requests[-1]
    assert body["model"] == GENERATION["model"] and body["stream"] is True
    assert body["stream_options"] == {"include_usage": True} and body["skip_special_tokens"] is False
    if replay.kind == "vllm":
        assert body["logprobs"] == 1 and body["return_tokens_as_token_ids"] is True
    else:
        assert "logprobs" not in body


def test_the_engine_yields_the_recorded_ids_text_finish_and_counts(replay, tokenizer_dir, monkeypatch):
    """Through `UpstreamEngine.generate` itself; every id the stream decoded is seen, one by one or as a read's
    run (`IncrementalDetokenizer.push`, `push_all`)."""
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


def test_chat_gets_the_recorded_text_finish_and_usage(maya):
    client = maya.client()
    usage = GENERATION["usage"]
    completion = client.chat.completions.create(model="m", messages=MESSAGES, max_tokens=MAX_TOKENS)
    assert completion.choices[0].message.content == GENERATION["text"]
    assert completion.choices[0].finish_reason == GENERATION["finish_reason"]
    assert (completion.usage.prompt_tokens, completion.usage.completion_tokens) == (usage["prompt_tokens"],
                                                                                   usage["completion_tokens"])

    chunks = list(client.chat.completions.create(model="m", messages=MESSAGES, max_tokens=MAX_TOKENS, stream=True,
                                                 stream_options={"include_usage": True}))
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == GENERATION["text"]
    assert [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason] == ["length"]
    assert (chunks[-1].usage.prompt_tokens, chunks[-1].usage.completion_tokens) == (usage["prompt_tokens"],
                                                                                   usage["completion_tokens"])


def test_responses_gets_the_recorded_text_and_an_incomplete_answer(maya):
    events = list(maya.client().responses.create(model="m", input=GENERATION["prompt_text"],
                                                 max_output_tokens=MAX_TOKENS, stream=True))
    assert "".join(e.delta for e in events if e.type == "response.output_text.delta") == GENERATION["text"]
    final = events[-1]
    assert final.type == "response.incomplete"
    assert final.response.incomplete_details.reason == "max_output_tokens"
    assert final.response.output_text == GENERATION["text"]
    assert final.response.usage.output_tokens == GENERATION["usage"]["completion_tokens"]


def test_maya_names_the_model_the_upstream_serves(maya, replay):
    """`/v1/models` and every answer's `model` say the upstream's served model name (its recorded `/v1/models`),
    not the name of the folder that holds the tokenizer."""
    served = json.loads((RECORDINGS / f"{replay.kind}.models.json").read_text())["data"][0]["id"]
    assert [card["id"] for card in maya.http().get("/v1/models").json()["data"]] == [served]
    assert maya.http().get(f"/v1/models/{served}").status_code == 200
    assert maya.http().get("/v1/status").json()["model"] == served
    client = maya.client()
    assert client.chat.completions.create(model="m", messages=MESSAGES, max_tokens=2).model == served
    assert client.responses.create(model="m", input="hi", max_output_tokens=16).model == served
