"""A real `redis-server` (Debian's package) for the Redis store's tests: on a free loopback port, in a
throwaway directory, never the system service.

`make test` installs the package where it can (`make redis-server`); where the binary is missing the tests
that need it skip and say why. Tests never use a fake Redis.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

BINARY = shutil.which("redis-server")
MISSING = "redis-server is not installed (Debian: apt-get install redis-server; `make redis-server` tries)"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class RedisServer:
    """One redis-server process. `persistent`: an append-only file fsynced on every write, so a kill -9 and a
    restart keep everything written (what an operator who wants restarts survived configures)."""

    def __init__(self, directory: Path | None = None, *, persistent: bool = False, password: str | None = None,
                 extra: tuple[str, ...] = ()) -> None:
        """`extra`: more of redis-server's options (`--cluster-enabled yes`, say)."""
        if BINARY is None:
            pytest.skip(MISSING)
        self.owns_directory = directory is None
        self.directory = Path(directory or tempfile.mkdtemp(prefix="maya-redis-"))
        self.port = free_port()
        self.persistent = persistent
        self.password = password
        self.extra = extra
        self.process: subprocess.Popen | None = None
        self.start()

    @property
    def url(self) -> str:
        auth = f":{self.password}@" if self.password else ""
        return f"redis://{auth}127.0.0.1:{self.port}/0"

    def start(self) -> None:
        persistence = ["--appendonly", "yes", "--appendfsync", "always"] if self.persistent else ["--appendonly", "no"]
        auth = ["--requirepass", self.password] if self.password else []
        self.process = subprocess.Popen(
            [BINARY, "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.directory), "--save", "",
             *persistence, *auth, *self.extra, "--daemonize", "no", "--logfile", str(self.directory / "redis.log")],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 10
        while not self._answers():
            if time.monotonic() > deadline or self.process.poll() is not None:
                raise RuntimeError(f"redis-server did not start: {(self.directory / 'redis.log').read_text()[-2000:]}")
            time.sleep(0.02)

    def _answers(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as conn:
                conn.sendall(b"PING\r\n")
                return conn.recv(64).startswith((b"+PONG", b"-NOAUTH"))
        except OSError:
            return False

    def kill(self) -> None:
        """SIGKILL: no chance to save anything beyond what was already written."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=10)
        if self.owns_directory:
            shutil.rmtree(self.directory, ignore_errors=True)


def command(url: str, *args) -> object:
    """One command through redis-py's synchronous client (for assertions on what Redis holds)."""
    import redis

    client = redis.Redis.from_url(url)
    try:
        return client.execute_command(*args)
    finally:
        client.close()
