"""Image inputs, checked, fetched and decoded small before the engine sees a request.

    check (syntax, count: before any work) ─► fetch (image_fetch) or decode a data URL
        ─► decode and scale in a worker thread (image_decode), one image of a request at a time
        ─► a PNG within the encoder's bound (image_encoder) on every `ImagePart.data`

Bounded in every dimension: `image_max_count` images, `image_max_bytes` each on
the wire, `image_max_pixels` each (from the header, before decoding), the
decoded bytes a request's images add up to (`image_request_bytes`), and the
bytes all requests hold at once while their images load (`image_server_bytes`,
`image_memory`), fetches by `image_fetch_timeout` and `image_fetch_deadline`.
The images of a request load concurrently; the first that fails cancels the
others (their fetches close at once), and a cancelled load (client gone, server
stopping) waits for its decode to stop before it returns, so nothing of a
request outlives it. Every failure is a 400 `invalid_image` naming the image's
`param` (a full memory pool: a 429), and nothing has reached the engine.
"""

from __future__ import annotations

import asyncio
import binascii
import threading
import os
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Callable, TypeVar

import httpx

from ..neutral.conversation import Conversation, ImagePart, Message, ToolResult, image_parts
from ..errors import BadImage, ImageError, RateLimitError
from .decode import decode_to_png
from .fetch import ImageFetcher, Resolver, system_resolver, too_big
from .limits import ImageLimits
from .memory import Holding, ImageMemory
from .url import FetchUrl, check_image_url, is_data_url, parse_data_url, parse_fetch_url
from ..metrics import Metrics

T = TypeVar("T")
DECODE_THREADS = min(4, os.cpu_count() or 1)
"""Images decoded at once server-wide: more than the cores only adds memory and stalls the event loop's
thread for CPU time, without finishing any sooner."""
ENGINE_IMAGE_BYTES = 64 * 1024 * 1024
"""The most image bytes (PNG, after scaling) one request sends the engine: llama-server refuses a body over
100 MiB, and the images travel in it as base64 (4/3 larger) beside the prompt. The default limits stay
under it (8 images of at most 1536 x 1536 x 3 bytes)."""


class ImageLoader:
    """Example: `conversation = await loader.load(conversation)`; every ImagePart then has `data` (PNG).

    `resolver` and `transport` are the two ways out to the network (tests replace them); `memory` is the
    server's pool (one per app)."""

    def __init__(self, limits: ImageLimits, metrics: Metrics | None = None, *, resolver: Resolver = system_resolver,
                 transport: httpx.AsyncBaseTransport | None = None, memory: ImageMemory | None = None) -> None:
        self.limits = limits
        self.metrics = metrics
        self.memory = memory or ImageMemory(limits.server_bytes)
        self._fetcher = ImageFetcher(limits.fetch_limits(), resolver=resolver, transport=transport)
        self._threads = ThreadPoolExecutor(DECODE_THREADS, thread_name_prefix="maya-image")

    def close(self) -> None:
        """Let the decode threads go (those running finish first)."""
        self._threads.shutdown(wait=False, cancel_futures=True)

    def check(self, conversation: Conversation) -> None:
        """Refuse, before any work, too many images or a URL that is not a well-formed data or http(s) URL."""
        images = image_parts(conversation)
        if len(images) > self.limits.max_count:
            raise self._refuse(BadImage(f"At most {self.limits.max_count} images are accepted in one request "
                                        f"(this one has {len(images)}).", "too_many"),
                               images[self.limits.max_count].param)
        for image in images:
            try:
                check_image_url(image.url)
            except BadImage as exc:
                raise self._refuse(exc, image.param) from None

    async def load(self, conversation: Conversation) -> Conversation:
        images = [p for p in image_parts(conversation) if p.data is None]
        if not images:
            return conversation
        self.check(conversation)
        started = time.monotonic()
        with _RequestImages(self.memory, self.limits) as work:
            data = await _all_or_none([self._one(image, work) for image in images])
        total = sum(len(png) for png in data)
        if total > ENGINE_IMAGE_BYTES:
            raise self._refuse(BadImage(f"The request's images come to {total} bytes once scaled; the engine "
                                        f"takes at most {ENGINE_IMAGE_BYTES} in one request. Send fewer or "
                                        "smaller images (or lower image_max_side).", "engine_size"), images[0].param)
        if self.metrics is not None:
            self.metrics.image_seconds.observe(time.monotonic() - started)
        loaded = {id(image): replace(image, data=png) for image, png in zip(images, data)}
        return replace(conversation, turns=tuple(_with_parts(turn, loaded) for turn in conversation.turns))

    async def _one(self, image: ImagePart, work: "_RequestImages") -> bytes:
        try:
            return await self._load_one(image, work)
        except BadImage as exc:
            raise self._refuse(exc, image.param) from None
        except RateLimitError:
            self._count_rejection("memory_full")
            raise

    async def _load_one(self, image: ImagePart, work: "_RequestImages") -> bytes:
        if is_data_url(image.url):
            start, source = parse_data_url(image.url).start, "data_url"
            read_bytes = (len(image.url) - start) * 3 // 4
            if read_bytes > self.limits.max_bytes:
                raise too_big(self.limits.max_bytes)
            size = len(image.url) + read_bytes  # its ASCII copy and what it decodes to
            work.held.take(size, image.param)
            read: Callable[[], bytes | bytearray] = lambda: _base64(image.url, start)  # noqa: E731
        else:
            source = "url"
            raw = await self._fetched(parse_fetch_url(image.url), work, image.param)
            size = read_bytes = len(raw)
            read = lambda: raw  # noqa: E731
        async with work.decode_turn:  # one decode of a request at a time: its memory is one image's
            png = await work.in_thread(self._threads, lambda: self._decode(read(), work, image.param))
        work.held.give(size)
        if self.metrics is not None:
            self.metrics.images.labels(source).inc()
            self.metrics.image_bytes.inc(read_bytes)
        return png

    async def _fetched(self, url: FetchUrl, work: "_RequestImages", param: str | None) -> bytearray:
        if self.metrics is not None:
            self.metrics.image_fetches.inc()
        try:
            return await self._fetcher.fetch(url, work.held, param)
        finally:
            if self.metrics is not None:
                self.metrics.image_fetches.dec()

    def _decode(self, raw: bytes | bytearray, work: "_RequestImages", param: str | None) -> bytes:
        """In a worker thread: the PNG, with the decode's memory reserved from the pool while it runs."""
        reserved = []

        def reserve(decoded: int, n: int) -> None:
            work.reserve_decode(decoded, n, param)
            reserved.append(n)

        try:
            return decode_to_png(raw, max_pixels=self.limits.max_pixels, bound=self.limits.bound, reserve=reserve,
                                 cancelled=work.cancelled)
        finally:
            work.held.give(sum(reserved))

    def _refuse(self, exc: BadImage, param: str | None) -> ImageError:
        self._count_rejection(exc.reason)
        return ImageError(str(exc), param=param, reason=exc.reason)

    def _count_rejection(self, reason: str) -> None:
        if self.metrics is not None:
            self.metrics.image_rejections.labels(reason).inc()


class _RequestImages:
    """One request's image work: its share of the server's memory, the decoded bytes it has used of
    `image_request_bytes`, the turn its decodes take one at a time, and the flag that stops them."""

    def __init__(self, memory: ImageMemory, limits: ImageLimits) -> None:
        self.held: Holding = memory.holding()
        self.memory = memory
        self.limits = limits
        self.decoded = 0
        self.decode_turn = asyncio.Lock()
        self.cancelled = threading.Event()

    def reserve_decode(self, decoded: int, n: int, param: str | None) -> None:
        """Before a decode: its pixels count against the request's `image_request_bytes` (a 400) and the `n`
        bytes it needs in all are taken from the pool (a 429 when busy, a 400 when it could never fit)."""
        if n > self.memory.limit:
            raise BadImage(f"Decoding this image takes {n} bytes; the server holds at most {self.memory.limit} "
                           "bytes of images (setting image_server_bytes).", "memory")
        if self.decoded + decoded > self.limits.request_bytes:
            raise BadImage(f"This request's images decode to more than {self.limits.request_bytes} bytes "
                           "(setting image_request_bytes); send fewer or smaller images.", "request_bytes")
        self.held.take(n, param)
        self.decoded += decoded

    async def in_thread(self, threads: ThreadPoolExecutor, work: Callable[[], T]) -> T:
        """`work` on one of `threads`; if this task is cancelled meanwhile, the work is told to stop and (once
        started) waited for, so its memory is given back before the cancellation goes on."""
        future = asyncio.get_running_loop().run_in_executor(threads, work)
        try:
            return await asyncio.shield(future)
        except asyncio.CancelledError:
            self.cancelled.set()
            future.cancel()  # a decode still waiting for a thread never starts
            await asyncio.wait({future})
            if not future.cancelled():
                future.exception()  # its end (DecodeCancelled, say) is seen here, not logged as unretrieved
            raise

    def __enter__(self) -> "_RequestImages":
        return self

    def __exit__(self, *exc) -> None:
        self.cancelled.set()
        self.held.__exit__(*exc)


async def _all_or_none(work: list) -> list:
    """Every result in order; the first failure cancels the rest (and waits for them to end) and is raised,
    as is this task's own cancellation."""
    tasks = [asyncio.ensure_future(w) for w in work]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
    finally:
        for task in tasks:
            task.cancel()  # a no-op for a finished one
        await asyncio.gather(*tasks, return_exceptions=True)
    for task in tasks:
        if not task.cancelled() and task.exception() is not None:
            raise task.exception()
    return [task.result() for task in tasks]


def _base64(url: str, start: int) -> bytes:
    """The bytes of a data URL's base64 text from `start`, decoded from one ASCII copy of the URL."""
    try:
        return binascii.a2b_base64(memoryview(url.encode("ascii"))[start:], strict_mode=True)
    except (binascii.Error, ValueError):
        raise BadImage("The data URL's image is not valid base64.", "base64") from None


def with_image_data(conversation: Conversation, data: list[bytes]) -> Conversation:
    """The conversation with its images, in order, already loaded as `data` (what `load` made of them before,
    kept with a background task that another replica takes over): `load` then fetches none of them again.
    Unchanged when the count differs (the images are then loaded again)."""
    images = image_parts(conversation)
    if len(images) != len(data) or not images:
        return conversation
    loaded = {id(image): replace(image, data=png) for image, png in zip(images, data)}
    return replace(conversation, turns=tuple(_with_parts(turn, loaded) for turn in conversation.turns))


def _with_parts(turn, loaded: dict[int, ImagePart]):
    if not any(id(p) in loaded for p in turn.content):
        return turn
    assert isinstance(turn, (Message, ToolResult))
    return replace(turn, content=tuple(loaded.get(id(p), p) for p in turn.content))
