"""Reading a JSON request body: bounded in size and depth, parsed off the event loop when large.

A body over `max_body_bytes` is a 413 as soon as its `Content-Length` says so,
or as soon as the bytes received pass the limit, without reading the rest. A
client that leaves mid-upload is not an error (`ClientGone`, answered 499).
Large bodies are parsed, validated and rendered into a prompt in a worker
thread, so one 30 MB request does not stall `/health` and every other request
(`bench/large_body.py` measures it): the large preparation lane's, when the app
has one (`pipeline/prepare_lanes.py`), so that however many huge bodies arrive
at once, only that lane's few threads parse them.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Callable, TypeVar

from starlette.requests import ClientDisconnect, Request

from ..errors import ClientGone, PayloadTooLargeError
from ..pipeline.prepare_lanes import PrepareLanes
from ..util.validation import parse_json_object

T = TypeVar("T")

OFF_LOOP_BYTES = 256 * 1024
"""Bodies at least this large are parsed, validated and rendered into their prompt in a worker thread."""


@dataclass(frozen=True)
class BodyLimits:
    max_bytes: int
    max_depth: int
    lanes: PrepareLanes | None = None
    """Where a large body is parsed (the large lane); None: a thread of the default pool."""


async def read_json(request: Request, limits: BodyLimits, validate: Callable[[dict], T]) -> tuple[T, bool]:
    """The body as a JSON object checked by `validate` (which raises the request's 400s), and whether
    it was large: the caller then prepares the prompt (render, tokenize) off the loop too."""
    body = await _read(request, limits.max_bytes)
    large = len(body) >= OFF_LOOP_BYTES
    return await off_loop(large, lambda: validate(parse_json_object(body, limits.max_depth)), limits.lanes), large


async def off_loop(large: bool, work: Callable[[], T], lanes: PrepareLanes | None = None) -> T:
    """`work()` in a worker thread for a large request (the large lane of `lanes`, when given), inline for the
    usual small one (a thread hop costs more than parsing a few kilobytes)."""
    if not large:
        return work()
    return await lanes.run(True, work) if lanes is not None else await asyncio.to_thread(work)


async def _read(request: Request, limit: int) -> bytes:
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise _too_large(limit)
    chunks: list[bytes] = []
    size = 0
    try:
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise _too_large(limit)
            chunks.append(chunk)
    except ClientDisconnect:
        raise ClientGone() from None
    return b"".join(chunks)


def _too_large(limit: int) -> PayloadTooLargeError:
    return PayloadTooLargeError(
        f"The request body is larger than this server's limit of {limit} bytes (--max-body-bytes).",
    )
