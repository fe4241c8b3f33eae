"""How long a background task goes without an owner: from its replica's death to the first event of another
replica that resumed it (issue 46).

One redis-server on loopback (tests/redis_server.py), replica B kept running, and for each run a fresh owner A:
a task is created on A (scripted engine, 2,000 tokens at 0.01 s), a reader follows it through B, and once it has
seen 20 text deltas A is killed (`kill -9`) or stopped (`SIGTERM`). B's script writes other words than A's
(`b0 b1 …` after A's `a0 a1 …`), so its first delta is recognisable; the time from the signal to that delta
arriving at the reader is the figure (detection + claim + rebuilding + prefill + first flush + the reader's tail).
Three modes: `kill -9` with `--job-lease-s` at its default (10 s) and at 2 s, and SIGTERM with
`--job-shutdown-grace-s 0` (the hand-over). Prints p50/p95 over `--runs` runs per mode, and checks that every
stream was gapless and ended `response.completed`.

    .venv/bin/python bench/job_handover.py [--runs 5]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.maya_process import MayaProcess  # noqa: E402
from tests.redis_server import RedisServer  # noqa: E402
from tests.responses.api.sse import iter_frames  # noqa: E402

A_TEXT = " ".join(f"a{n}" for n in range(2000))
B_TEXT = " ".join(f"b{n}" for n in range(20))
DELAY = 0.01


class Follower(threading.Thread):
    """Reads a task's stream through one replica, noting when each event arrived."""

    def __init__(self, replica: MayaProcess, response_id: str) -> None:
        super().__init__(daemon=True)
        self.replica, self.response_id = replica, response_id
        self.events: list[tuple[float, dict]] = []
        self.start()

    def run(self) -> None:
        with self.replica.http(120) as http, \
                http.stream("GET", f"/v1/responses/{self.response_id}?stream=true") as answer:
            for _, data in iter_frames(answer.iter_lines()):
                self.events.append((time.monotonic(), json.loads(data)))

    def deltas(self) -> int:
        return sum(event["type"] == "response.output_text.delta" for _, event in list(self.events))


def one_run(directory: Path, redis: RedisServer, prefix: str, b: MayaProcess, mode: str) -> float:
    script = directory / f"a-{uuid.uuid4().hex[:6]}.json"
    script.write_text(json.dumps([A_TEXT]))
    args = ["--store", redis.url, "--store-prefix", prefix]
    if mode == "kill9-lease2":
        args += ["--job-lease-s", "2"]
    if mode == "sigterm-grace0":
        args += ["--job-shutdown-grace-s", "0"]
    a = MayaProcess("a", script, *args, delay=DELAY)
    try:
        with a.http() as http:
            job = http.post("/v1/responses", json={"model": "m", "input": "go", "background": True,
                                                   "store": True}).json()
        follower = Follower(b, job["id"])
        deadline = time.monotonic() + 60
        while follower.deltas() < 20 and time.monotonic() < deadline:
            time.sleep(0.01)
        signalled = time.monotonic()
        if mode == "sigterm-grace0":
            a.terminate()
        else:
            a.process.kill()
        follower.join(120)
    finally:
        a.close()
    events = [event for _, event in follower.events]
    numbers = [event["sequence_number"] for event in events]
    assert numbers == list(range(len(events))) and events[-1]["type"] == "response.completed", events[-3:]
    first = next(at for at, event in follower.events
                 if event["type"] == "response.output_text.delta" and "b" in event["delta"])
    return first - signalled


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    runs = parser.parse_args().runs
    directory = Path(tempfile.mkdtemp(prefix="maya-handover-"))
    redis = RedisServer()  # its own throwaway directory
    try:
        for mode in ("kill9-lease10", "kill9-lease2", "sigterm-grace0"):
            prefix = f"bench-{uuid.uuid4().hex[:8]}:"
            script = directory / f"b-{mode}.json"
            script.write_text(json.dumps([B_TEXT]))
            b = MayaProcess("b", script, "--store", redis.url, "--store-prefix", prefix, delay=DELAY)
            try:
                times = sorted(one_run(directory, redis, prefix, b, mode) for _ in range(runs))
            finally:
                b.close()
            p95 = times[min(len(times) - 1, round(0.95 * (len(times) - 1)))]
            print(f"{mode:16} runs {runs}: owner's death → first resumed event p50 {statistics.median(times):.2f} s, "
                  f"p95 {p95:.2f} s (min {times[0]:.2f}, max {times[-1]:.2f})", flush=True)
    finally:
        redis.stop()


if __name__ == "__main__":
    main()
