"""Background responses under load: many tasks, each followed by readers that keep reconnecting, on one
replica in memory and on several replicas sharing one Redis.

Starts Maya servers in subprocesses (scripted engine, `--tokens` tokens a task at `--rate` tokens/s, one
engine slot per task so tasks really run side by side), creates `--tasks` background responses, and attaches
`--readers` readers to each. Every reader reads a random 20..120 events, disconnects, and reconnects with
`starting_after=<last sequence number it saw>`, until the terminal event. Then it checks that every reader
received every event exactly once and in order, and prints tokens/s delivered, reconnect latency (p50/p95,
from the request to its response headers and to its first event), the servers' CPU seconds per 1,000
delivered events and their peak RSS.

`--store memory` runs one replica with today's in-process job table (as before). `--store redis` starts its
own redis-server on loopback in a temporary directory and `--replicas` Maya processes on it: tasks are
created round-robin over the replicas, readers start round-robin, and each reconnect goes through a
different replica than the one before. It also prints Redis's cost per 1,000 relayed tokens: round trips
(redis-server's `total_reads_processed`: one read event per request or pipeline) and commands
(`INFO commandstats` calls, commands inside Lua scripts included). `--store both` (the default) runs
memory on one replica, then Redis on `--replicas`, with the same load, and prints the ratios redis/memory.

    .venv/bin/python bench/background_readers.py [--store both] [--replicas 2] [--tasks 16] [--readers 3]
                                                 [--tokens 500] [--rate 1000]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import orjson
from maya_process import free_port, start_maya

TERMINAL = {"response.completed", "response.incomplete", "response.failed"}
TICKS = os.sysconf("SC_CLK_TCK")


def serve(port: int, tasks: int, tokens: int, rate: float, store: str, prefix: str) -> None:
    """One server process: a scripted engine with one slot per task, limits sized for the load."""
    import uvicorn

    from maya_server.app import create_app
    from maya_server.config import ServerConfig
    from maya_server.engine.scripted import ScriptedEngine

    readers = str(tasks * 8)
    environ = {
        "MAYA_GLM_RESPONSES_JOB_WORKERS": str(min(tasks, 32)), "MAYA_GLM_RESPONSES_JOB_ENTRIES": str(tasks),
        "MAYA_GLM_RESPONSES_JOB_OWNER_ENTRIES": str(tasks), "MAYA_GLM_RESPONSES_STREAM_READERS": readers,
        "MAYA_GLM_RESPONSES_STREAM_OWNER_READERS": readers, "MAYA_GLM_RESPONSES_CACHE_ENTRIES": str(tasks),
    }
    engine = ScriptedEngine(["tok " * tokens], context_size=8192, delay=1 / rate, slots=tasks)
    config = ServerConfig(engine="scripted", family="chatml", ctx=8192, environ=environ, store=store,
                          store_prefix=prefix)
    uvicorn.run(create_app(config, engine), host="127.0.0.1", port=port, log_level="warning")


# -- processes --------------------------------------------------------------------------------
def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def peak_rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


class Redis:
    """A throwaway redis-server on a free loopback port (no persistence), stopped by `stop`."""

    def __init__(self) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            sys.exit("redis-server is not installed (Debian: apt-get install redis-server; `make redis-server`)")
        self.directory = tempfile.mkdtemp(prefix="maya-bench-redis-")
        self.port = free_port()
        self.process = subprocess.Popen(
            [binary, "--port", str(self.port), "--bind", "127.0.0.1", "--dir", self.directory, "--save", "",
             "--appendonly", "no", "--daemonize", "no", "--logfile", os.path.join(self.directory, "redis.log")],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        import redis

        self.client = redis.Redis(host="127.0.0.1", port=self.port)
        deadline = time.monotonic() + 10
        while True:
            try:
                self.client.ping()
                break
            except redis.ConnectionError:
                if time.monotonic() > deadline or self.process.poll() is not None:
                    raise RuntimeError("redis-server did not start")
                time.sleep(0.05)

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def counts(self) -> tuple[int, dict[str, int]]:
        """(round trips, calls by command) so far, less the two INFO calls that read them."""
        reads = self.client.info("stats")["total_reads_processed"]
        stats = self.client.info("commandstats")
        calls = {name.removeprefix("cmdstat_"): entry["calls"] for name, entry in stats.items()}
        calls["info"] = calls.get("info", 0) - 2
        return reads - 2, calls

    def stop(self) -> None:
        self.client.close()
        self.process.terminate()
        self.process.wait(timeout=10)
        shutil.rmtree(self.directory, ignore_errors=True)


# -- the load ---------------------------------------------------------------------------------
@dataclass
class Connection:
    resumed: bool
    to_headers: float
    to_first_event: float | None = None


@dataclass
class ReaderResult:
    seen: list[int] = field(default_factory=list)
    connections: list[Connection] = field(default_factory=list)


async def follow(clients: list[httpx.AsyncClient], first: int, response_id: str, rng: random.Random) -> ReaderResult:
    """One reconnecting reader: its first connection through `clients[first]`, each reconnect through the next
    replica (a different one whenever there are several)."""
    result = ReaderResult()
    turn = first
    while True:
        client = clients[turn % len(clients)]
        turn += 1
        query = "stream=true" + (f"&starting_after={result.seen[-1]}" if result.seen else "")
        budget = rng.randint(20, 120)
        started = time.perf_counter()
        async with client.stream("GET", f"/v1/responses/{response_id}?{query}") as answer:
            connection = Connection(bool(result.seen), time.perf_counter() - started)
            result.connections.append(connection)
            if answer.status_code != 200:
                raise RuntimeError(f"reader got {answer.status_code}: {(await answer.aread())[:200]!r}")
            async for line in answer.aiter_lines():
                if not line.startswith("data: "):
                    continue
                if connection.to_first_event is None:
                    connection.to_first_event = time.perf_counter() - started
                event = orjson.loads(line[6:])
                result.seen.append(event["sequence_number"])
                if event["type"] in TERMINAL or event["type"] == "error":
                    return result
                budget -= 1
                if budget == 0:
                    break  # leave mid-stream; reconnect after the last event seen


async def load(urls: list[str], tasks: int, readers: int, seed: int) -> tuple[list[ReaderResult], int, float]:
    """(every reader's result, completed tasks, seconds from the first creation to the last reader's end)."""
    per_replica = tasks * readers + 16
    limits = httpx.Limits(max_connections=per_replica, max_keepalive_connections=per_replica)
    clients = [httpx.AsyncClient(base_url=url, timeout=120, limits=limits) for url in urls]
    try:
        body = {"model": "m", "input": "Long request", "background": True, "store": True}
        started = time.perf_counter()
        created = await asyncio.gather(*(clients[n % len(clients)].post("/v1/responses", json=body)
                                         for n in range(tasks)))
        for answer in created:
            if answer.status_code != 200:
                raise RuntimeError(f"creation got {answer.status_code}: {answer.text[:200]}")
        ids = [answer.json()["id"] for answer in created]
        rng = random.Random(seed)
        results = await asyncio.gather(*(follow(clients, n * readers + r, rid, random.Random(rng.random()))
                                         for n, rid in enumerate(ids) for r in range(readers)))
        elapsed = time.perf_counter() - started
        finals = [(await clients[-1].get(f"/v1/responses/{rid}")).json() for rid in ids]
    finally:
        for client in clients:
            await client.aclose()
    completed = sum(final["status"] == "completed" for final in finals)
    return results, completed, elapsed


@dataclass
class Run:
    label: str
    results: list[ReaderResult]
    completed: int
    elapsed: float
    cpu: float
    rss: float
    tokens: int
    redis_round_trips: int | None = None
    redis_commands: int | None = None
    redis_by_command: dict[str, int] = field(default_factory=dict)

    @property
    def delivered(self) -> int:
        return sum(len(r.seen) for r in self.results)

    @property
    def delivered_tokens(self) -> int:
        return len(self.results) * self.tokens

    def reconnects(self, attribute: str) -> list[float]:
        return [getattr(c, attribute) for r in self.results for c in r.connections
                if c.resumed and getattr(c, attribute) is not None]


def run(label: str, store: str, replicas: int, args) -> Run:
    redis = Redis() if store == "redis" else None
    prefix = f"bench-{uuid.uuid4().hex[:8]}:"
    processes = []
    try:
        for _ in range(replicas):
            command = [sys.executable, __file__, "--tasks", str(args.tasks), "--tokens", str(args.tokens),
                       "--rate", str(args.rate), "--serve", "--serve-store", redis.url if redis else "memory",
                       "--serve-prefix", prefix]
            processes.append(start_maya(command=command))
        pids = [process.pid for process, _ in processes] + ([redis.process.pid] if redis else [])
        cpu_before = sum(cpu_seconds(pid) for pid in pids)
        counts_before = redis.counts() if redis else None
        results, completed, elapsed = asyncio.run(load([url for _, url in processes], args.tasks, args.readers,
                                                       args.seed))
        counts_after = redis.counts() if redis else None
        cpu = sum(cpu_seconds(pid) for pid in pids) - cpu_before
        rss = sum(peak_rss_mib(process.pid) for process, _ in processes)
    finally:
        for process, _ in processes:
            process.terminate()
        for process, _ in processes:
            process.wait(timeout=30)
        if redis:
            redis.stop()
    outcome = Run(label, results, completed, elapsed, cpu, rss, args.tokens)
    if counts_before is not None:
        outcome.redis_round_trips = counts_after[0] - counts_before[0]
        before, after = counts_before[1], counts_after[1]
        outcome.redis_by_command = {name: calls - before.get(name, 0) for name, calls in after.items()
                                    if calls - before.get(name, 0) > 0}
        outcome.redis_commands = sum(outcome.redis_by_command.values())
    return outcome


def percentile(values: list[float], fraction: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def report(outcome: Run, args) -> None:
    streams = [r.seen for r in outcome.results]
    lengths = {len(seen) for seen in streams}
    exact = all(seen == list(range(len(seen))) for seen in streams) and len(lengths) == 1
    connections = sum(len(r.connections) for r in outcome.results)
    headers, first = outcome.reconnects("to_headers"), outcome.reconnects("to_first_event")
    print(f"== {outcome.label}: {outcome.completed}/{args.tasks} completed in {outcome.elapsed:.2f}s; "
          f"readers {len(streams)}, connections {connections}, events delivered {outcome.delivered}, "
          f"events a reader {sorted(lengths)}")
    print(f"   every reader got every event exactly once, in order: {exact}")
    print(f"   tokens/s delivered: {outcome.delivered_tokens / outcome.elapsed:.0f} "
          f"(events/s {outcome.delivered / outcome.elapsed:.0f})")
    print(f"   reconnect latency ms ({len(headers)} reconnects): to headers p50 {1000 * percentile(headers, .5):.1f} "
          f"p95 {1000 * percentile(headers, .95):.1f}; to first event p50 {1000 * percentile(first, .5):.1f} "
          f"p95 {1000 * percentile(first, .95):.1f}")
    print(f"   server CPU (Maya{' + Redis' if outcome.redis_commands is not None else ''}): {outcome.cpu:.2f}s, "
          f"{1000 * outcome.cpu / outcome.delivered:.3f} CPU-s per 1,000 delivered events; Maya peak RSS (all replicas) "
          f"{outcome.rss:.1f} MiB")
    if outcome.redis_commands is not None:
        generated = args.tasks * args.tokens
        print(f"   Redis per 1,000 relayed tokens (generated, {generated}): round trips "
              f"{1000 * outcome.redis_round_trips / generated:.1f}, "
              f"commands {1000 * outcome.redis_commands / generated:.1f}; "
              f"per 1,000 delivered tokens ({outcome.delivered_tokens}): round trips "
              f"{1000 * outcome.redis_round_trips / outcome.delivered_tokens:.1f}")
        top = sorted(outcome.redis_by_command.items(), key=lambda item: -item[1])[:8]
        print("   Redis commands per 1,000 generated tokens: "
              + ", ".join(f"{name} {1000 * calls / generated:.0f}" for name, calls in top))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--store", choices=("memory", "redis", "both"), default="both")
    parser.add_argument("--replicas", type=int, default=2, help="Maya processes on the Redis (memory: always 1)")
    parser.add_argument("--tasks", type=int, default=16)
    parser.add_argument("--readers", type=int, default=3)
    parser.add_argument("--tokens", type=int, default=500)
    parser.add_argument("--rate", type=float, default=1000.0, help="tokens per second per task")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--serve-store", default="memory", help=argparse.SUPPRESS)
    parser.add_argument("--serve-prefix", default="maya:", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.port, args.tasks, args.tokens, args.rate, args.serve_store, args.serve_prefix)
        return

    print(f"{args.tasks} tasks x {args.readers} readers, {args.tokens} tokens a task at {args.rate:.0f} tokens/s")
    runs = {}
    if args.store in ("memory", "both"):
        runs["memory"] = run("memory, 1 replica", "memory", 1, args)
        report(runs["memory"], args)
    if args.store in ("redis", "both"):
        runs["redis"] = run(f"redis, {args.replicas} replicas", "redis", args.replicas, args)
        report(runs["redis"], args)
    if len(runs) == 2:
        memory, redis = runs["memory"], runs["redis"]
        m_first, r_first = memory.reconnects("to_first_event"), redis.reconnects("to_first_event")
        rate = (redis.delivered_tokens / redis.elapsed) / (memory.delivered_tokens / memory.elapsed)
        print(f"== redis/memory: tokens/s delivered {rate:.3f}, "
              f"reconnect to first event p50 {percentile(r_first, .5) / percentile(m_first, .5):.2f} "
              f"p95 {percentile(r_first, .95) / percentile(m_first, .95):.2f}, "
              f"CPU per delivered event {(redis.cpu / redis.delivered) / (memory.cpu / memory.delivered):.2f}")


if __name__ == "__main__":
    main()
