"""Two llama-server replicas behind one Maya: prefix affinity against round-robin, on an agent trace.

The trace: SESSIONS conversations (more than the replicas' slots together) share
~1.2k tokens of instructions (the system message), and each runs TURNS turns of a
~30-token user message and a 24-token answer (greedy), all sessions at once, each
one turn after another with a seeded pause of up to 1.5 s before each (the agent's
tool running), sending its whole history every turn (Chat Completions,
streamed, `include_usage`). Two plain llama-server processes of the shipped model
(SmolLM2-135M, 2 slots of 2048 tokens each, one thread each: this machine has two
cores; slots chosen least recently used, see `LRU_SLOTS`) are the replicas; Maya
runs in its own process with both `--upstream-url`s, once with
`--replica-routing affinity` and once with `round-robin`, the replicas
restarted in between so that neither run finds the other's cache. Each run prints
the share of continuation prompts (turns 2..TURNS) served from the engine's cache
(`cached_tokens / prompt_tokens`, summed) and the continuation TTFT (median and p90,
client-side, from sending to the first text delta: Maya's queue included), and
first turns' TTFT beside them; then affinity's figures over round-robin's.

`--mayas 2`: two Maya processes in front of the same two replicas, sharing one
real redis-server (`--store redis://…`, tests/redis_server.py), and each session
alternating between them turn by turn (session s sends turn t to Maya (s + t) mod 2),
as a load balancer without sticky sessions does. Three runs then: `shared` (affinity,
the Mayas sharing where each prompt went through Redis, `engine/replicas/shared_affinity.py`),
`local` (affinity, each Maya on its own table: `--replica-affinity-shared-ttl-s 0`)
and `round-robin` (each Maya its own turn counter, as plain load balancing).

    .venv/bin/python bench/replica_affinity.py [--sessions 8] [--turns 4] [--instructions-tokens 1200] [--lcp-slots]
    .venv/bin/python bench/replica_affinity.py --mayas 2 --sessions 4 --turns 4
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import httpx
from openai import OpenAI

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from continuation_ttft import WORDS, notes  # noqa: E402
from maya_process import start_maya  # noqa: E402

from maya_server.config import default_model_path  # noqa: E402
from tests.gguf_model_dir import smollm2_tokenizer, write_model_dir  # noqa: E402
from tests.llama_server import LlamaServer  # noqa: E402

SLOTS_PER_REPLICA, CTX_PER_SLOT = 2, 2048
ANSWER_TOKENS = 24
LRU_SLOTS = ("--slot-prompt-similarity", "0")
"""llama-server's own slot choice, by default, puts a prompt in the slot sharing the longest prefix with it,
and with shared instructions that is one slot for every session: each overwrites the last, whose state its
RAM prompt cache then does not keep, so no conversation finds more than the instructions cached, however
it is routed (`--lcp-slots` shows it). With the similarity off, slots are taken least recently used first
and the RAM prompt cache keeps and restores each conversation: what a replica holds is then what it was
sent, which is what routing decides. Both routings run with the same replica flags."""
TOOL_TIME_S = (0.0, 1.5)
"""An agent's pause before each turn (its tool running), seeded per session: turns of different sessions then
arrive in no fixed order, as they do from real agents (in lockstep, round-robin would send session i to replica
i mod 2 every turn by accident)."""


@dataclass(frozen=True)
class Turn:
    session: int
    turn: int
    ttft: float
    prompt_tokens: int
    cached_tokens: int


def user_message(session: int, turn: int) -> str:
    """About 30 tokens, different for every session and turn from its first word."""
    rng = random.Random(session * 1000 + turn)
    words = " ".join(rng.choice(WORDS) for _ in range(22))
    return f"Task {session}.{turn}: list what links {words}."


def run_session(urls: list[str], instructions: str, session: int, turns: int, results: list[Turn]) -> None:
    clients = [OpenAI(base_url=url + "/v1", api_key="bench", timeout=600, max_retries=0) for url in urls]
    history = [{"role": "system", "content": instructions}]
    pauses = random.Random(session)
    for turn in range(turns):
        time.sleep(pauses.uniform(*TOOL_TIME_S))
        history.append({"role": "user", "content": user_message(session, turn)})
        started, ttft, text, usage = time.perf_counter(), None, [], None
        client = clients[(session + turn) % len(clients)]  # the alternating client (one Maya: always it)
        for chunk in client.chat.completions.create(
                model="m", messages=history, temperature=0, max_tokens=ANSWER_TOKENS, stream=True,
                stream_options={"include_usage": True}):
            if chunk.choices and chunk.choices[0].delta.content:
                ttft = ttft or time.perf_counter() - started
                text.append(chunk.choices[0].delta.content)
            usage = chunk.usage or usage
        history.append({"role": "assistant", "content": "".join(text)})
        cached = usage.prompt_tokens_details.cached_tokens if usage.prompt_tokens_details else 0
        results.append(Turn(session, turn, ttft or time.perf_counter() - started, usage.prompt_tokens, cached or 0))


ROUTINGS = {"affinity": ("--replica-routing", "affinity"), "round-robin": ("--replica-routing", "round-robin")}
FLEET_ROUTINGS = {"shared": ("--replica-routing", "affinity"),
                  "local": ("--replica-routing", "affinity", "--replica-affinity-shared-ttl-s", "0"),
                  "round-robin": ("--replica-routing", "round-robin")}
"""`--mayas 2`: every Maya is given the same Redis; only `shared` shares the affinity through it."""


def run_trace(routing: str, model: str, tokenizer_dir: str, instructions: str, opts, log_dir: Path,
              redis_url: str | None = None) -> list[Turn]:
    flags = () if opts.lcp_slots else LRU_SLOTS
    replicas = [LlamaServer(model, ctx=SLOTS_PER_REPLICA * CTX_PER_SLOT, parallel=SLOTS_PER_REPLICA, threads=1,
                            log_path=log_dir / f"{routing}-{i}.log", extra_args=flags) for i in range(2)]
    processes = []
    try:
        urls = [arg for r in replicas for arg in ("--upstream-url", r.url)]
        store = ("--store", redis_url, "--store-prefix", f"bench-{routing}:") if redis_url else ()
        routing_flags = (FLEET_ROUTINGS if redis_url else ROUTINGS)[routing]
        mayas = []
        for _ in range(opts.mayas):
            process, url = start_maya("--engine", "upstream", *urls, "--tokenizer", tokenizer_dir, "--family",
                                      "chatml", *routing_flags, *store)
            processes.append(process)
            mayas.append(url)
        results: list[Turn] = []
        threads = [threading.Thread(target=run_session, args=(mayas, instructions, s, opts.turns, results))
                   for s in range(opts.sessions)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        ROUTES[routing] = routes(mayas)
        return results
    finally:
        for process in processes:
            process.terminate()
            process.wait(timeout=30)
        for replica in replicas:
            replica.stop()


ROUTES: dict[str, Counter] = {}
"""Per run: requests routed by reason, and shared lookups' hits, summed over the Mayas (from their metrics)."""


def routes(mayas: list[str]) -> Counter:
    found: Counter = Counter()
    for url in mayas:
        for line in httpx.get(url + "/metrics/prometheus", timeout=10).text.splitlines():
            if line.startswith("maya:replica_routes_total{"):
                found[line.split('reason="')[1].split('"')[0]] += float(line.rsplit(" ", 1)[1])
            elif line.startswith("maya:replica_affinity_shared_hits_total "):
                found["shared hits"] += float(line.rsplit(" ", 1)[1])
    return found


def summary(results: list[Turn]) -> dict:
    later = [t for t in results if t.turn > 0]
    ttfts = sorted(t.ttft for t in later)
    return {
        "cached": sum(t.cached_tokens for t in later) / sum(t.prompt_tokens for t in later),
        "ttft": statistics.median(ttfts),
        "p90": ttfts[int(0.9 * (len(ttfts) - 1))],
        "first": statistics.median(t.ttft for t in results if t.turn == 0),
        "prompt": statistics.median(t.prompt_tokens for t in later),
    }


def main() -> None:
    args = argparse.ArgumentParser()
    args.add_argument("--sessions", type=int, default=8)
    args.add_argument("--turns", type=int, default=4)
    args.add_argument("--instructions-tokens", type=int, default=1200)
    args.add_argument("--mayas", type=int, default=1,
                      help="Maya processes sharing one redis-server, each session alternating between them")
    args.add_argument("--log-dir", help="keep the replicas' llama-server logs here (ROUTING-N.log)")
    args.add_argument("--lcp-slots", action="store_true",
                      help="leave llama-server's slot choice by prompt similarity on (its default; see LRU_SLOTS)")
    opts = args.parse_args()
    model = default_model_path()
    tokenizer = smollm2_tokenizer(model)
    instructions = notes(7, opts.instructions_tokens, lambda text: len(tokenizer.encode(text, special=False)))
    with tempfile.TemporaryDirectory() as scratch:
        tokenizer_dir = str(write_model_dir(model, Path(scratch) / "smollm2"))
        log_dir = Path(opts.log_dir or scratch)
        log_dir.mkdir(parents=True, exist_ok=True)
        if opts.mayas > 1:
            from tests.redis_server import RedisServer

            redis = RedisServer()
            try:
                figures = {routing: summary(run_trace(routing, model, tokenizer_dir, instructions, opts, log_dir,
                                                      redis.url))
                           for routing in FLEET_ROUTINGS}
            finally:
                redis.stop()
        else:
            figures = {routing: summary(run_trace(routing, model, tokenizer_dir, instructions, opts, log_dir))
                       for routing in ROUTINGS}
    best = "shared" if opts.mayas > 1 else "affinity"
    fleet = f"{opts.mayas} Mayas (alternating client, one Redis) x " if opts.mayas > 1 else ""
    print(f"{fleet}2 llama-server replicas x {SLOTS_PER_REPLICA} slots ({'LCP' if opts.lcp_slots else 'LRU'} slot choice), "
          f"{opts.sessions} sessions x {opts.turns} turns, "
          f"~{opts.instructions_tokens}-token shared instructions, {ANSWER_TOKENS}-token answers "
          f"(continuation prompt median {figures[best]['prompt']:.0f} tokens)")
    for routing, f in figures.items():
        print(f"{routing:12s} continuation cached {f['cached']:.3f}   "
              f"continuation TTFT median {f['ttft'] * 1000:7.0f} ms  p90 {f['p90'] * 1000:7.0f} ms   first-turn TTFT median {f['first'] * 1000:7.0f} ms")
        print(f"{'':12s} routed: " + ", ".join(f"{reason} {count:.0f}" for reason, count in sorted(ROUTES[routing].items())
                                                 if count))
    a, r = figures[best], figures["round-robin"]
    print(f"{best} / round-robin: cached ratio {a['cached'] / r['cached']:.2f}x, "
          f"continuation TTFT {a['ttft'] / r['ttft']:.2f}x (median), {a['p90'] / r['p90']:.2f}x (p90)")


if __name__ == "__main__":
    main()
