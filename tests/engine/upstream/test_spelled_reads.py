"""A read that brings several tokens at once still hands the pipeline every id, so the answer comes back as
history spelled with the ids the engine generated.

A busy engine's stream arrives several tokens per read, and the upstream engine relays each read as one piece
(`together`, `TokenStream.feed_run`). The spelling memory (`pipeline/spellings.py`) must still learn every id of
the turn, not the last of each read: else the history is tokenized again, and the engine's prompt cache is missed
from that turn on, exactly when the engine is busy. The fake upstream writes its whole answer at once, generated
as one id per character (SmolLM2's tokenizer would write whole words), so the next prompt shows which ids Maya
kept.
"""

from __future__ import annotations

import pytest

from maya_server.config import ServerConfig, default_model_path
from maya_server.engine_setup import create_engine

from tests.fake_upstream import FakeUpstream
from tests.gguf_model_dir import smollm2_tokenizer, write_model_dir
from tests.scripted import holds_run
from tests.server import RunningServer

ANSWER = "Blue, like the sky."


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory) -> str:
    return str(write_model_dir(default_model_path(), tmp_path_factory.mktemp("smollm2")))


@pytest.mark.parametrize("kind", ["llama-server", "vllm"])
def test_an_answer_read_whole_comes_back_as_every_id_it_was_generated_as(kind, tokenizer_dir):
    tokenizer = smollm2_tokenizer()
    by_character = [i for character in ANSWER for i in tokenizer.encode(character, special=False)]
    assert by_character != tokenizer.encode(ANSWER, special=False)  # else the test could not tell
    upstream = FakeUpstream(kind, tokenizer, chunk_bytes=1 << 20)  # the whole answer in one write: one read
    upstream.answer, upstream.answer_ids = ANSWER, by_character
    config = ServerConfig(engine="upstream", family="chatml", upstream_url=upstream.url, tokenizer=tokenizer_dir,
                          upstream_read_timeout=30.0)
    server = RunningServer(config, create_engine(config))
    try:
        client = server.client()
        question = {"role": "user", "content": "Name a colour."}
        first = client.chat.completions.create(model="m", messages=[question])
        assert first.choices[0].message.content == ANSWER
        client.chat.completions.create(model="m", messages=[
            question, {"role": "assistant", "content": ANSWER}, {"role": "user", "content": "Another one."}])
    finally:
        server.stop()
        upstream.stop()
    prompts = [request["prompt"] for request in upstream.requests if "prompt" in request]
    assert len(prompts) == 2 and holds_run(prompts[1], by_character)
