"""Do huge prompts stall everyone else? A 2-character request's latency while six huge prompts are in flight.

Starts Maya in a subprocess on the embedded engine (its llama-server child, SmolLM2), then for each load,
`--rounds` times: six huge Chat prompts sent at once and, 0.2 s later, `"hi"` (one token to generate). Prints the
small request's median and worst latency against an idle baseline taken just before (target: worst <= 1 s),
what the huge ones were answered and how long they took, and Maya's and the child's RSS idle, at their peak and
after the load (does memory return to idle?). Two loads:

- `over`: 8 MB prompts (the issue's). No tokenization can fit them in the context: refused before tokenizing.
- `under`: prompts just under that bound (`--under-chars`), so each is tokenized by llama-server in full before
  its exact context check refuses it: the preparation lanes' case (six in the large lane, the small one in its
  own lane).

    .venv/bin/python bench/huge_prompts.py [--rounds 5] [--prepare-threads N]
"""

from __future__ import annotations

import argparse
import collections
import statistics
import sys
import threading
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).parent))
from maya_process import children, start_maya  # noqa: E402

HUGE = 6


def rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def small_request(http: httpx.Client) -> float:
    started = time.perf_counter()
    answer = http.post("/v1/chat/completions", json={"model": "m", "max_tokens": 1,
                                                     "messages": [{"role": "user", "content": "hi"}]})
    answer.raise_for_status()
    return time.perf_counter() - started


def send_huge(url: str, chars: int, tag: str, statuses: collections.Counter, took: list[float]) -> None:
    words = f"request {tag}: " + "lorem ipsum dolor sit amet " * (chars // 27 + 1)
    started = time.perf_counter()
    with httpx.Client(base_url=url, timeout=600) as http:
        answer = http.post("/v1/chat/completions", json={
            "model": "m", "max_tokens": 1, "messages": [{"role": "user", "content": words[:chars]}]})
    took.append(time.perf_counter() - started)
    code = answer.json().get("error", {}).get("code") if answer.status_code != 200 else "ok"
    statuses[f"{answer.status_code} {code}"] += 1


class Peak(threading.Thread):
    """The highest RSS of Maya and its child while the load runs, sampled every 50 ms."""

    def __init__(self, pids: dict[str, int]) -> None:
        super().__init__(daemon=True)
        self.pids, self.peak, self.stop = pids, {name: 0.0 for name in pids}, threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            for name, pid in self.pids.items():
                self.peak[name] = max(self.peak[name], rss_mib(pid))
            time.sleep(0.05)


def baseline(url: str) -> float:
    """The small request's median latency with nothing else in flight, just before a load."""
    with httpx.Client(base_url=url, timeout=600) as http:
        idle = [small_request(http) for _ in range(6)]
    return statistics.median(idle)


def load(url: str, pids: dict[str, int], chars: int, rounds: int) -> None:
    """`rounds` times: six huge prompts sent at once, the small request 0.2 s later, all awaited."""
    idle = baseline(url)
    statuses: collections.Counter = collections.Counter()
    huge_took: list[float] = []
    latencies = []
    peak = Peak(pids)
    peak.start()
    with httpx.Client(base_url=url, timeout=600) as http:
        for round_number in range(rounds):
            senders = [threading.Thread(target=send_huge, args=(url, chars, f"{round_number}-{i}", statuses, huge_took))
                       for i in range(HUGE)]
            for sender in senders:
                sender.start()
            time.sleep(0.2)  # the huge ones are uploaded and in flight
            latencies.append(small_request(http))
            for sender in senders:
                sender.join()
    peak.stop.set()
    peak.join()
    time.sleep(3)  # settled
    after = {name: rss_mib(pid) for name, pid in pids.items()}
    print(f"  2-char request idle just before: median {idle * 1000:.0f} ms")
    print(f"  2-char request with six in flight: median {statistics.median(latencies) * 1000:.0f} ms, "
          f"worst {max(latencies) * 1000:.0f} ms ({len(latencies)} rounds; target worst <= 1000 ms); "
          f"median in flight / idle = {statistics.median(latencies) / idle:.1f}x")
    print("  each round: " + ", ".join(f"{latency * 1000:.0f}" for latency in latencies) + " ms")
    print(f"  huge requests: {dict(statuses)}, each answered in median {statistics.median(huge_took):.2f} s, "
          f"worst {max(huge_took):.2f} s")
    for name in pids:
        print(f"  {name} RSS: peak {peak.peak[name]:.0f} MiB, 3 s after {after[name]:.0f} MiB")
    metrics = httpx.get(url + "/metrics/prometheus").text
    held = [line for line in metrics.splitlines() if line.startswith("maya:tokenize_cache_bytes ")]
    print(f"  of which the tokenize cache holds {float(held[0].split()[1]) / 2**20:.0f} MiB" if held else "")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--prepare-threads", help="Maya's --prepare-threads (default: Maya's own)")
    parser.add_argument("--over-mib", type=float, default=8)
    parser.add_argument("--under-chars", type=int, default=600_000,
                        help="prompt characters for the 'under' load (the bound is ctx x 81 = 663,552 here)")
    args = parser.parse_args()
    threads = ("--prepare-threads", args.prepare_threads) if args.prepare_threads else ()
    process, url = start_maya("--ctx", "8192", "--slots", "2", "--max-body-bytes", str(32 << 20), *threads,
                              timeout=180)
    try:
        child = children(process.pid)
        pids = {"maya": process.pid, **({"llama-server": child[0]} if child else {})}
        with httpx.Client(base_url=url, timeout=600) as http:
            small_request(http)  # warm
            idle = [small_request(http) for _ in range(10)]
        print(f"2-char request idle: median {statistics.median(idle) * 1000:.0f} ms, worst {max(idle) * 1000:.0f} ms")
        print("idle RSS: " + ", ".join(f"{name} {rss_mib(pid):.0f} MiB" for name, pid in pids.items()))
        for name, chars in (("over", int(args.over_mib * 2**20)), ("under", args.under_chars)):
            print(f"load '{name}': {HUGE} {chars:,}-character prompts at once, the 2-char request 0.2 s later")
            load(url, pids, chars, args.rounds)
    finally:
        process.terminate()
        process.wait(timeout=30)
    return 0


if __name__ == "__main__":
    sys.exit(main())
