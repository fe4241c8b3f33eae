"""A Maya server in its own process, for the benches: its CPU is then its own, not the client's."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

import httpx


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def start_maya(*args: str, command: list[str] | None = None, timeout: float = 60) -> tuple[subprocess.Popen, str]:
    """`python -m maya_server ARGS --port N` (or `command` + `--port N`), once /health answers."""
    port = free_port()
    argv = (command or [sys.executable, "-m", "maya_server", *args]) + ["--port", str(port)]
    process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the maya server exited with {process.returncode}")
        try:
            if httpx.get(url + "/health", timeout=1).status_code == 200:
                return process, url
        except httpx.TransportError:
            time.sleep(0.1)
    process.kill()
    raise RuntimeError("the maya server did not start")


def children(pid: int) -> list[int]:
    """The child processes of `pid`, from every thread (the llama-server child may be started from a worker thread)."""
    found = []
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/children") as f:
                found += [int(c) for c in f.read().split()]
        except OSError:
            pass
    return found
