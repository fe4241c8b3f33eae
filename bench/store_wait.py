"""What `--store-wait-replicas 1` costs a stored turn: p50 and p90 of `POST /v1/responses` with `store: true`,
waiting for a replica ÷ not, in one run.

A real Redis primary and one replica on loopback (`REPLICAOF`), two Mayas on the scripted engine (a two-word
answer, so the store's write is most of the turn) sharing the primary under their own prefixes, one with the
flag; the turns alternate between them (the machine's noise falls on both). Loopback replication is the best
case: across hosts WAIT adds at least one network round trip to the replica.

    .venv/bin/python bench/store_wait.py [--turns 200]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.redis_server import RedisServer, command  # noqa: E402
from tests.scripted import RecordingScriptedEngine  # noqa: E402
from tests.server import RunningServer, scripted_config, wait_for  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--turns", type=int, default=200)
    args = parser.parse_args()
    primary, replica = RedisServer(), RedisServer()
    command(replica.url, "REPLICAOF", "127.0.0.1", str(primary.port))
    assert wait_for(lambda: command(replica.url, "ROLE")[3] == b"connected", 20.0)
    servers = {
        "wait 0": RunningServer(scripted_config(store=primary.url, store_prefix="a:"), RecordingScriptedEngine(["Kept."])),
        "wait 1": RunningServer(scripted_config(store=primary.url, store_prefix="b:", store_wait_replicas=1),
                                RecordingScriptedEngine(["Kept."])),
    }
    times: dict[str, list[float]] = {name: [] for name in servers}
    try:
        clients = {name: httpx.Client(base_url=server.url, timeout=30) for name, server in servers.items()}
        for turn in range(args.turns + 10):
            for name, client in clients.items():
                started = time.perf_counter()
                answer = client.post("/v1/responses", json={"model": "m", "input": f"turn {turn}", "store": True})
                assert answer.status_code == 200, answer.text
                if turn >= 10:  # the first ones warm the pools and the scripts
                    times[name].append(time.perf_counter() - started)
    finally:
        for server in servers.values():
            server.stop()
        replica.stop()
        primary.stop()
    for name, measured in times.items():
        cuts = statistics.quantiles(measured, n=10)
        print(f"{name}: p50 {statistics.median(measured) * 1000:.2f} ms, p90 {cuts[8] * 1000:.2f} ms "
              f"({len(measured)} stored turns)")
    print(f"p50 ratio, waiting for 1 replica ÷ not: "
          f"{statistics.median(times['wait 1']) / statistics.median(times['wait 0']):.3f}")


if __name__ == "__main__":
    main()
