"""The response store on Redis against memory: what storing and continuing a 500-turn chain costs.

Builds the same chain as `store_chain.py` (request parsing → stored input items, the assembler's final
snapshot → put) in a `MemoryStore` and in a `RedisStore` on a real redis-server (loopback, started here,
a throwaway directory), then, alternating the two so both see the same machine, times per round:

  * store: one new response (no history) put, as a `store: true` first turn is saved;
  * continuation: the chain's tip read for a continuation (its whole history), the next turn put
    after it, the history released (then the new turn is deleted again, untimed).

Printed: p50 and p99 of each, per backend, and Redis ÷ memory. Redis's figures include the loopback
round trips (a store is one Lua script; a continuation is two: the read, which with this replica's block cache
checks every block in Redis and sends none it holds, and the put) and decoding what the read sends.

    .venv/bin/python bench/store_redis_chain.py [--depth 500] [--rounds 300]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from maya_server.config import ServerConfig  # noqa: E402
from maya_server.neutral.events import Finished, TextDelta, Usage  # noqa: E402
from maya_server.responses.assembly.assembler import ResponseAssembler  # noqa: E402
from maya_server.responses.request.request import parse_responses_request  # noqa: E402
from maya_server.responses.settings import ResponsesSettings  # noqa: E402
from maya_server.responses.store.opening import open_store  # noqa: E402
from maya_server.responses.persistence.stored_items import stored_input_items  # noqa: E402
from tests.redis_server import RedisServer  # noqa: E402

OWNER = "bench"


def finished(request, text: str, rid: str | None = None) -> dict:
    assembler = ResponseAssembler(request, model="m", response_id=rid)
    assembler.opening()
    assembler.on_event(TextDelta(text))
    assembler.on_event(Finished("stop", Usage(100, 90, 300, 0)))
    return assembler.snapshot()


async def turn(store, previous: str | None, n: int, user: int, answer: int) -> str:
    body = {"model": "m", "store": True, "input": f"Turn {n}: " + "q" * user}
    if previous:
        body["previous_response_id"] = previous
    request = parse_responses_request(body)
    snapshot = finished(request, f"Answer {n}: " + "a" * answer)
    base = await store.begin(OWNER, previous) if previous else None
    items = stored_input_items(request.input, [item["id"] for item in base.items()] if base else ())
    await store.put(OWNER, snapshot, items, base)
    if base:
        base.release()
    return snapshot["id"]


async def chain(store, depth: int, user: int, answer: int) -> str:
    tip = None
    for n in range(depth):
        tip = await turn(store, tip, n, user, answer)
    return tip


async def store_once(store, n: int, user: int, answer: int) -> float:
    request = parse_responses_request({"model": "m", "store": True, "input": "q" * user})
    snapshot = finished(request, "a" * answer, f"resp_single_{n}")
    items = stored_input_items(request.input)
    started = time.perf_counter()
    await store.put(OWNER, snapshot, items)
    elapsed = time.perf_counter() - started
    await store.delete(OWNER, snapshot["id"])
    return elapsed


async def continue_once(store, tip: str, n: int, user: int, answer: int) -> float:
    request = parse_responses_request({"model": "m", "store": True, "previous_response_id": tip,
                                       "input": "Next: " + "q" * user})
    snapshot = finished(request, "a" * answer, f"resp_next_{n}")
    items = [{**item, "id": f"msg_next_{n}"} for item in stored_input_items(request.input)]
    started = time.perf_counter()
    base = await store.begin(OWNER, tip)
    base.items()  # the history as the request decodes it for the prompt
    await store.put(OWNER, snapshot, items, base)
    base.release()
    elapsed = time.perf_counter() - started
    await store.delete(OWNER, snapshot["id"])
    return elapsed


def quantiles(samples: list[float]) -> tuple[float, float]:
    cuts = statistics.quantiles(samples, n=100)
    return cuts[49] * 1e3, cuts[98] * 1e3


async def run(args: argparse.Namespace, redis_url: str) -> None:
    settings = ResponsesSettings(cache_entries=args.depth + 50, cache_bytes=1 << 32, entry_bytes=1 << 32,
                                 assembly_bytes=1 << 32)
    stores = {"memory": open_store(ServerConfig(engine="scripted"), settings),
              "redis": open_store(ServerConfig(engine="scripted", store=redis_url), settings)}
    tips = {name: await chain(store, args.depth, args.user_chars, args.answer_chars) for name, store in stores.items()}
    times = {(name, kind): [] for name in stores for kind in ("store", "continue")}
    for n in range(args.rounds):
        for name, store in stores.items():
            times[(name, "store")].append(await store_once(store, n, args.user_chars, args.answer_chars))
            times[(name, "continue")].append(await continue_once(store, tips[name], n, args.user_chars,
                                                                 args.answer_chars))
    print(f"{args.depth}-turn chain, {args.rounds} rounds (user {args.user_chars}, answer {args.answer_chars} chars)")
    print(f"{'operation':14s}{'memory p50':>12s}{'p99':>9s}{'redis p50':>12s}{'p99':>9s}{'p50 ×':>8s}{'p99 ×':>8s}  (ms)")
    for kind in ("store", "continue"):
        m50, m99 = quantiles(times[("memory", kind)])
        r50, r99 = quantiles(times[("redis", kind)])
        print(f"{kind:14s}{m50:12.3f}{m99:9.3f}{r50:12.3f}{r99:9.3f}{r50 / m50:8.1f}{r99 / m99:8.1f}")
    fleet = await stores["redis"].fresh_stats()
    script = (await stores["redis"].link.client.info("commandstats")).get("cmdstat_evalsha", {})
    print(f"redis: {fleet['entries']} entries, {fleet['bytes']} bytes counted; {fleet['commands']} round trips, "
          f"mean {fleet['command_seconds'] / fleet['commands'] * 1e3:.3f} ms as Maya waited for them, "
          f"{script.get('usec_per_call', 0):.0f} µs of Redis CPU per script (its own figure)")
    for store in stores.values():
        await store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--depth", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=300)
    parser.add_argument("--user-chars", type=int, default=300)
    parser.add_argument("--answer-chars", type=int, default=1200)
    args = parser.parse_args()
    redis = RedisServer()
    try:
        asyncio.run(run(args, redis.url))
    finally:
        redis.stop()


if __name__ == "__main__":
    main()
