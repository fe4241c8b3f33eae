"""How often an evicting Redis costs a response none of whose keys it evicted: the eviction load test
(`tests/responses/api/test_store_eviction_load.py`), run N times, each in its own pytest process.

Eviction under load depends on timing (Redis samples keys to evict, Maya's probe runs on its own clock), so one
passing run says little; this repeats it. Each run of the test appends its counts as one JSON line per policy to
the file `MAYA_EVICTION_COUNTS` names; printed per run and policy: the responses created, whole, lost with one of
their own keys evicted (`needed`), lost otherwise (must be 0), served with other content than was stored (`wrong`,
must be 0; its first examples below the line), the keys Redis evicted, the bookkeeping keys among
them, Maya's own evictions, and that policy's test result (a run that failed before counting, e.g. on a 5xx or a
wrong content, is named with its first error line); at the end, the totals and the runs that failed.

    .venv/bin/python bench/store_eviction_loop.py [--runs 30] [-k allkeys] [--timeout 120] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TEST = "tests/responses/api/test_store_eviction_load.py"


def run_once(args, counts_file: Path) -> tuple[int, float, str]:
    """One pytest process: (its exit status, its seconds, its whole output)."""
    env = {**os.environ, "MAYA_EVICTION_COUNTS": str(counts_file)}
    command = [sys.executable, "-m", "pytest", "-q", "-rA", "-p", "no:cacheprovider", TEST]
    if args.k:
        command += ["-k", args.k]
    started = time.perf_counter()
    try:
        done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=args.timeout)
        status, output = done.returncode, done.stdout + done.stderr
    except subprocess.TimeoutExpired as expired:
        status, output = 124, f"timed out after {args.timeout} s\n{expired.stdout or ''}"
    return status, time.perf_counter() - started, output


def outcomes(output: str) -> dict[str, tuple[str, str]]:
    """policy → (PASSED, FAILED or ERROR; pytest's one-line reason), from pytest's -rA summary lines."""
    found = {}
    for line in output.splitlines():
        word, _, rest = line.partition(" ")
        if word in ("PASSED", "FAILED", "ERROR") and "[" in rest:
            found[rest.split("[", 1)[1].split("]", 1)[0]] = (word, rest.partition(" - ")[2])
    return found


def main(args) -> int:
    totals: dict[str, dict[str, int]] = {}
    failed: list[int] = []
    with tempfile.TemporaryDirectory(prefix="maya-eviction-") as directory:
        print(f"{'run':>4} {'policy':13} {'created':>7} {'whole':>6} {'needed':>6} {'other':>6} {'wrong':>6} "
              f"{'evicted':>7} {'bookkeeping':>11} {'maya':>5}  result")
        for run in range(1, args.runs + 1):
            counts_file = Path(directory) / f"run{run}.jsonl"
            status, seconds, output = run_once(args, counts_file)
            if args.keep:
                Path(args.keep).mkdir(parents=True, exist_ok=True)
                (Path(args.keep) / f"run{run}.txt").write_text(output)
            results = outcomes(output)
            lines = counts_file.read_text().splitlines() if counts_file.exists() else []
            if status != 0:
                failed.append(run)
            written = set()
            for line in lines:
                c = json.loads(line)
                written.add(c["policy"])
                total = totals.setdefault(c["policy"], {})
                for name in ("created", "whole", "lost_needed_evicted", "lost_otherwise", "served_wrong",
                             "evicted_keys", "maya_evictions"):
                    total[name] = total.get(name, 0) + c[name]
                total["bookkeeping_evicted"] = total.get("bookkeeping_evicted", 0) + len(c["bookkeeping_evicted"])
                total["runs_lost_otherwise"] = total.get("runs_lost_otherwise", 0) + bool(c["lost_otherwise"])
                result = results.get(c["policy"], ("?", ""))[0]
                total[f"runs_{result.lower()}"] = total.get(f"runs_{result.lower()}", 0) + 1
                print(f"{run:>4} {c['policy']:13} {c['created']:>7} {c['whole']:>6} {c['lost_needed_evicted']:>6} "
                      f"{c['lost_otherwise']:>6} {c['served_wrong']:>6} {c['evicted_keys']:>7} "
                      f"{len(c['bookkeeping_evicted']):>11} {c['maya_evictions']:>5}  {result}")
                for example in c.get("served_wrong_examples", []):
                    print(f"     served wrong: {example}")
            for policy, (result, reason) in results.items():
                if policy not in written:  # failed before it counted (a 5xx, a wrong content, a timeout)
                    total = totals.setdefault(policy, {})
                    total[f"runs_{result.lower()}_uncounted"] = total.get(f"runs_{result.lower()}_uncounted", 0) + 1
                    print(f"{run:>4} {policy:13} no counts: {result} {reason[:160]}")
            if status not in (0, 1):
                print(f"{run:>4} pytest exit {status} in {seconds:.1f} s: {output.strip().splitlines()[-1:]}")
            elif args.verbose:
                print(f"     ({seconds:.1f} s)")
    print(f"\n{args.runs} runs, {len(failed)} failed" + (f": runs {failed}" if failed else ""))
    for policy, total in totals.items():
        print(f"{policy}: " + ", ".join(f"{name} {value}" for name, value in total.items()))
    return 1 if failed else 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("-k", default="", help="pytest -k expression, e.g. allkeys or volatile")
    parser.add_argument("--timeout", type=int, default=120, help="seconds one pytest run may take")
    parser.add_argument("-v", "--verbose", action="store_true", help="print each run's time")
    parser.add_argument("--keep", default="", help="a directory to keep each run's pytest output in")
    sys.exit(main(parser.parse_args()))
