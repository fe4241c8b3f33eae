"""What a sampled answer costs its continuation's prompt cache, with and without Maya's spelling memory.

One Maya (its embedded engine, the shipped model, one slot so nothing else takes the cache), conversations of
`--turns` turns run one after another, answers sampled (temperature 1, seeded). For each continuation the
shortfall is what the engine evaluated again of the history it had just generated:

    previous prompt tokens + previous completion tokens - this turn's cached tokens

0 or 1 (llama-server keeps the last sampled token's KV only once it evaluates it) means the whole history was
reused. Without the memory, an answer whose ids are not a tokenization of its text is re-tokenized differently
and the cache is lost from there on. Printed for `--spelling-memory-mib 16` and `0`, in one run.

    .venv/bin/python bench/spelled_history.py [--conversations 20] [--turns 4]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

from openai import OpenAI

sys.path.insert(0, str(Path(__file__).resolve().parent))

from maya_process import start_maya  # noqa: E402

TOPICS = "harbor lantern river meadow quarry copper violin orchard tunnel glacier ledger compass falcon ember".split()


def shortfalls(memory_mib: int, conversations: int, turns: int) -> list[int]:
    process, url = start_maya("--slots", "1", "--spelling-memory-mib", str(memory_mib), timeout=180)
    try:
        client = OpenAI(base_url=url + "/v1", api_key="unused")
        found = []
        for conversation in range(conversations):
            messages = [{"role": "system", "content": "You are a terse assistant."}]
            previous = None
            for turn in range(turns):
                topic = TOPICS[(conversation + turn) % len(TOPICS)]
                messages.append({"role": "user", "content": f"Tell me one thing about a {topic}."})
                reply = client.chat.completions.create(model="m", messages=messages, temperature=1.0, max_tokens=40,
                                                       seed=1000 + conversation * 10 + turn)
                usage = reply.usage
                cached = usage.prompt_tokens_details.cached_tokens if usage.prompt_tokens_details else 0
                if previous is not None:
                    found.append(previous - cached)
                previous = usage.prompt_tokens + usage.completion_tokens
                messages.append({"role": "assistant", "content": reply.choices[0].message.content})
        return found
    finally:
        process.terminate()
        process.wait(30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conversations", type=int, default=20)
    parser.add_argument("--turns", type=int, default=4)
    args = parser.parse_args()
    for memory_mib in (16, 0):
        found = shortfalls(memory_mib, args.conversations, args.turns)
        lost = sorted(s for s in found if s > 1)
        print(f"spelling memory {memory_mib:>2} MiB: {len(found)} continuations, {len(lost)} lost cache "
              f"(tokens evaluated again: {lost or 'none'}), mean shortfall {statistics.mean(found):.1f}", flush=True)


if __name__ == "__main__":
    main()
