"""Server-sent events: each event encoded whole and written in one `send`.

`EventStreamResponse` pumps an async iterator of encoded events while watching
for the client's disconnect; a disconnect cancels the iterator at once, whose
`finally` blocks then stop the engine and free its slot. It is a real Starlette
`StreamingResponse` (headers, `background`): only how it sends is its own.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING, AsyncGenerator, Awaitable, Callable, Mapping

import orjson
from starlette.background import BackgroundTask
from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

from ..errors import ClientGone, ShuttingDown
from .disconnect import race_disconnect, unless

if TYPE_CHECKING:
    from .shutdown import Shutdown

SSE_HEADERS = {
    "content-type": "text/event-stream; charset=utf-8",
    "cache-control": "no-cache",  # an event is news once
    "x-accel-buffering": "no",  # nginx would otherwise hold events back until its buffer fills
}


_LINE_LIKE = ((b"\xe2\x80\xa8", b"\\u2028"), (b"\xe2\x80\xa9", b"\\u2029"), (b"\xc2\x85", b"\\u0085"))
"""U+2028, U+2029 and U+0085 in UTF-8, and their JSON escapes."""


def encode_event(data: dict | str | bytes, event: str | None = None) -> bytes:
    """One SSE frame. U+2028, U+2029 and U+0085 in the JSON are written as escapes: the JSON means the same,
    and a client that splits the stream with a text splitter (`str.splitlines`, httpx's `iter_lines`) does not
    cut the event at a character the model wrote. (These byte runs are only ever those characters: UTF-8 is
    self-synchronizing, and JSON's own syntax is ASCII.)"""
    if isinstance(data, bytes):  # JSON encoded already (a background log's events)
        payload = data
    else:
        payload = data.encode("utf-8") if isinstance(data, str) else orjson.dumps(data)
    if b"\xe2\x80" in payload or b"\xc2\x85" in payload:
        for raw, escaped in _LINE_LIKE:
            payload = payload.replace(raw, escaped)
    prefix = b"event: " + event.encode("ascii") + b"\n" if event else b""
    return prefix + b"data: " + payload + b"\n\n"


class EventStreamResponse(StreamingResponse):
    """A streaming Response whose `headers` (SSE_HEADERS plus `headers`) are the ones sent, so a route,
    FastAPI or a middleware holding the object can read and add to them, and whose `background` runs
    after the stream like any Starlette response's.

    `on_close` runs once the stream is over however it ended, even when the events were never
    started (a generator's own `finally` does not run then): it releases what the request holds.
    `write_timeout` (seconds) drops a reader whose socket does not take an event in time.
    `farewell`, when given, makes the stream stop when the server starts shutting down (the app's
    `Shutdown`, found in the request's lifespan state): the events are closed, which stops the
    engine, and the bytes it returns or resolves to (the API's terminal event) end the stream.
    Without it (a reader of a background job this server runs) the stream runs on until its job,
    cancelled by the shutdown, ends it.
    `keepalive` (seconds), when given, sends an SSE comment line whenever no event has come for that
    long (output held for validation), so clients with a read timeout keep waiting; the comment is
    ignored by every SSE parser.
    """

    def __init__(
        self,
        events: AsyncGenerator[bytes, None],
        status_code: int = 200,
        on_close: Callable[[], None] | None = None,
        write_timeout: float | None = None,
        farewell: Callable[[], bytes | Awaitable[bytes]] | None = None,
        keepalive: float | None = None,
        headers: Mapping[str, str] | None = None,
        background: BackgroundTask | None = None,
    ) -> None:
        super().__init__(events, status_code, {**SSE_HEADERS, **(headers or {})}, background=background)
        self.body_iterator: AsyncGenerator[bytes, None] = events  # Starlette's name: whoever replaces it is heard
        self.keepalive = keepalive
        self.on_close = on_close
        self.write_timeout = write_timeout
        self.farewell = farewell

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        shutdown = scope.get("state", {}).get("shutdown") if self.farewell is not None else None
        try:
            await race_disconnect(receive, self._pump(send, shutdown))
        except ClientGone:
            pass  # the pump was cancelled: its events' finally blocks stopped the engine
        finally:
            try:
                await self.body_iterator.aclose()
            finally:
                if self.on_close is not None:
                    self.on_close()
        if self.background is not None:
            await self.background()

    async def _pump(self, send: Send, shutdown: "Shutdown | None") -> None:
        await send({"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers})
        try:
            if shutdown is None:
                await self._send_events(send)
            else:
                try:
                    await unless(shutdown.wait(), self._send_events(send), ShuttingDown)
                except ShuttingDown:
                    await self.body_iterator.aclose()  # the engine stops before the terminal event is written
                    goodbye = self.farewell()
                    await self._write(send, goodbye if isinstance(goodbye, bytes) else await goodbye)
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        except (OSError, asyncio.TimeoutError):
            return  # the socket closed under us, or stopped taking data: same as a disconnect

    async def _send_events(self, send: Send) -> None:
        chunks = self.body_iterator
        if self.keepalive is not None:
            chunks = with_keepalives(chunks, self.keepalive)
        async with contextlib.aclosing(chunks):  # a keep-alive wrapper lets go of the events first
            async for chunk in chunks:
                await self._write(send, chunk)

    async def _write(self, send: Send, chunk: bytes) -> None:
        if not chunk:
            return
        if self.write_timeout is None:  # no timer to arm and cancel for every event
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
            return
        async with asyncio.timeout(self.write_timeout):  # no task per event, unlike wait_for
            await send({"type": "http.response.body", "body": chunk, "more_body": True})


KEEPALIVE_COMMENT = b": keep-alive\n\n"


async def with_keepalives(events: AsyncGenerator[bytes, None], interval: float) -> AsyncGenerator[bytes, None]:
    """`events`, with a keep-alive comment after every `interval` seconds without one. The pending
    `__anext__` runs as a task that a timeout never cancels, so the event generator is not disturbed."""
    pending: asyncio.Future | None = None
    try:
        while True:
            if pending is None:
                pending = asyncio.ensure_future(events.__anext__())
            done, _ = await asyncio.wait({pending}, timeout=interval)
            if not done:
                yield KEEPALIVE_COMMENT
                continue
            try:
                chunk = pending.result()
            except StopAsyncIteration:
                return
            pending = None
            yield chunk
    finally:
        if pending is not None and not pending.done():
            pending.cancel()
            with contextlib.suppress(asyncio.CancelledError, StopAsyncIteration):
                await pending
