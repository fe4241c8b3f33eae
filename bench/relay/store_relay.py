"""Maya's CPU per relayed token with `--store redis` against `--store memory`, in front of the replay upstream.

Every request is a streamed Responses request with `store: true` (each one is saved: one Lua script on
Redis), relayed from the replay upstream (`replay.py`) at a GPU-like rate per stream. Measured in one run,
cells alternating so every configuration sees the same machine:

  * memory: one Maya, `--store memory`, all the streams;
  * redis: one Maya, `--store redis://…` (a redis-server started here on loopback), all the streams;
  * redis half: one Maya on Redis with half the streams (what each of two replicas carries);
  * redis x2: two Maya replicas on the same Redis, the streams shared out (each replica's own CPU per token);

and printed: Maya µs per token (its threads' CPU ÷ tokens, as `relay_bench.py` counts it), the ratios
redis ÷ memory and (redis x2, per replica) ÷ (redis half), and Redis's own CPU and round trips per stored
response: what the fleet shares (Redis's CPU includes the replicas' 2 s health probes).

    .venv/bin/python bench/relay/store_relay.py [--rate 50] [--streams 16] [--tokens 256] [--seconds 8] [--rounds 2]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
for path in (str(ROOT), str(ROOT / "bench")):
    if path not in sys.path:
        sys.path.insert(0, path)

import orjson  # noqa: E402

from maya_process import start_maya  # noqa: E402

from bench.relay.relay_bench import cpu_seconds, run_client  # noqa: E402
from bench.relay.replay import ReplayUpstream  # noqa: E402
from maya_server.config import default_model_path  # noqa: E402
from tests.gguf_model_dir import write_model_dir  # noqa: E402
from tests.redis_server import RedisServer, command  # noqa: E402


ROUND_TRIPS = ("evalsha", "eval", "ping")
"""Commands only a client sends (Redis counts the scripts' own commands too: SET, GET... are no round trips here;
the scope salt's one GET and SET per replica are left out)."""


def redis_figures(url: str, pid: int) -> tuple[float, int]:
    """(Redis's CPU seconds so far, round trips clients have made to it)."""
    stats = command(url, "INFO", "commandstats")
    return cpu_seconds(pid), sum(int(stats.get(f"cmdstat_{name}", {}).get("calls", 0)) for name in ROUND_TRIPS)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--format", default="vllm")
    parser.add_argument("--rate", type=float, default=50)
    parser.add_argument("--streams", type=int, default=16)
    parser.add_argument("--tokens", type=int, default=256)
    parser.add_argument("--seconds", type=float, default=8)
    parser.add_argument("--rounds", type=int, default=2)
    opts = parser.parse_args()
    meta = json.loads((HERE / "recordings" / "meta.json").read_text())
    body = orjson.dumps({"model": "m", "input": meta["prompt_text"], "max_output_tokens": opts.tokens,
                         "temperature": 0, "stream": True, "store": True})
    print(f"{os.cpu_count()} CPUs shared by Maya, Redis, the replay and the client; {opts.streams} streams at "
          f"{opts.rate:g} tok/s each, {opts.tokens} tokens a request, store:true; load {os.getloadavg()[0]:.2f}",
          flush=True)
    redis = RedisServer()
    replay = ReplayUpstream(opts.format, opts.rate or None, slots=64)
    upstream = replay.start()
    mayas = []
    try:
        with tempfile.TemporaryDirectory() as work:
            tokenizer = str(write_model_dir(default_model_path(), Path(work) / "smollm2"))
            common = ["--engine", "upstream", "--upstream-url", upstream, "--tokenizer", tokenizer,
                      "--family", "chatml", "--upstream-slots", "64", "--max-queue", "256"]
            env_limits = ["--store-command-timeout", "5"]
            configs = {
                "memory": [start_maya(*common)],
                "redis": [start_maya(*common, "--store", redis.url, *env_limits)],
                "redis half": [start_maya(*common, "--store", redis.url, "--store-prefix", "half:", *env_limits)],
                "redis x2": [start_maya(*common, "--store", redis.url, "--store-prefix", "pair:", *env_limits)
                             for _ in range(2)],
            }
            streams = {"memory": opts.streams, "redis": opts.streams, "redis half": opts.streams // 2,
                       "redis x2": opts.streams}
            mayas = [process for group in configs.values() for process, _ in group]
            for group in configs.values():  # warm up each path once
                run_client([url for _, url in group], "responses", body, len(group), 0)
            totals = {name: [0.0, 0, 0] for name in configs}  # cpu per replica summed, tokens, requests
            shared = {name: [0.0, 0] for name in configs}  # redis cpu, commands
            for _ in range(opts.rounds):
                for name, group in configs.items():
                    before = redis_figures(redis.url, redis.process.pid)
                    report, cpus = run_client([url for _, url in group], "responses", body, streams[name],
                                              opts.seconds, tuple(process.pid for process, _ in group))
                    after = redis_figures(redis.url, redis.process.pid)
                    totals[name][0] += sum(cpus) / len(group)
                    totals[name][1] += report["tokens"] / len(group)
                    totals[name][2] += report["requests"]
                    shared[name][0] += after[0] - before[0]
                    shared[name][1] += after[1] - before[1]
                    if report["errors"]:
                        print(f"{name}: {report['errors']} errors", flush=True)
    finally:
        for process in mayas:
            process.terminate()
        for process in mayas:
            process.wait(timeout=30)
        replay.stop()
        redis.stop()
    per_token = {name: cpu / max(tokens, 1) * 1e6 for name, (cpu, tokens, _) in totals.items()}
    print(f"{'configuration':14s}{'Maya µs/tok':>13s}{'responses':>11s}{'Redis µs/resp':>15s}{'Redis cmds/resp':>17s}")
    for name, (cpu, tokens, requests) in totals.items():
        redis_cpu, commands = shared[name]
        print(f"{name:14s}{per_token[name]:13.1f}{requests:11d}{redis_cpu / max(requests, 1) * 1e6:15.1f}"
              f"{commands / max(requests, 1):17.2f}")
    print(f"redis ÷ memory, Maya CPU per token: {per_token['redis'] / per_token['memory']:.3f}")
    print(f"each of two replicas ÷ one alone at the same load (all on Redis): "
          f"{per_token['redis x2'] / per_token['redis half']:.3f}")


if __name__ == "__main__":
    main()
