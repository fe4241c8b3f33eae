"""The suite's per-test timeout (`pytest-timeout`, configured in pyproject.toml): a test that hangs fails with
its name, and the run goes on to the next test instead of hanging `make test`.

Run on a tiny test file in a pytest subprocess, with the project's pytest options and `--timeout 2`: one test
sleeps, one waits on an asyncio event nobody sets (how a log reader hangs), one passes after them.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

HANGING = '''
import asyncio
import time


def test_sleeps_past_its_timeout():
    time.sleep(120)


def test_awaits_an_event_nobody_sets():
    async def forever():
        await asyncio.Event().wait()

    asyncio.run(forever())


def test_after_the_hung_ones_still_runs():
    assert True
'''


def test_a_hung_test_fails_with_its_name_and_the_run_goes_on(tmp_path):
    (tmp_path / "test_hangs.py").write_text(HANGING)
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-c", str(ROOT / "pyproject.toml"), "--rootdir", str(tmp_path),
         "-p", "no:cacheprovider", "-q", "-rfp", "--timeout", "2", str(tmp_path / "test_hangs.py")],
        capture_output=True, text=True, timeout=120, cwd=tmp_path,
        env={**os.environ, "COLUMNS": "200"},  # the summary lines whole
    )
    out = run.stdout + run.stderr
    assert run.returncode == 1, out
    assert "FAILED test_hangs.py::test_sleeps_past_its_timeout - Failed: Timeout (>2.0s)" in out, out
    assert "FAILED test_hangs.py::test_awaits_an_event_nobody_sets - Failed: Timeout (>2.0s)" in out, out
    assert "PASSED test_hangs.py::test_after_the_hung_ones_still_runs" in out, out
    assert "2 failed, 1 passed" in out, out
