"""The upstream engine sends llama-server each request's slot (`id_slot`): a continuation goes to the slot
that holds its conversation, even after other conversations ran meanwhile.

A fake llama-server (tests/fake_upstream.py) answers at once, so the overlap is made by hand: the first
conversation's stream is held open (its slot busy) while the second runs.
"""

from __future__ import annotations

import asyncio

import pytest

from maya_server.config import ServerConfig, default_model_path
from maya_server.engine.base import GeneratedToken, Generation, SamplingParams
from maya_server.engine_setup import create_engine

from tests.fake_upstream import FakeUpstream
from tests.gguf_model_dir import smollm2_tokenizer, write_model_dir

INSTRUCTIONS = "You are a careful agent. " * 40


@pytest.fixture(scope="module")
def upstream_engine(tmp_path_factory):
    upstream = FakeUpstream("llama-server", smollm2_tokenizer())
    tokenizer_dir = str(write_model_dir(default_model_path(), tmp_path_factory.mktemp("smollm2")))
    config = ServerConfig(engine="upstream", family="chatml", upstream_url=upstream.url, tokenizer=tokenizer_dir,
                          upstream_read_timeout=30.0)
    engine = create_engine(config)
    yield engine, upstream
    asyncio.run(engine.close())
    upstream.stop()


def prompt(engine, text: str) -> list[int]:
    return engine.tokenizer.encode(INSTRUCTIONS + text, special=False)


async def run(engine, ids: list[int]) -> list[int]:
    return [t.id async for t in engine.generate(Generation(ids, SamplingParams(max_tokens=16)))
            if isinstance(t, GeneratedToken)]


def test_each_continuation_goes_to_its_own_conversations_slot(upstream_engine):
    engine, upstream = upstream_engine
    upstream.answer = "Sure."
    a, b = prompt(engine, "Task A."), prompt(engine, "Task B.")

    async def both_at_once() -> None:
        first = engine.generate(Generation(a, SamplingParams(max_tokens=16)))
        await anext(first)          # a's request is out: its slot is busy
        await run(engine, b)        # b gets the other slot
        async for _ in first:       # a finishes afterwards
            pass

    asyncio.run(both_at_once())
    slot_a, slot_b = (r["id_slot"] for r in upstream.requests[-2:])  # a was sent first
    assert {slot_a, slot_b} == {0, 1}
    answer = engine.tokenizer.encode("Sure.", special=False)
    # each continuation shares the instructions with both slots, its whole history (prompt, answer) with one
    histories, slots = {"a": a, "b": b}, {"a": slot_a, "b": slot_b}
    for name in "bbab":  # not in turns: a least-recently-used choice would give b the slot a holds
        continuation = histories[name] + answer + engine.tokenizer.encode(f" And then, {name}?", special=False)
        asyncio.run(run(engine, continuation))
        assert upstream.requests[-1]["id_slot"] == slots[name]
        assert upstream.requests[-1]["prompt"] == continuation
        histories[name] = continuation
