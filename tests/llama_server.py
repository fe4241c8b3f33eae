"""A separate llama-server process on 127.0.0.1, for the upstream-engine tests and the benches' baseline.

It can be killed mid-stream and restarted on the same port, so tests can
prove that Maya fails cleanly while it is gone and recovers when it is back.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import httpx

from maya_server.engine.llama_server.build import ensure_binary

START_TIMEOUT = 60.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class LlamaServer:
    def __init__(self, model: str, *, ctx: int = 4096, parallel: int = 2, threads: int = 1,
                 api_key: str | None = None, log_path: Path | None = None, extra_args: tuple[str, ...] = ()) -> None:
        self.binary = ensure_binary()
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.api_key = api_key
        self._args = [
            str(self.binary), "-m", model, "--host", "127.0.0.1", "--port", str(self.port),
            "-c", str(ctx), "-np", str(parallel), "-t", str(threads), "--no-webui", "--metrics",
        ] + (["--api-key", api_key] if api_key else []) + list(extra_args)
        self._log_path = log_path
        self._process: subprocess.Popen | None = None
        self.start()

    def start(self) -> None:
        log = open(self._log_path, "ab") if self._log_path else subprocess.DEVNULL
        self._process = subprocess.Popen(self._args, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise RuntimeError(f"llama-server exited with {self._process.returncode} at start")
            if self._healthy():
                return
            time.sleep(0.05)
        self.stop()
        raise RuntimeError("llama-server did not become healthy in time")

    def _healthy(self) -> bool:
        try:
            return httpx.get(self.url + "/health", timeout=1).status_code == 200
        except httpx.HTTPError:
            return False

    def http(self) -> httpx.Client:
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        return httpx.Client(base_url=self.url, timeout=60, headers=headers)

    def slots_busy(self) -> int:
        with self.http() as client:
            return sum(1 for slot in client.get("/slots").json() if slot["is_processing"])

    def decode_calls(self) -> int:
        """llama-server's count of llama_decode() calls: one per generated token while one slot works."""
        with self.http() as client:
            for line in client.get("/metrics").text.splitlines():
                if line.startswith("llamacpp:n_decode_total "):
                    return int(float(line.split()[1]))
        raise AssertionError("llama-server's /metrics has no llamacpp:n_decode_total")

    def kill(self) -> None:
        """Die as a crashed engine does: SIGKILL, no goodbye to open connections."""
        if self._process is not None and self._process.poll() is None:
            os.kill(self._process.pid, signal.SIGKILL)
            self._process.wait(timeout=10)

    def pause(self) -> None:
        """Wedge it: SIGSTOP. The kernel still accepts connections on its port, but nothing answers them."""
        if self._process is not None and self._process.poll() is None:
            os.kill(self._process.pid, signal.SIGSTOP)

    def resume(self) -> None:
        """SIGCONT after `pause`."""
        if self._process is not None and self._process.poll() is None:
            os.kill(self._process.pid, signal.SIGCONT)

    def stop(self) -> None:
        self.resume()  # a stopped process cannot act on SIGTERM
        if self._process is not None and self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.kill()
