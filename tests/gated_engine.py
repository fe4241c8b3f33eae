"""A scripted engine the test drives, and a server log of what was sent: order, not timing.

Tests of held output (keep-alives, validate-before-publish) used to measure gaps between
arrivals, which a loaded machine stretches at random. They prove the same thing from order:

    GatedEngine   logs every token it generates to `log`, and can hold a generation at
                  token `hold_after` until the test sets `released` (on the server's loop:
                  `server.on_loop(engine.released.set)`); `holding` is set while it waits
    serving       a RunningServer over that engine whose every response body `send` is
                  appended to the same `log`

The engine and the sends run on the server's one event loop, and the pipeline pulls one
token at a time, so the order of `("token", n)` and `("sent", bytes)` entries in the log is
the order in which they happened there.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from typing import AsyncIterator, Iterator, Sequence

from maya_server.engine.base import GeneratedToken, Generation, StreamItem
from tests.scripted import RecordingScriptedEngine

from tests.recorder import Recorder
from tests.server import RunningServer, scripted_config


class GatedEngine(RecordingScriptedEngine):
    def __init__(self, script: Sequence[object], *, hold_after: int | None = None, **options) -> None:
        super().__init__(script, **options)
        self.hold_after = hold_after
        self.log: list[tuple[str, object]] = []
        self.released = asyncio.Event()  # bound to the server's loop when first awaited there
        self.holding = threading.Event()

    async def _stream(self, generation: Generation) -> AsyncIterator[StreamItem]:
        generated = 0
        # aclosing: a cancel during the hold closes the scripted stream now, so it counts as cancelled
        async with contextlib.aclosing(super()._stream(generation)) as items:
            async for item in items:
                if isinstance(item, GeneratedToken):
                    if generated == self.hold_after and not self.released.is_set():
                        self.holding.set()
                        await self.released.wait()
                    generated += 1
                    self.log.append(("token", generated))
                yield item


def _logging_sends(log: list, app):
    async def logged(scope, receive, send):
        async def send_and_log(message):
            if message["type"] == "http.response.body" and message.get("body"):
                log.append(("sent", message["body"]))
            await send(message)

        await app(scope, receive, send_and_log)

    return logged


@contextlib.contextmanager
def serving(engine: GatedEngine, **config) -> Iterator[RunningServer]:
    """A server over `engine` (config as `start_server` takes it); every answer is validated afterwards."""
    recorder = Recorder()
    wrap = lambda app: _logging_sends(engine.log, recorder(app))  # noqa: E731
    server = RunningServer(scripted_config(**config), engine, wrap=wrap)
    try:
        yield server
    finally:
        server.stop()
    recorder.check()
