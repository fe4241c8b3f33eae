"""A Sentinel-monitored Redis for tests: a primary, a replica and three sentinels, all Debian's `redis-server`
(`--sentinel` mode) on free loopback ports in throwaway directories. Fast failure detection (1 s) so a test's
failover takes seconds; `stop` ends every process."""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

import pytest

from tests.redis_server import BINARY, MISSING, RedisServer, command, free_port
from tests.server import wait_for

SERVICE = "mymaster"
SETTLE_S = 30.0


class SentinelFleet:
    def __init__(self, sentinels: int = 3) -> None:
        if BINARY is None:
            pytest.skip(MISSING)
        self.primary = RedisServer()
        self.replica = RedisServer()
        command(self.replica.url, "REPLICAOF", "127.0.0.1", str(self.primary.port))
        assert wait_for(lambda: command(self.replica.url, "ROLE")[3] == b"connected", SETTLE_S)
        self.directory = Path(tempfile.mkdtemp(prefix="maya-sentinel-"))
        self.ports = [free_port() for _ in range(sentinels)]
        self.processes = [self._start(port) for port in self.ports]
        assert wait_for(self._ready, SETTLE_S), "the sentinels did not find each other and the replica"

    @property
    def url(self) -> str:
        hosts = ",".join(f"127.0.0.1:{port}" for port in self.ports)
        return f"redis+sentinel://{hosts}/{SERVICE}"

    def _start(self, port: int) -> subprocess.Popen:
        conf = self.directory / f"sentinel-{port}.conf"
        conf.write_text(f"port {port}\nbind 127.0.0.1\ndir {self.directory}\n"
                        f"sentinel monitor {SERVICE} 127.0.0.1 {self.primary.port} 2\n"
                        f"sentinel down-after-milliseconds {SERVICE} 1000\n"
                        f"sentinel failover-timeout {SERVICE} 5000\n")
        return subprocess.Popen([BINARY, str(conf), "--sentinel", "--logfile", str(self.directory / f"{port}.log")],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def _ask(self, port: int, *args) -> object:
        try:
            return command(f"redis://127.0.0.1:{port}/0", *args)
        except Exception:
            return None

    def _ready(self) -> bool:
        for port in self.ports:
            master = self._ask(port, "SENTINEL", "MASTER", SERVICE)
            if not master:
                return False
            fields = master if isinstance(master, dict) else dict(zip(master[::2], master[1::2]))
            fields = {(k.decode() if isinstance(k, bytes) else k): v for k, v in fields.items()}
            if int(fields.get("num-other-sentinels", 0)) < len(self.ports) - 1 or int(fields.get("num-slaves", 0)) < 1:
                return False
        return True

    def primary_port(self) -> int | None:
        """The port the sentinels name as the primary now."""
        answer = self._ask(self.ports[0], "SENTINEL", "GET-MASTER-ADDR-BY-NAME", SERVICE)
        return int(answer[1]) if answer else None  # (host, port)

    def stop(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                process.terminate()
                process.wait(timeout=10)
        self.replica.stop()
        self.primary.stop()
