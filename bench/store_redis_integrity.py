"""What the Redis store's integrity checks cost: begin() of a 40-turn chain with the READ script that checks every
key (the lineage's length, every block, the envelope) against the READ before the checks (taken from git), in
one run, alternating; and one RECOUNT of a store of N entries.

On a real redis-server (loopback, started here, a throwaway directory). Printed: p50 and p99 of begin() per READ,
and the RECOUNT's time (min and median of a few runs) with the entries it counted.

    .venv/bin/python bench/store_redis_integrity.py [--depth 40] [--rounds 400] [--entries 10000]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from maya_server.config import ServerConfig  # noqa: E402
from maya_server.responses.settings import ResponsesSettings  # noqa: E402
from maya_server.responses.store.opening import open_store  # noqa: E402
from tests.redis_server import RedisServer  # noqa: E402

OWNER = "bench"
BEFORE = "90d8ab3"
"""The commit whose READ had no integrity checks."""


def old_read() -> str:
    source = subprocess.run(["git", "show", f"{BEFORE}:maya_server/responses/store/redis_lua.py"], cwd=ROOT,
                            capture_output=True, text=True, check=True).stdout
    scope: dict = {}
    exec(compile(source, "old_store_redis_lua", "exec"), scope)
    return scope["READ"]


def item(item_id: str, role: str, text: str) -> dict:
    kind = "input_text" if role == "user" else "output_text"
    return {"id": item_id, "type": "message", "role": role, "status": "completed",
            "content": [{"type": kind, "text": text}]}


def response(rid: str, out: dict) -> dict:
    return {"id": rid, "object": "response", "created_at": 1, "status": "completed", "completed_at": 2,
            "error": None, "incomplete_details": None, "model": "m", "previous_response_id": None, "tools": [],
            "output": [out], "usage": {"input_tokens": 1, "output_tokens": 1}}


async def chain(store, depth: int, prefix: str) -> str:
    base, rid = None, ""
    for n in range(depth):
        rid = f"{prefix}{n}"
        await store.put(OWNER, response(rid, item(f"{rid}-out", "assistant", "a" * 400)),
                        [item(f"{rid}-in", "user", "q" * 300)], base)
        if base:
            base.release()
        base = await store.begin(OWNER, rid)
    base.release()
    return rid


def pct(values: list[float], q: float) -> float:
    return sorted(values)[min(len(values) - 1, int(q * len(values)))] * 1e6


async def main(args) -> None:
    redis = RedisServer()
    try:
        cfg = ServerConfig(engine="scripted", store=redis.url, store_prefix="bench:")
        store = open_store(cfg, ResponsesSettings(cache_entries=args.entries + 10), clock=time.time)
        tip = await chain(store, args.depth, "c")
        reads = {"checked": store._scripts["READ"], "unchecked": store.link.script(old_read())}
        times: dict[str, list[float]] = {name: [] for name in reads}
        for _ in range(args.rounds):
            for name, script in reads.items():
                store._scripts["READ"] = script
                started = time.perf_counter()
                history = await store.begin(OWNER, tip)
                times[name].append(time.perf_counter() - started)
                history.release()
        store._scripts["READ"] = reads["checked"]
        print(f"begin() of a {args.depth}-turn chain ({2 * args.depth} items), {args.rounds} rounds:")
        for name, values in times.items():
            print(f"  {name:9s} p50 {pct(values, 0.5):7.0f} us   p99 {pct(values, 0.99):7.0f} us")

        filled = time.perf_counter()
        for n in range(0, args.entries - args.depth, 4):
            await chain(store, 4, f"f{n}-")
        print(f"filled {args.entries} entries in {time.perf_counter() - filled:.1f} s")
        runs = []
        for _ in range(5):
            started = time.perf_counter()
            await store.recount()
            runs.append(time.perf_counter() - started)
        print(f"RECOUNT of {store.fleet['entries']} entries ({store.fleet['bytes']} bytes): "
              f"min {min(runs) * 1e3:.0f} ms, median {statistics.median(runs) * 1e3:.0f} ms")
        await store.close()
    finally:
        redis.stop()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--depth", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=400)
    parser.add_argument("--entries", type=int, default=10_000)
    asyncio.run(main(parser.parse_args()))
