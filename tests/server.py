"""A real Maya server on 127.0.0.1 (port 0) in a background thread, for tests and benches."""

from __future__ import annotations

import asyncio
import threading
import time
from dataclasses import replace
from typing import Awaitable, Callable, TypeVar

import httpx
import uvicorn
from openai import OpenAI

from maya_server.app import create_app
from maya_server.cli import SHUTDOWN_GRACE_S
from maya_server.config import ServerConfig
from maya_server.engine.base import Engine
from maya_server.http.protocol import serving_protocols
from maya_server.http.shutdown import GracefulServer

T = TypeVar("T")


class RunningServer:
    def __init__(self, config: ServerConfig, engine: Engine, *, wrap: Callable | None = None, **app_options) -> None:
        """`app_options` go to `create_app` (e.g. `clock=` for the response store's TTL); `wrap`, when given,
        wraps the app in an outer ASGI layer (e.g. a recorder of every answer)."""
        self.config = config
        self.engine = engine
        self.app = create_app(config, engine, **app_options)
        self._server = GracefulServer(
            uvicorn.Config(wrap(self.app) if wrap else self.app, host="127.0.0.1", port=0, log_level="warning",
                           lifespan="on", timeout_graceful_shutdown=SHUTDOWN_GRACE_S, **serving_protocols(config)),
            drain=self.app.state.drain,
        )
        self._thread = threading.Thread(target=self._server.run, daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 20
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("test server did not start")
            time.sleep(0.01)
        port = self._server.servers[0].sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"

    def on_loop(self, read: Callable[[], T]) -> T:
        """`read()` run on the server's event loop, its result returned here: state that only the loop touches
        (the job table, say) is read where it is consistent, not from this thread while the loop changes it."""

        async def call() -> T:
            return read()

        loop = self._server.servers[0].get_loop()
        return asyncio.run_coroutine_threadsafe(call(), loop).result(timeout=10)

    def await_on_loop(self, make: Callable[[], "Awaitable[T]"]) -> T:
        """`make()`'s awaitable awaited on the server's event loop (a Redis store's client lives there)."""

        async def call() -> T:
            return await make()

        loop = self._server.servers[0].get_loop()
        return asyncio.run_coroutine_threadsafe(call(), loop).result(timeout=10)

    @property
    def open_connections(self) -> int:
        """The HTTP connections uvicorn holds open right now."""
        return len(self._server.server_state.connections)

    def client(self, api_key: str | None = None, **kwargs) -> OpenAI:
        key = api_key or (self.config.api_keys[0] if self.config.api_keys else "unused")
        return OpenAI(base_url=self.url + "/v1", api_key=key, max_retries=0, **kwargs)

    def http(self, **kwargs) -> httpx.Client:
        return httpx.Client(base_url=self.url, timeout=30, **kwargs)

    def stop(self) -> None:
        self._server.request_exit()
        self._thread.join(timeout=20)


def wait_for(condition, timeout: float = 10.0) -> bool:
    """Poll `condition` until it holds (True) or `timeout` passes (False)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return False


def prometheus_values(text: str, prefix: str) -> dict[str, float]:
    """The samples of a /metrics/prometheus page whose names start with `prefix`, by name (with labels)."""
    samples = (line.rsplit(" ", 1) for line in text.splitlines() if line.startswith(prefix))
    return {name: float(value) for name, value in samples}


def scripted_config(**overrides) -> ServerConfig:
    return replace(ServerConfig(engine="scripted", family="chatml", ctx=4096), **overrides)
