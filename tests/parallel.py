"""`make test`'s two passes: the suite on several workers, then the tests that must run alone.

Most of the suite waits on processes (servers starting, leases lapsing, engines answering), not on the CPU, so
more workers than cores keep the cores busy: `MAYA_TEST_WORKERS` (default: twice the cores this process may use,
at least 2, at most 8). Each worker is its own process with its own redis-server, ports (all picked free) and
temporary directories; `--dist loadfile` keeps a file's tests on one worker, so a module's engine starts once.
The tests marked `serial` (they kill or stop processes on a clock, or measure a whole process's memory or time,
which other workers' load would skew) run after, one at a time. Both passes always run; the exit status is the
first failure's.

Compiled bytecode is kept, outside the repository (`bytecode_environment`): on a machine that sets
`PYTHONDONTWRITEBYTECODE` (these VMs do), every pytest process would otherwise rewrite the asserts of all ~200 test
modules again (collection: about 9 s instead of 2) and every Maya process a test starts would compile Maya again.

    .venv/bin/python -m tests.parallel [pytest arguments for both passes]
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Mapping

MOST_WORKERS = 8


def workers() -> int:
    """`MAYA_TEST_WORKERS`, else twice the usable cores within [2, MOST_WORKERS]."""
    chosen = os.environ.get("MAYA_TEST_WORKERS")
    if chosen:
        return max(1, int(chosen))
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(2, min(MOST_WORKERS, 2 * cores))


def bytecode_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """`environ` with bytecode written and read under `~/.cache/maya/pycache/` (`PYTHONPYCACHEPREFIX`; one the
    caller set wins), so no `__pycache__` appears in the tree whether or not the machine forbids writing them."""
    chosen = dict(environ)
    chosen.pop("PYTHONDONTWRITEBYTECODE", None)
    home = Path(environ["HOME"]) if environ.get("HOME") else Path.home()
    chosen.setdefault("PYTHONPYCACHEPREFIX", str(home / ".cache" / "maya" / "pycache"))
    return chosen


def run_pass(name: str, arguments: list[str]) -> int:
    started = time.monotonic()
    print(f"maya tests: {name}: pytest {' '.join(arguments)}", flush=True)
    status = subprocess.call([sys.executable, "-m", "pytest", *arguments], env=bytecode_environment(os.environ))
    print(f"maya tests: {name} pass ended with status {status} in {time.monotonic() - started:.0f} s", flush=True)
    return status


def main(extra: list[str]) -> int:
    n = workers()
    statuses = [
        run_pass(f"parallel ({n} workers)", ["-q", "-n", str(n), "--dist", "loadfile", "-m", "not serial", *extra]),
        run_pass("serial", ["-q", "-m", "serial", *extra]),
    ]
    # 5: no test selected (a pass with nothing to run is no failure)
    return next((status for status in statuses if status not in (0, 5)), 0)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
