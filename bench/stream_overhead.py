"""Streaming overhead of /v1/chat/completions and /v1/responses over the raw embedded engine loop.

Prints tokens/s of (a) the raw LlamaCppEngine loop in this process, (b) a
streamed chat completion and (c) a streamed response from a real `maya`
server process, read with the OpenAI SDK: same model, prompt, thread count and
token count, taking turns in one run (never two at once); the ratios (b)/(a)
and (c)/(a) are the figures (target ≥ 0.97).
The server runs in its own process so the client's parsing does not share its
interpreter. Timings are noisy on shared machines: each side is measured
several times and the medians are compared.

    .venv/bin/python bench/stream_overhead.py [--tokens 200] [--rounds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path

from openai import OpenAI

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from maya_process import start_maya  # noqa: E402

from maya_server.config import default_model_path  # noqa: E402
from maya_server.conversation import Conversation, Message, TextPart  # noqa: E402
from maya_server.dialects import get_dialect  # noqa: E402
from maya_server.engine.base import Generation, SamplingParams  # noqa: E402
from maya_server.engine.llamacpp import LlamaCppEngine  # noqa: E402

PROMPT = "Write a long story about a lighthouse keeper and a storm."


def raw_engine_rate(engine: LlamaCppEngine, prompt_ids: list[int], tokens: int) -> float:
    async def run() -> float:
        generation = Generation(prompt_ids, SamplingParams(max_tokens=tokens, temperature=0.0, stop_token_ids=frozenset()))
        started = time.perf_counter()
        count = 0
        async for _ in engine.generate(generation):
            count += 1
        return count / (time.perf_counter() - started)

    return asyncio.run(run())


def server_stream_rate(url: str, tokens: int) -> float:
    client = OpenAI(base_url=url + "/v1", api_key="bench")
    started = time.perf_counter()
    stream = client.chat.completions.create(
        model="m", messages=[{"role": "user", "content": PROMPT}], temperature=0, max_tokens=tokens,
        stream=True, stream_options={"include_usage": True},
    )
    usage = None
    for chunk in stream:
        usage = chunk.usage or usage
    return usage.completion_tokens / (time.perf_counter() - started)


def responses_stream_rate(url: str, tokens: int) -> float:
    client = OpenAI(base_url=url + "/v1", api_key="bench")
    started = time.perf_counter()
    usage = None
    for event in client.responses.create(
        model="m", input=PROMPT, temperature=0, max_output_tokens=tokens, stream=True
    ):
        if event.type in ("response.completed", "response.incomplete"):
            usage = event.response.usage
    return usage.output_tokens / (time.perf_counter() - started)


def main() -> None:
    args = argparse.ArgumentParser()
    args.add_argument("--tokens", type=int, default=200)
    args.add_argument("--rounds", type=int, default=5)
    args.add_argument("--threads", type=int, default=1,
                      help="decode threads; on 2 cores, 2 decode threads plus server plus client oversubscribe "
                           "the machine and the ratio then measures CPU contention as well")
    opts = args.parse_args()
    model = default_model_path()
    engine = LlamaCppEngine(model, context_size=2048, threads=opts.threads)
    conversation = Conversation(turns=(Message("user", (TextPart(PROMPT),)),))
    prompt_ids = get_dialect("chatml").render(conversation).token_ids(engine.tokenizer)
    process, url = start_maya("--model", model, "--family", "chatml", "--ctx", "2048", "--threads", str(opts.threads))
    raw, chat, responses = [], [], []
    try:
        server_stream_rate(url, 8)  # warm up every path once
        responses_stream_rate(url, 16)
        raw_engine_rate(engine, prompt_ids, 8)
        for _ in range(opts.rounds):
            raw.append(raw_engine_rate(engine, prompt_ids, opts.tokens))
            chat.append(server_stream_rate(url, opts.tokens))
            responses.append(responses_stream_rate(url, opts.tokens))
    finally:
        process.terminate()
        process.wait(timeout=30)
    raw_rate = statistics.median(raw)
    print(f"threads={opts.threads} tokens={opts.tokens} rounds={opts.rounds} (medians)")
    print(f"raw engine loop:              {raw_rate:7.1f} tok/s")
    for name, rates in (("/v1/chat/completions", chat), ("/v1/responses", responses)):
        rate = statistics.median(rates)
        print(f"{name + ' stream:':30s}{rate:7.1f} tok/s  ratio {rate / raw_rate:.3f} (target >= 0.97)")


if __name__ == "__main__":
    main()
