"""Maya as a real process (`python -m maya_server`) for tests that need what only a process allows: a
`kill -9`, a `SIGSTOP`/`SIGCONT`, a SIGTERM with other replicas watching.

A replica runs the scripted engine on loopback (`--port 0`); its address is read from the "running on
http://127.0.0.1:N" line of its stderr, by a thread that keeps draining stderr (the pipe never fills, the
last lines are kept for failure messages); the test goes on meanwhile, and the first request waits for it.
`Fleet` starts replicas that share one store and kills every one of them at the end of the test, paused ones
included.
"""

from __future__ import annotations

import collections
import json
import os
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path

import httpx
import openai

RUNNING = re.compile(r"running on http://(127\.0\.0\.1:\d+)")
START_TIMEOUT_S = 90.0
"""Starting Python and importing the server takes seconds on a loaded two-core box."""


class MayaProcess:
    """One `python -m maya_server --engine scripted` process, started at construction. The test goes on while it
    starts, so the replicas of a fleet start side by side; `url` (and so every request) waits until it runs."""

    def __init__(self, name: str, script_file: Path | None, *args: str, delay: float,
                 environ: dict[str, str] | None = None, cwd: Path | None = None) -> None:
        """`script_file` None: the real embedded engine on the default model (SmolLM2), as `maya` runs it."""
        self.name = name
        self.lines: collections.deque[str] = collections.deque(maxlen=200)
        env = {**os.environ, **(environ or {})}
        engine = [] if script_file is None else ["--engine", "scripted", "--family", "chatml", "--script",
                                                 str(script_file), "--script-delay", str(delay)]
        argv = [sys.executable, "-m", "maya_server", *engine, "--port", "0", *args]
        self.process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                        stderr=subprocess.PIPE, text=True, env=env, cwd=cwd)
        self._url: str | None = None
        self._running = threading.Event()
        """Set once the "running on" line came, or stderr ended without it (the process exited)."""
        self._reader = threading.Thread(target=self._read_stderr, name=f"maya-{name}-stderr", daemon=True)
        self._reader.start()

    @property
    def url(self) -> str:
        """Its address, once it runs (within `START_TIMEOUT_S`); a process that exited or never ran fails the
        test, with its last lines."""
        if not self._running.wait(START_TIMEOUT_S) or self._url is None:
            self.kill()
            raise AssertionError(f"maya {self.name} did not start (exit {self.process.poll()}):\n{self.tail()}")
        return self._url

    def _read_stderr(self) -> None:
        """Keep draining stderr (the pipe never fills; the last lines are kept), noting the address on the way."""
        try:
            for line in self.process.stderr:
                self.lines.append(line.rstrip("\n"))
                if self._url is None:
                    match = RUNNING.search(line)
                    if match:
                        self._url = "http://" + match.group(1)
                        self._running.set()
        except (OSError, ValueError):
            pass
        finally:
            self._running.set()

    # -- talking to it ------------------------------------------------------------------
    def http(self, timeout: float = 60.0, api_key: str | None = None) -> httpx.Client:
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else None
        return httpx.Client(base_url=self.url, timeout=timeout, headers=headers)

    def client(self, api_key: str = "unused") -> openai.OpenAI:
        return openai.OpenAI(base_url=self.url + "/v1", api_key=api_key, max_retries=0, timeout=60)

    def status(self) -> dict:
        with self.http() as http:
            return http.get("/v1/status").json()

    def tail(self, count: int = 40) -> str:
        return "\n".join(list(self.lines)[-count:])

    # -- signals ------------------------------------------------------------------------
    @property
    def alive(self) -> bool:
        return self.process.poll() is None

    def kill(self) -> None:
        """SIGKILL: nothing runs after it, no cleanup, no terminal event written by this process."""
        if self.alive:
            self.process.kill()
        self.process.wait(timeout=30)

    def terminate(self) -> None:
        """SIGTERM: the graceful shutdown (the caller waits for the exit)."""
        if self.alive:
            self.process.send_signal(signal.SIGTERM)

    def pause(self) -> None:
        if self.alive:
            self.process.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        if self.alive:
            self.process.send_signal(signal.SIGCONT)

    def wait(self, timeout: float) -> int:
        return self.process.wait(timeout=timeout)

    def close(self) -> None:
        if self.alive:
            self.resume()  # a stopped process still dies of SIGKILL, but resume first so nothing lingers
            self.kill()
        if self.process.stderr is not None:
            self.process.stderr.close()


class Fleet:
    """Replicas that share `store` and `prefix` (Redis), or each its own memory store (`store="memory"`)."""

    def __init__(self, directory: Path, store: str = "memory", prefix: str | None = None) -> None:
        self.directory = directory
        self.store = store
        self.prefix = prefix
        self.replicas: list[MayaProcess] = []

    def start(self, script: list | tuple = ("ok",), *args: str, delay: float = 0.01,
              environ: dict[str, str] | None = None, store: str | None = None) -> MayaProcess:
        name = "abcdefghijklmnopqrstuvwxyz"[len(self.replicas) % 26]
        script_file = self.directory / f"script-{name}-{len(self.replicas)}.json"
        script_file.write_text(json.dumps(list(script)))
        store_args = ["--store", store or self.store]
        if (store or self.store) != "memory" and self.prefix is not None:
            store_args += ["--store-prefix", self.prefix]
        replica = MayaProcess(name, script_file, *store_args, *args, delay=delay, environ=environ)
        self.replicas.append(replica)
        return replica

    def start_real(self, *args: str, environ: dict[str, str] | None = None) -> MayaProcess:
        """A replica on the real embedded engine (SmolLM2, its own llama-server child) sharing the store."""
        name = "abcdefghijklmnopqrstuvwxyz"[len(self.replicas) % 26]
        store_args = ["--store", self.store] + (["--store-prefix", self.prefix] if self.prefix is not None else [])
        replica = MayaProcess(name, None, *store_args, *args, delay=0.0, environ=environ)
        self.replicas.append(replica)
        return replica

    def close(self) -> None:
        for replica in self.replicas:
            try:
                replica.close()
            except Exception:  # one stuck process must not leave the others running
                pass

    def logs(self) -> str:
        return "\n".join(f"--- maya {r.name} (exit {r.process.poll()}) ---\n{r.tail()}" for r in self.replicas)
