"""Consuming a generation to its end: `drain`, the one loop behind every answer and every background job.

Every consumer hands each pipeline event to its assembler and iterates to the
end: the pipeline ends with one `Finished` or `Failed` and then finishes its
own cleanup, so nothing after a failure is cut short. Closing the iterator is
what stops the engine and releases its admission when the consumer stops
early (a client gone, a job cancelled), so it is closed explicitly in a
`finally`, never left to the garbage collector.

It knows nothing of HTTP, so a background job (which has no request) drains
its generation with the same loop as a JSON answer; the HTTP answers built on
it live in `http/drain.py`.
"""

from __future__ import annotations

import asyncio
from inspect import isawaitable
from typing import AsyncIterator, Callable, TypeVar

E = TypeVar("E")


async def drain(events: AsyncIterator[E], deliver: Callable[[E], object], *, close_fully: bool = False) -> None:
    """Every event into `deliver` (awaited when it returns an awaitable: a save), then close `events`. `close_fully`: the close runs to its end even if
    this task is cancelled meanwhile (a cancel arriving then is absorbed), so the caller never goes on
    while the pipeline still holds the engine."""
    try:
        async for event in events:
            delivered = deliver(event)
            if isawaitable(delivered):
                await delivered
    finally:
        if close_fully:
            await _close_to_the_end(events)
        else:
            await events.aclose()


async def _close_to_the_end(events: AsyncIterator) -> None:
    closing = asyncio.ensure_future(events.aclose())
    while not closing.done():
        try:
            await asyncio.shield(closing)
        except asyncio.CancelledError:
            continue
    closing.result()
