"""Background responses under load: many tasks, each followed by readers that keep reconnecting.

Starts a Maya server in a subprocess (scripted engine, `--tokens` tokens a task at
`--rate` tokens/s, one engine slot per task so tasks really run side by side),
creates `--tasks` background responses, and attaches `--readers` readers to each.
Every reader reads a random 20..120 events, disconnects, and reconnects with
`starting_after=<last sequence number it saw>`, until the terminal event. Then it
checks that every reader received every event exactly once and in order, and
prints the server process's CPU seconds per 1,000 delivered events and its
peak RSS.

    .venv/bin/python bench/background_readers.py [--tasks 64] [--readers 4] [--tokens 500] [--rate 1000]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import sys
import time
from pathlib import Path

import httpx
import orjson
from maya_process import start_maya

TERMINAL = {"response.completed", "response.incomplete", "response.failed"}
TICKS = os.sysconf("SC_CLK_TCK")


def serve(port: int, tasks: int, tokens: int, rate: float) -> None:
    """The server process: a scripted engine with one slot per task, limits sized for the load."""
    import uvicorn

    from maya_server.app import create_app
    from maya_server.config import ServerConfig
    from maya_server.engine.scripted import ScriptedEngine

    readers = str(tasks * 8)
    environ = {
        "MAYA_GLM_RESPONSES_JOB_WORKERS": "32", "MAYA_GLM_RESPONSES_JOB_ENTRIES": str(tasks),
        "MAYA_GLM_RESPONSES_JOB_OWNER_ENTRIES": str(tasks), "MAYA_GLM_RESPONSES_STREAM_READERS": readers,
        "MAYA_GLM_RESPONSES_STREAM_OWNER_READERS": readers, "MAYA_GLM_RESPONSES_CACHE_ENTRIES": str(tasks),
    }
    engine = ScriptedEngine(["tok " * tokens], context_size=8192, delay=1 / rate, slots=tasks)
    config = ServerConfig(engine="scripted", family="chatml", ctx=8192, environ=environ)
    uvicorn.run(create_app(config, engine), host="127.0.0.1", port=port, log_level="warning")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def peak_rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


async def follow(client: httpx.AsyncClient, response_id: str, rng: random.Random) -> tuple[list[int], int]:
    """(sequence numbers received, connections made) for one reconnecting reader."""
    seen: list[int] = []
    connections = 0
    while True:
        query = "stream=true" + (f"&starting_after={seen[-1]}" if seen else "")
        budget = rng.randint(20, 120)
        connections += 1
        async with client.stream("GET", f"/v1/responses/{response_id}?{query}") as answer:
            if answer.status_code != 200:
                raise RuntimeError(f"reader got {answer.status_code}: {(await answer.aread())[:200]!r}")
            async for line in answer.aiter_lines():
                if not line.startswith("data: "):
                    continue
                event = orjson.loads(line[6:])
                seen.append(event["sequence_number"])
                if event["type"] in TERMINAL or event["type"] == "error":
                    return seen, connections
                budget -= 1
                if budget == 0:
                    break  # leave mid-stream; reconnect after the last event seen


async def load(url: str, tasks: int, readers: int, seed: int) -> tuple[list[list[int]], int, int]:
    limits = httpx.Limits(max_connections=tasks * readers + 16, max_keepalive_connections=tasks * readers + 16)
    async with httpx.AsyncClient(base_url=url, timeout=120, limits=limits) as client:
        body = {"model": "m", "input": "Long request", "background": True, "store": True}
        created = await asyncio.gather(*(client.post("/v1/responses", json=body) for _ in range(tasks)))
        ids = [answer.json()["id"] for answer in created]
        rng = random.Random(seed)
        results = await asyncio.gather(*(follow(client, rid, random.Random(rng.random()))
                                         for rid in ids for _ in range(readers)))
        finals = [(await client.get(f"/v1/responses/{rid}")).json() for rid in ids]
    completed = sum(final["status"] == "completed" for final in finals)
    return [seen for seen, _ in results], sum(n for _, n in results), completed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", type=int, default=64)
    parser.add_argument("--readers", type=int, default=4)
    parser.add_argument("--tokens", type=int, default=500)
    parser.add_argument("--rate", type=float, default=1000.0, help="tokens per second per task")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.port, args.tasks, args.tokens, args.rate)
        return

    command = [sys.executable, __file__, "--tasks", str(args.tasks), "--tokens", str(args.tokens),
               "--rate", str(args.rate), "--serve"]
    process, url = start_maya(command=command)
    try:
        cpu_before = cpu_seconds(process.pid)
        started = time.perf_counter()
        streams, connections, completed = asyncio.run(load(url, args.tasks, args.readers, args.seed))
        elapsed = time.perf_counter() - started
        cpu = cpu_seconds(process.pid) - cpu_before
        rss = peak_rss_mib(process.pid)
    finally:
        process.terminate()
        process.wait(timeout=30)

    delivered = sum(len(seen) for seen in streams)
    in_order = all(seen == list(range(len(seen))) for seen in streams)
    lengths = {len(seen) for seen in streams}
    print(f"{args.tasks} tasks x {args.readers} readers, {args.tokens} tokens a task at {args.rate:.0f} tokens/s: "
          f"{completed}/{args.tasks} completed in {elapsed:.2f}s")
    print(f"readers: {len(streams)}, connections: {connections}, events delivered: {delivered}, "
          f"events a reader: {sorted(lengths)}")
    print(f"every reader got every event exactly once, in order: {in_order and len(lengths) == 1}")
    print(f"server CPU: {cpu:.2f}s, {1000 * cpu / delivered:.3f} CPU-seconds per 1,000 delivered events")
    print(f"server peak RSS: {rss:.1f} MiB")


if __name__ == "__main__":
    main()
