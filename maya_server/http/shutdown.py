"""Shutting down without cutting streams: open streams end with a terminal event, then Maya exits 0.

uvicorn, left alone, waits for open connections until its grace period ends,
then cancels them mid-stream (a client sees a dropped connection and no
terminal event) and re-raises SIGTERM, so the process dies with -15. Here the
server first tells the app it is draining (`Shutdown.begin()`): every
foreground stream stops its generation and writes its terminal `error` event
(code `server_shutdown`), background jobs are cancelled (their readers get the
standard cancellation event), and only then does uvicorn's own shutdown run.
A SIGTERM handled this way is a clean exit, status 0.
"""

from __future__ import annotations

import asyncio
import signal
from typing import Awaitable, Callable

import uvicorn

from ..errors import ServiceUnavailableError


SHUTDOWN_CODE = "server_shutdown"


class Shutdown:
    """The app-wide "we are draining" signal that streams watch."""

    def __init__(self) -> None:
        self._event = asyncio.Event()

    def begin(self) -> None:
        self._event.set()

    async def wait(self) -> None:
        await self._event.wait()


def shutdown_error() -> ServiceUnavailableError:
    return ServiceUnavailableError(
        "The server is shutting down; this response was stopped before it finished. Retry on another server "
        "or after it restarts.", code=SHUTDOWN_CODE,
    )


class GracefulServer(uvicorn.Server):
    """uvicorn's server with `drain` run before its shutdown, and SIGTERM answered by exiting 0."""

    def __init__(self, config: uvicorn.Config, drain: Callable[[], Awaitable[None]]) -> None:
        super().__init__(config)
        self._drain = drain

    async def shutdown(self, sockets=None) -> None:
        for server in getattr(self, "servers", []):
            server.close()  # no new connections while the open ones drain
        await self._drain()
        await super().shutdown(sockets)

    def handle_exit(self, sig: int, frame) -> None:
        super().handle_exit(sig, frame)
        if sig == signal.SIGTERM and sig in self._captured_signals:
            self._captured_signals.remove(sig)  # a requested stop, completed: not re-raised after shutdown
