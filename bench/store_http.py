"""Stored responses through HTTP: one Maya on memory against one Maya on a loopback Redis, in one run.

Two Maya processes (`bench/maya_process.py`), the scripted engine, the same settings but `--store`: one keeps
responses in its memory, the other in a redis-server this bench starts on a free loopback port in a throwaway
directory (as the tests do: `tests/redis_server.py`). Each builds a 40-turn and a 500-turn stored chain
(user 300, answer 1200 characters a turn), then, alternating the two servers request by request so both see the
same machine (which of the two goes first changes every round), times with one HTTP client (httpx, keep-alive):

  * first: a `store: true` first turn (no history) — generating it and saving it;
  * chain40: continuing the 40-turn chain's tip with `store: false` (the history read, rendered, generated);
  * tip500: the same at the 500-turn chain's tip (~750 KB of stored history).

Printed: p50 and p95 (ms) per server and Redis ÷ memory. Then what each kind of request costs Redis, measured by
running `--cost-requests` more of it against the Redis Maya alone between two reads of INFO (commandstats and
stats): commands, bytes Redis received and sent, and Redis's own CPU µs (the sum of commandstats' usec), per
request. The Redis Maya's probe (every 2 s: one script and an INFO) is in those figures too; it is small beside
them. From the CPU figure: how many such requests one Redis core answers per second (1e6 ÷ µs), and so how many
replicas at 3 turns/s each one Redis core serves.

    .venv/bin/python bench/store_http.py [--rounds 100] [--cost-requests 40] [--block-cache-bytes N]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from maya_process import start_maya  # noqa: E402
from tests.redis_server import RedisServer  # noqa: E402

USER, ANSWER = 300, 1200
KINDS = ("first", "chain40", "tip500")
TURNS_PER_REPLICA = 3.0


def turn(client: httpx.Client, url: str, text: str, previous: str | None, store: bool) -> tuple[str, float]:
    body = {"model": "scripted", "input": text, "store": store, "max_output_tokens": 4096}
    if previous:
        body["previous_response_id"] = previous
    started = time.perf_counter()
    answer = client.post(url + "/v1/responses", json=body)
    elapsed = time.perf_counter() - started
    if answer.status_code != 200:
        raise RuntimeError(f"{url}: {answer.status_code} {answer.text[:300]}")
    return answer.json()["id"], elapsed


def chain(client: httpx.Client, url: str, depth: int) -> str:
    tip = None
    for n in range(depth):
        tip, _ = turn(client, url, f"Turn {n}: " + "q" * USER, tip, True)
    return tip


def one(client: httpx.Client, url: str, kind: str, tips: dict, n: int) -> float:
    question = f"Question {n}: " + "q" * USER
    if kind == "first":
        return turn(client, url, question, None, True)[1]
    return turn(client, url, question, tips[kind], False)[1]


def redis_figures(redis_client) -> tuple[int, int, int, int]:
    """(commands, usec, bytes Redis received, bytes it sent), Redis's totals now."""
    stats = redis_client.info("commandstats")
    calls = sum(int(v["calls"]) for k, v in stats.items() if k.startswith("cmdstat_") and k != "cmdstat_info")
    usec = sum(int(v["usec"]) for k, v in stats.items() if k.startswith("cmdstat_") and k != "cmdstat_info")
    net = redis_client.info("stats")
    return calls, usec, int(net["total_net_input_bytes"]), int(net["total_net_output_bytes"])


def p(samples: list[float], q: int) -> float:
    return statistics.quantiles(samples, n=100)[q - 1] * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=100)
    parser.add_argument("--cost-requests", type=int, default=40)
    parser.add_argument("--block-cache-bytes", type=int, default=None,
                        help="--store-block-cache-bytes of the Redis Maya (default: its own default)")
    args = parser.parse_args()
    import redis as redis_py

    workdir = Path(tempfile.mkdtemp(prefix="maya-bench-store-http-"))
    script = workdir / "script.json"
    script.write_text(json.dumps(["Answer: " + "a" * (ANSWER - 8)]))
    common = ["--engine", "scripted", "--script", str(script), "--ctx", "400000"]
    for name, value in (("CACHE_ENTRIES", 5000), ("CACHE_BYTES", 1 << 31), ("OWNER_ENTRIES", 5000),
                        ("OWNER_BYTES", 1 << 31)):  # room for both chains and every timed turn
        os.environ["MAYA_GLM_RESPONSES_" + name] = str(value)
    redis = RedisServer()
    processes = []
    try:
        extra = ["--store-block-cache-bytes", str(args.block_cache_bytes)] if args.block_cache_bytes is not None else []
        for name, options in (("memory", []), ("redis", ["--store", redis.url, *extra])):
            process, url = start_maya(*common, *options)
            processes.append((name, process, url))
        urls = {name: url for name, _, url in processes}
        client = httpx.Client(timeout=120)
        started = time.perf_counter()
        tips = {name: {"chain40": chain(client, url, 40), "tip500": chain(client, url, 500)} for name, url in urls.items()}
        built = time.perf_counter() - started
        times = {(name, kind): [] for name in urls for kind in KINDS}
        for n in range(args.rounds):
            order = list(urls.items()) if n % 2 == 0 else list(urls.items())[::-1]  # neither always goes first
            for kind in KINDS:
                for name, url in order:
                    times[(name, kind)].append(one(client, url, kind, tips[name], n))
        print(f"store through HTTP, scripted engine: {args.rounds} rounds, chains of 40 and 500 turns "
              f"(user {USER}, answer {ANSWER} chars; chains built in {built:.0f} s)")
        print(f"{'request':10s}{'memory p50':>12s}{'p95':>9s}{'redis p50':>12s}{'p95':>9s}{'p50 ×':>8s}{'p95 ×':>8s}  (ms)")
        for kind in KINDS:
            m, r = times[("memory", kind)], times[("redis", kind)]
            print(f"{kind:10s}{p(m, 50):12.2f}{p(m, 95):9.2f}{p(r, 50):12.2f}{p(r, 95):9.2f}"
                  f"{p(r, 50) / p(m, 50):8.2f}{p(r, 95) / p(m, 95):8.2f}")
        watcher = redis_py.Redis.from_url(redis.url)
        print(f"Redis per request ({args.cost_requests} requests of each kind, the Redis Maya alone):")
        print(f"{'request':10s}{'commands':>10s}{'bytes in':>11s}{'bytes out':>11s}{'CPU µs':>9s}"
              f"{'req/s/core':>12s}{'replicas@3/s':>14s}")
        for kind in KINDS:
            before = redis_figures(watcher)
            for n in range(args.cost_requests):
                one(client, urls["redis"], kind, tips["redis"], 10_000 + n)
            after = redis_figures(watcher)
            calls, usec, got, sent = ((a - b) / args.cost_requests for a, b in zip(after, before))
            rate = 1e6 / usec if usec else float("inf")
            print(f"{kind:10s}{calls:10.1f}{got:11,.0f}{sent:11,.0f}{usec:9.0f}{rate:12,.0f}"
                  f"{rate / TURNS_PER_REPLICA:14,.0f}")
        status = client.get(urls["redis"] + "/v1/status").json()
        cache = status.get("responses", {}).get("cache", {}).get("block_cache")
        if cache is not None:
            print(f"block cache of the Redis Maya: {cache}")
    finally:
        for _, process, _ in processes:
            process.terminate()
            process.wait(timeout=10)
        redis.stop()


if __name__ == "__main__":
    main()
