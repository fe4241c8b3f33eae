"""Streaming overhead of /v1/chat/completions over the raw embedded engine loop.

Prints tokens/s of (a) the raw LlamaCppEngine loop and (b) a streamed chat
completion through a real server and the OpenAI SDK, same model, prompt and
token count, alternating in one run; the ratio (b)/(a) is the figure
(target ≥ 0.97). Timings are noisy on shared machines: the script repeats and
reports the median of each.

    .venv/bin/python bench/stream_overhead.py [--tokens 200] [--rounds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from maya_server.config import ServerConfig, default_model_path  # noqa: E402
from maya_server.dialects import get_dialect  # noqa: E402
from maya_server.conversation import Conversation, Message, TextPart  # noqa: E402
from maya_server.engine.base import Generation, SamplingParams  # noqa: E402
from maya_server.engine.llamacpp import LlamaCppEngine  # noqa: E402
from tests.server import RunningServer  # noqa: E402

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


def server_stream_rate(server: RunningServer, tokens: int) -> float:
    client = server.client()
    started = time.perf_counter()
    stream = client.chat.completions.create(
        model="m", messages=[{"role": "user", "content": PROMPT}], temperature=0, max_tokens=tokens,
        stream=True, stream_options={"include_usage": True},
    )
    usage = None
    for chunk in stream:
        usage = chunk.usage or usage
    return usage.completion_tokens / (time.perf_counter() - started)


def main() -> None:
    args = argparse.ArgumentParser()
    args.add_argument("--tokens", type=int, default=200)
    args.add_argument("--rounds", type=int, default=5)
    opts = args.parse_args()
    model = default_model_path()
    engine = LlamaCppEngine(model, context_size=2048, threads=2)
    dialect = get_dialect("chatml")
    conversation = Conversation(turns=(Message("user", (TextPart(PROMPT),)),))
    prompt_ids = dialect.render(conversation).token_ids(engine.tokenizer)
    server = RunningServer(ServerConfig(engine="llamacpp", model=model, family="chatml", ctx=2048), engine)
    raw, served = [], []
    try:
        server_stream_rate(server, 8)  # warm up both paths once
        for _ in range(opts.rounds):
            raw.append(raw_engine_rate(engine, prompt_ids, opts.tokens))
            served.append(server_stream_rate(server, opts.tokens))
    finally:
        server.stop()
    raw_rate, served_rate = statistics.median(raw), statistics.median(served)
    print(f"raw engine loop:            {raw_rate:7.1f} tok/s (median of {opts.rounds})")
    print(f"/v1/chat/completions stream: {served_rate:7.1f} tok/s (median of {opts.rounds})")
    print(f"ratio: {served_rate / raw_rate:.3f} (target >= 0.97)")


if __name__ == "__main__":
    main()
