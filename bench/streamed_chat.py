"""One streamed Chat Completions turn read with the OpenAI SDK, as the continuation benches time it."""

from __future__ import annotations

import time

from openai import OpenAI


def stream_chat(client: OpenAI, model: str, messages: list[dict], max_tokens: int):
    """Send `messages` (greedy, `include_usage`); returns the seconds to the first text delta (the whole
    answer's time when none came), the answer's text and its usage."""
    started = time.perf_counter()
    ttft, pieces, usage = None, [], None
    for chunk in client.chat.completions.create(
        model=model, messages=messages, temperature=0, max_tokens=max_tokens,
        stream=True, stream_options={"include_usage": True},
    ):
        delta = chunk.choices[0].delta.content if chunk.choices else None
        if delta and ttft is None:
            ttft = time.perf_counter() - started
        pieces.append(delta or "")
        usage = chunk.usage or usage
    return ttft if ttft is not None else time.perf_counter() - started, "".join(pieces), usage
