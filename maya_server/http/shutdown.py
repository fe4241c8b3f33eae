"""Shutting down without cutting streams: open streams end with a terminal event, then Maya exits 0.

uvicorn, left alone, waits for open connections until its grace period ends,
then cancels them mid-stream (a client sees a dropped connection and no
terminal event) and re-raises SIGTERM, so the process dies with -15. Here the
server first tells the app it is draining (`Shutdown.begin()`): every
foreground stream stops its generation and writes its terminal `error` event
(code `server_shutdown`), background jobs are cancelled (their readers get the
standard cancellation event), and only then does uvicorn's own shutdown run.
A SIGTERM handled this way is a clean exit, status 0.

`ShutdownGate` does the same for every request that has not started its answer: an
immediate 503 `server_shutdown`, streamed or not.
"""

from __future__ import annotations

import asyncio
import logging
import signal
from typing import Awaitable, Callable

import uvicorn
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..errors import ServiceUnavailableError
from .errors import error_response

log = logging.getLogger("maya.http")


SHUTDOWN_CODE = "server_shutdown"


class Shutdown:
    """The app-wide "we are draining" signal that streams watch."""

    def __init__(self) -> None:
        self._event = asyncio.Event()

    def begin(self) -> None:
        self._event.set()

    @property
    def draining(self) -> bool:
        return self._event.is_set()

    async def wait(self) -> None:
        await self._event.wait()


def shutdown_error() -> ServiceUnavailableError:
    return ServiceUnavailableError(
        "The server is shutting down; this response was stopped before it finished. Retry on another server "
        "or after it restarts.", code=SHUTDOWN_CODE,
    )


def shutdown_refusal() -> ServiceUnavailableError:
    return ServiceUnavailableError(
        "The server is shutting down and did not start this request; retry on another server or after it "
        "restarts.", code=SHUTDOWN_CODE,
    )


class ShutdownGate:
    """Every HTTP request whose answer has not started when draining begins gets an immediate 503
    `server_shutdown` in OpenAI's shape, whatever it was doing (reading its body, fetching an image,
    waiting for the engine, generating a non-streamed answer); its work is then cancelled, which
    releases what it held. An answer already started (a stream's headers are sent at once) is left
    to end itself: streams write their own terminal event. Without this gate such a request would wait
    out uvicorn's whole grace period and then be cut, seen as an empty 499 or a plain-text 500."""

    def __init__(self, app: ASGIApp, *, shutdown: Shutdown) -> None:
        self.app = app
        self._shutdown = shutdown

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if self._shutdown.draining:  # a request that arrived on a kept-alive connection meanwhile
            await _refuse(scope, receive, send)
            return
        answer = _Answer(send)
        work = asyncio.ensure_future(self.app(scope, receive, answer.send))
        stop = asyncio.ensure_future(self._shutdown.wait())
        try:
            await asyncio.wait({work, stop}, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            work.cancel()
            raise
        finally:
            stop.cancel()
        if not work.done() and not answer.started:
            answer.closed = True  # whatever the cancelled work still sends goes nowhere
            await _refuse(scope, receive, send)
            work.cancel()
            for outcome in await asyncio.gather(work, return_exceptions=True):
                if isinstance(outcome, Exception):
                    log.debug("a request stopped by the shutdown ended with %s", type(outcome).__name__)
            return
        await work


class _Answer:
    """The app's `send`, noting whether the answer started, and silenced once the gate has answered."""

    def __init__(self, send: Send) -> None:
        self._send = send
        self.started = False
        self.closed = False

    async def send(self, message: Message) -> None:
        if self.closed:
            return
        self.started = True
        await self._send(message)


async def _refuse(scope: Scope, receive: Receive, send: Send) -> None:
    await error_response(shutdown_refusal(), headers={"connection": "close"})(scope, receive, send)


TICK_S = 1.0
"""How often the idle server wakes: to refresh the Date header (whole seconds) and see `limit_max_requests`."""


class GracefulServer(uvicorn.Server):
    """uvicorn's server with `drain` run before its shutdown, SIGTERM answered by exiting 0, and an idle loop
    that wakes once a second, not ten times.

    uvicorn's own main loop polls `should_exit` every 0.1 s. On a laptop that is most of an idle Maya's CPU
    (2.5 ms a second, measured with /proc/PID/schedstat) and, at a slow engine's tens of tokens a second, some
    30 µs per relayed token. Here a stop asked by a signal or by `request_exit` (from any thread) wakes the loop
    at once; the tick remains only for the Date header and for code that sets `should_exit` by hand."""

    def __init__(self, config: uvicorn.Config, drain: Callable[[], Awaitable[None]]) -> None:
        super().__init__(config)
        self._drain = drain
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop_asked: asyncio.Event | None = None

    async def main_loop(self) -> None:
        self._loop, self._stop_asked = asyncio.get_running_loop(), asyncio.Event()
        ticks = 0
        while not await self.on_tick(ticks * 10):  # uvicorn refreshes the Date header on multiples of ten
            ticks = (ticks + 1) % 86400
            try:
                await asyncio.wait_for(self._stop_asked.wait(), TICK_S)
            except TimeoutError:
                pass

    def request_exit(self) -> None:
        """Stop serving, as SIGTERM does; callable from any thread."""
        self.should_exit = True
        self._wake()

    def _wake(self) -> None:
        loop, event = self._loop, self._stop_asked
        if loop is not None and event is not None:
            try:
                loop.call_soon_threadsafe(event.set)
            except RuntimeError:
                pass  # the loop has closed: nothing is waiting

    async def shutdown(self, sockets=None) -> None:
        for server in getattr(self, "servers", []):
            server.close()  # no new connections while the open ones drain
        await self._drain()
        await super().shutdown(sockets)

    def handle_exit(self, sig: int, frame) -> None:
        super().handle_exit(sig, frame)
        self._wake()
        if sig == signal.SIGTERM and sig in self._captured_signals:
            self._captured_signals.remove(sig)  # a requested stop, completed: not re-raised after shutdown
