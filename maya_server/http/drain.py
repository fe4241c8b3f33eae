"""A generation consumed as an HTTP answer, for both APIs: a JSON body or SSE bytes.

    events ─► deliver / frames (the API's assembler) ─► a JSON body or SSE bytes
           └─► aclose() in `finally`, however the consumer stopped (a client gone, a stream broken)

The loop itself, `drain`, is HTTP-free and lives in `pipeline/drain.py`, so background jobs, which
have no request, use it without depending on Starlette; `answer_json` runs it while watching the client.
"""

from __future__ import annotations

from typing import AsyncIterator, Awaitable, Callable, TypeVar

from starlette.requests import Request
from starlette.responses import Response

from ..errors import ClientGone
from ..pipeline.drain import drain
from .disconnect import until_disconnected

E = TypeVar("E")

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


async def stream_frames(events: AsyncIterator[E], frames: Callable[[E], list[bytes] | Awaitable[list[bytes]]], *,
                        opening: Callable[[], list[bytes]], closing: Callable[[], list[bytes]]) -> AsyncIterator[bytes]:
    """A streamed answer's bytes: `opening()`, each event's `frames`, then `closing()` once the events
    ended by themselves. The opening is made when the stream starts, not when the response is built. `frames`
    may return an awaitable (the event that saves a response): it is awaited before its frames are sent."""
    try:
        for frame in opening():
            yield frame
        async for event in events:
            produced = frames(event)
            if not isinstance(produced, list):
                produced = await produced
            for frame in produced:
                yield frame
        for frame in closing():
            yield frame
    finally:
        await events.aclose()
