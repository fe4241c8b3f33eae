"""One way to consume a generation, for both APIs' JSON and SSE answers and for background jobs.

    events ─► deliver / frames (the API's assembler) ─► a JSON body, SSE bytes, or a job's event log
           └─► aclose() in `finally`, however the consumer stopped

Every consumer hands each pipeline event to its assembler and iterates to the
end: the pipeline ends with one `Finished` or `Failed` and then finishes its
own cleanup, so nothing after a failure is cut short. Closing the iterator is
what stops the engine and releases its admission when the consumer stops
early (a client gone, a stream broken, a job cancelled), so it is closed
explicitly in a `finally`, never left to the garbage collector.
"""

from __future__ import annotations

import asyncio
from typing import AsyncIterator, Callable, TypeVar

from starlette.requests import Request
from starlette.responses import Response

from ..errors import ClientGone
from .disconnect import until_disconnected

E = TypeVar("E")


async def drain(events: AsyncIterator[E], deliver: Callable[[E], object], *, close_fully: bool = False) -> None:
    """Every event into `deliver`, then close `events`. `close_fully`: the close runs to its end even if
    this task is cancelled meanwhile (a cancel arriving then is absorbed), so the caller never goes on
    while the pipeline still holds the engine."""
    try:
        async for event in events:
            deliver(event)
    finally:
        if close_fully:
            await _close_to_the_end(events)
        else:
            await events.aclose()


async def answer_json(request: Request, events: AsyncIterator[E], deliver: Callable[[E], object], *,
                      on_close: Callable[[], None], answer: Callable[[], Response]) -> Response:
    """A non-streamed answer: drain `events` while watching the client, then `answer()`; a 499 when the
    client went away first (the drain is cancelled, which stops the engine). `on_close` runs either way."""
    try:
        await until_disconnected(request, drain(events, deliver))
    except ClientGone:
        return Response(status_code=499)  # nobody is listening
    finally:
        on_close()
    return answer()


async def stream_frames(events: AsyncIterator[E], frames: Callable[[E], list[bytes]], *,
                        opening: Callable[[], list[bytes]], closing: Callable[[], list[bytes]]) -> AsyncIterator[bytes]:
    """A streamed answer's bytes: `opening()`, each event's `frames`, then `closing()` once the events
    ended by themselves. The opening is made when the stream starts, not when the response is built."""
    try:
        for frame in opening():
            yield frame
        async for event in events:
            for frame in frames(event):
                yield frame
        for frame in closing():
            yield frame
    finally:
        await events.aclose()


async def _close_to_the_end(events: AsyncIterator) -> None:
    closing = asyncio.ensure_future(events.aclose())
    while not closing.done():
        try:
            await asyncio.shield(closing)
        except asyncio.CancelledError:
            continue
    closing.result()
