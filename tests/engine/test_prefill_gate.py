"""At most `prefill_concurrency` requests in the engine's prompt processing at once (`engine/prefill_gate.py`).

A fake llama-server holds each request's prompt until the test lets it through, so "the engine is still
processing that prompt" is a state the test controls: the next request must not reach the engine before
the previous one's first token, and must reach it as soon as that token is out, or its request ends.
"""

from __future__ import annotations

import asyncio
import threading

import pytest
from starlette.responses import StreamingResponse

from maya_server.config import ServerConfig, default_model_path
from maya_server.engine.base import GeneratedToken, Generation, SamplingParams
from maya_server.engine_setup import create_engine

from tests.fake_upstream import FakeUpstream
from tests.gguf_model_dir import smollm2_tokenizer, write_model_dir


class HeldUpstream(FakeUpstream):
    """llama-server whose n-th request processes its prompt (sends its first token) only once `released[n]` is
    set, and sends the rest of its answer only once `finished[n]` is."""

    def __init__(self) -> None:
        super().__init__("llama-server", smollm2_tokenizer(), chunk_bytes=None)
        self.arrived: list[int] = []
        self.released = [threading.Event() for _ in range(8)]
        self.finished = [threading.Event() for _ in range(8)]

    async def _complete_native(self, request):
        index = len(self.arrived)
        self.arrived.append(index)
        await asyncio.to_thread(self.released[index].wait, 30)
        events = (await super()._complete_native(request)).body_iterator  # one write per event

        async def first_token_then_the_rest():
            yield await anext(events)
            await asyncio.to_thread(self.finished[index].wait, 30)
            async for event in events:
                yield event

        return StreamingResponse(first_token_then_the_rest(), media_type="text/event-stream")

    def let_through(self) -> None:
        for event in (*self.released, *self.finished):
            event.set()


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory):
    return str(write_model_dir(default_model_path(), tmp_path_factory.mktemp("smollm2")))


@pytest.fixture
def held(tokenizer_dir):
    upstream = HeldUpstream()
    engines = []

    def engine(**settings):
        config = ServerConfig(engine="upstream", family="chatml", upstream_url=upstream.url, tokenizer=tokenizer_dir,
                              upstream_slots=4, **settings)
        engines.append(create_engine(config))
        return engines[-1]

    yield engine, upstream
    upstream.let_through()
    for made in engines:
        asyncio.run(made.close())
    upstream.stop()


async def answer(engine, text: str) -> str:
    ids = engine.tokenizer.encode(text, special=False)
    return "".join([t.text async for t in engine.generate(Generation(ids, SamplingParams(max_tokens=16)))
                    if isinstance(t, GeneratedToken)])


async def until(condition, timeout: float = 10.0) -> bool:
    for _ in range(int(timeout / 0.01)):
        if condition():
            return True
        await asyncio.sleep(0.01)
    return condition()


def test_the_next_prompt_goes_once_the_previous_ones_first_token_is_out(held):
    make, upstream = held
    engine = make(prefill_concurrency=1)
    upstream.answer = "Sure, done."

    async def scenario():
        first = asyncio.create_task(answer(engine, "Task A."))
        assert await until(lambda: upstream.arrived == [0])
        second = asyncio.create_task(answer(engine, "Task B."))
        await asyncio.sleep(0.3)
        held_back = list(upstream.arrived), engine.prefill_gate.active, engine.prefill_gate.waiting
        upstream.released[0].set()  # A's prompt is processed: its first token comes, the rest later
        sent_after_first = await until(lambda: upstream.arrived == [0, 1])
        a_still_open = not first.done()
        upstream.let_through()
        return held_back, sent_after_first and a_still_open, *await asyncio.wait_for(asyncio.gather(first, second), 10)

    held_back, sent_after_first, first, second = asyncio.run(scenario())
    assert held_back == ([0], 1, 1)  # B held a slot, but waited for A's prompt
    assert sent_after_first
    assert first == second == "Sure, done."
    gate = engine.prefill_gate
    assert (gate.active, gate.waiting) == (0, 0) and gate.wait_seconds > 0  # B's wait is counted


def test_with_no_limit_every_prompt_goes_at_once(held):
    make, upstream = held
    engine = make()  # the default: every prompt at once

    async def scenario():
        tasks = [asyncio.create_task(answer(engine, f"Task {n}.")) for n in range(3)]
        all_sent = await until(lambda: sorted(upstream.arrived) == [0, 1, 2])
        upstream.let_through()
        return all_sent, await asyncio.gather(*tasks)

    all_sent, answers = asyncio.run(scenario())
    assert all_sent and answers == ["Hello!"] * 3
    assert engine.prefill_concurrency == 0 and engine.prefill_gate.enter() is None


def test_a_request_that_ends_in_its_prompt_passes_its_turn_on_and_a_waiter_that_leaves_takes_none(held):
    make, upstream = held
    engine = make(prefill_concurrency=1)

    async def scenario():
        first = asyncio.create_task(answer(engine, "Task A."))
        assert await until(lambda: upstream.arrived == [0])
        leaver = asyncio.create_task(answer(engine, "Task B."))
        third = asyncio.create_task(answer(engine, "Task C."))
        assert await until(lambda: engine.prefill_gate.waiting == 2)
        leaver.cancel()  # its client went away while it waited for its turn
        first.cancel()   # and A's went away while the engine processed A's prompt
        sent = await until(lambda: upstream.arrived == [0, 1])
        upstream.let_through()
        return sent, await asyncio.wait_for(third, 10)

    sent, third = asyncio.run(scenario())
    assert sent and third == "Hello!"
    assert upstream.arrived == [0, 1]  # the one that left never reached the engine
    assert (engine.prefill_gate.active, engine.prefill_gate.waiting) == (0, 0)


def test_each_replica_gets_its_own_gate_with_the_setting(tokenizer_dir):
    upstreams = [FakeUpstream("llama-server", smollm2_tokenizer()) for _ in range(2)]
    try:
        engine = create_engine(ServerConfig(engine="upstream", family="chatml", tokenizer=tokenizer_dir,
                                            upstream_url=tuple(u.url for u in upstreams), prefill_concurrency=3))
        try:
            gates = [replica.engine.prefill_gate for replica in engine.replicas]
            assert [g.limit for g in gates] == [3, 3] and gates[0] is not gates[1]
            assert engine.describe()["prefill_concurrency"] == 3
            limits = {sample.labels["url"]: sample.value for collector in engine.metric_collectors()
                      for family in collector.collect() if family.name == "maya:engine_prefill_limit"
                      for sample in family.samples}
            assert limits == {u.url: 3 for u in upstreams}
        finally:
            asyncio.run(engine.close())
    finally:
        for upstream in upstreams:
            upstream.stop()


def test_the_gate_is_in_the_status_and_the_metrics(held):
    make, _ = held
    engine = make(prefill_concurrency=2)
    assert engine.describe()["prefill_concurrency"] == 2
    samples = {sample.name: sample.value for collector in engine.metric_collectors()
               for family in collector.collect() for sample in family.samples}
    assert samples["maya:engine_prefill_limit"] == 2
    assert samples["maya:engine_prefill_active"] == 0 and samples["maya:engine_prefill_waiting"] == 0
    assert samples["maya:engine_prefill_wait_seconds_total"] == 0
