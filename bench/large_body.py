"""Does one large request body stall everyone else? /health latency while a big body is parsed.

Starts Maya in a subprocess (scripted engine), then POSTs a `--mib` MiB `/v1/responses` body
(many small input messages: the costly shape to parse and validate) while another client
polls `/health` every 10 ms. Prints the big request's status and time, and /health's median
and worst latency during it against an idle baseline: the ratio is the stall.

    .venv/bin/python bench/large_body.py [--mib 30]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx
import orjson

sys.path.insert(0, str(Path(__file__).parent))
from maya_process import start_maya  # noqa: E402


def health_latencies(url: str, stop: threading.Event, out: list[float]) -> None:
    with httpx.Client(base_url=url, timeout=60) as http:
        while not stop.is_set():
            started = time.perf_counter()
            http.get("/health")
            out.append(time.perf_counter() - started)
            time.sleep(0.01)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mib", type=float, default=30)
    args = parser.parse_args()
    message = {"role": "user", "content": "x" * 40}
    count = int(args.mib * 1024 * 1024 / len(orjson.dumps(message)))
    body = orjson.dumps({"input": [message] * count, "max_output_tokens": 16})
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as script:
        script.write('["ok"]')
    process, url = start_maya("--engine", "scripted", "--family", "chatml", "--script", script.name,
                              "--ctx", "100000000", "--max-body-bytes", str(len(body) + 1))
    try:
        idle: list[float] = []
        stop = threading.Event()
        poller = threading.Thread(target=health_latencies, args=(url, stop, idle))
        poller.start()
        time.sleep(2)
        stop.set()
        poller.join()
        busy: list[float] = []
        stop = threading.Event()
        poller = threading.Thread(target=health_latencies, args=(url, stop, busy))
        poller.start()
        started = time.perf_counter()
        answer = httpx.post(url + "/v1/responses", content=body, headers={"Content-Type": "application/json"},
                            timeout=600)
        took = time.perf_counter() - started
        stop.set()
        poller.join()
    finally:
        process.terminate()
        process.wait(timeout=30)
    print(f"body {len(body) / 2**20:.1f} MiB, {count} messages: HTTP {answer.status_code} in {took:.2f} s")
    print(f"/health idle: median {statistics.median(idle) * 1000:.1f} ms, worst {max(idle) * 1000:.1f} ms")
    print(f"/health during the big request: median {statistics.median(busy) * 1000:.1f} ms, "
          f"worst {max(busy) * 1000:.1f} ms ({len(busy)} probes); worst busy / worst idle = "
          f"{max(busy) / max(idle):.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
