"""Notice a client that has gone away, and stop the work done for it.

Starlette only notices a disconnect when a write fails; a request waiting in
the engine queue, a non-streamed generation, or image fetches made before any
response starts write nothing for a long time. So we listen on `receive`
ourselves and cancel the work at once (and, for work before a response, when
the server begins shutting down: nothing else would stop it).
"""

from __future__ import annotations

import asyncio
from typing import Awaitable, Callable, TypeVar

from starlette.requests import Request
from starlette.types import Receive

from ..errors import ClientGone, ShuttingDown

T = TypeVar("T")


async def wait_for_disconnect(receive: Receive) -> None:
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return


async def race_disconnect(receive: Receive, work: Awaitable[T]) -> T:
    """Run `work`; if the client disconnects first, cancel it and raise ClientGone."""
    return await unless(wait_for_disconnect(receive), work, ClientGone)


async def unless(stop: Awaitable[None], work: Awaitable[T], interrupted: Callable[[], Exception]) -> T:
    """Run `work`; if `stop` completes first, cancel the work, wait for it to unwind, and raise
    `interrupted()`. Cancelled from outside (an outer `unless` whose own stop came), it cancels the work
    the same way and lets the cancellation go on: only its own stop is `interrupted()`, so a client
    that leaves a stream is not mistaken for the server shutting down."""
    task = asyncio.ensure_future(work)
    watcher = asyncio.ensure_future(stop)
    try:
        await asyncio.wait({task, watcher}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopped = watcher.done() and not watcher.cancelled()
        watcher.cancel()
        if not task.done():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            if stopped:
                raise interrupted()
    return task.result()


async def until_disconnected(request: Request, work: Awaitable[T]) -> T:
    return await race_disconnect(request.receive, work)


async def while_client_waits(request: Request, work: Awaitable[T]) -> T:
    """Run `work`; cancel it (and wait for it to unwind) when the client disconnects (`ClientGone`) or the
    server begins shutting down (`ShuttingDown`), whichever comes first."""
    why: list[type[Exception]] = []

    async def stop() -> None:
        why.append(await _gone_or_stopping(request))

    return await unless(stop(), work, lambda: why[0]())


async def _gone_or_stopping(request: Request) -> type[Exception]:
    watchers = {asyncio.ensure_future(wait_for_disconnect(request.receive)): ClientGone}
    shutdown = getattr(request.state, "shutdown", None)  # the app's lifespan puts it in every request's state
    if shutdown is not None:
        watchers[asyncio.ensure_future(shutdown.wait())] = ShuttingDown
    try:
        done, _ = await asyncio.wait(watchers, return_when=asyncio.FIRST_COMPLETED)
        return watchers[next(iter(done))]
    finally:
        for watcher in watchers:
            watcher.cancel()
