"""`make test`'s runner (`tests/parallel.py`): how many workers, and bytecode kept outside the tree even on a
machine that forbids writing it (each pytest process then collects in seconds, not by rewriting every module)."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.parallel import MOST_WORKERS, bytecode_environment, workers


def test_workers_are_twice_the_cores_within_bounds_unless_chosen(monkeypatch):
    monkeypatch.setenv("MAYA_TEST_WORKERS", "3")
    assert workers() == 3
    monkeypatch.delenv("MAYA_TEST_WORKERS")
    cores = len(os.sched_getaffinity(0))
    assert workers() == max(2, min(MOST_WORKERS, 2 * cores))


def test_bytecode_is_written_under_the_cache_and_never_beside_the_source(tmp_path):
    home, source = tmp_path / "home", tmp_path / "source"
    source.mkdir()
    (source / "some_module.py").write_text("VALUE = 42\n")
    machine = {key: value for key, value in os.environ.items() if key != "PYTHONPYCACHEPREFIX"}
    environ = bytecode_environment({**machine, "PYTHONDONTWRITEBYTECODE": "1", "HOME": str(home)})
    assert "PYTHONDONTWRITEBYTECODE" not in environ
    subprocess.run([sys.executable, "-c", "import some_module"], cwd=source, env=environ, check=True, timeout=60)
    assert list((home / ".cache" / "maya" / "pycache").rglob("some_module.*.pyc"))
    assert not list(source.rglob("__pycache__"))
    # a prefix the caller chose is kept
    assert bytecode_environment({"PYTHONPYCACHEPREFIX": "/elsewhere"})["PYTHONPYCACHEPREFIX"] == "/elsewhere"
