"""A burst of new prompts on the embedded engine: their time to first token with prompts sent in turn and together.

`--burst` streamed Chat requests, each with its own prompt of about `--prompt-tokens`
tokens (no prefix shared with any other, so nothing comes from cache), are sent at
once to Maya's embedded engine with `--slots` at least the burst, so every request has a
slot at once and only the engine's prompt processing stands between it and its first
token. Maya runs twice, `--prefill-concurrency 1` (each prompt is sent once the previous
one's first token is out) and `0` (the default: all sent at once, processed together);
llama-server alone (its own `/v1/chat/completions`, the same flags as Maya's
child) gets the same bursts for scale. Rounds alternate between the three, so machine
drift hits all alike. Printed per server: the mean and the longest time to first token
over all requests, and the mean ÷ Maya's at `0`, the same rounds' ratio.

    .venv/bin/python bench/prefill_burst.py [--burst 4] [--prompt-tokens 300] [--rounds 3] [--threads 1]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import threading
from pathlib import Path

from openai import OpenAI

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from agent_trace import WORDS, llama_server_alone  # noqa: E402
from maya_process import start_maya  # noqa: E402
from streamed_chat import stream_chat  # noqa: E402

from maya_server.config import default_model_path  # noqa: E402
from tests.gguf_model_dir import smollm2_tokenizer  # noqa: E402


def prompt(seed: int, tokens: int, count_tokens) -> str:
    """A prompt of about `tokens` tokens that shares no prefix with another seed's."""
    rng = random.Random(seed)
    words = [f"Request {seed}: summarise"]
    while count_tokens(" ".join(words)) < tokens:
        words.append(rng.choice(WORDS))
    return " ".join(words) + "."


def burst(url: str, prompts: list[str]) -> list[float]:
    """Every prompt at once, each in its own thread; their times to first token."""
    times: list[float] = [0.0] * len(prompts)
    failures: list[BaseException] = []

    def ask(index: int) -> None:
        client = OpenAI(base_url=url + "/v1", api_key="bench", timeout=600, max_retries=0)
        try:
            times[index], _, _ = stream_chat(client, "m", [{"role": "user", "content": prompts[index]}], 4)
        except Exception as exc:  # reported after the others finish
            failures.append(exc)

    threads = [threading.Thread(target=ask, args=(i,)) for i in range(len(prompts))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if failures:
        raise failures[0]
    return times


def main() -> None:
    args = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    args.add_argument("--burst", type=int, default=4)
    args.add_argument("--prompt-tokens", type=int, default=300)
    args.add_argument("--rounds", type=int, default=3)
    args.add_argument("--threads", type=int, default=1, help="llama-server threads (all three servers)")
    args.add_argument("--verbose", action="store_true", help="print each burst's times to first token")
    opts = args.parse_args()
    model = default_model_path()
    tokenizer = smollm2_tokenizer(model)
    count = lambda text: len(tokenizer.encode(text, special=False))  # noqa: E731
    slots, ctx = opts.burst, 2048
    servers: dict[str, str] = {}
    stops = []
    try:
        alone = llama_server_alone(model, slots, ctx, opts.threads, 2048)
        stops.append(alone.stop)
        servers["llama-server alone"] = alone.url
        for limit in ("1", "0"):
            process, url = start_maya("--model", model, "--ctx", str(ctx), "--slots", str(slots), "--threads",
                                      str(opts.threads), "--prefill-concurrency", limit, timeout=300)
            stops.append(lambda p=process: (p.terminate(), p.wait(timeout=30)))
            servers[f"Maya, prefill concurrency {limit}"] = url
        times: dict[str, list[float]] = {name: [] for name in servers}
        print(f"burst of {opts.burst} prompts of ~{opts.prompt_tokens} tokens, {slots} slots, "
              f"{opts.threads} thread(s), {opts.rounds} rounds", flush=True)
        seed = 0
        for _ in range(opts.rounds):
            for name, url in servers.items():
                prompts = [prompt(seed + i, opts.prompt_tokens, count) for i in range(opts.burst)]
                seed += opts.burst
                got = burst(url, prompts)
                times[name] += got
                if opts.verbose:
                    print(f"  {name:34s} " + " ".join(f"{t:6.2f}" for t in sorted(got)), flush=True)
        together = statistics.mean(times["Maya, prefill concurrency 0"])
        for name, values in times.items():
            mean = statistics.mean(values)
            print(f"{name:34s} TTFT mean {mean:6.2f} s  longest {max(values):6.2f} s  "
                  f"mean ÷ Maya at 0 {mean / together:.3f}", flush=True)
    finally:
        for stop in stops:
            stop()


if __name__ == "__main__":
    main()
