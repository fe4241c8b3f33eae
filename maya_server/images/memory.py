"""The image bytes Maya holds at once, server-wide, and what one request may hold.

Why: a 107 KB PNG can decode to 133 MB of pixels, so the wire size of images
says nothing about the memory they take. Every byte an image costs while it
loads is taken from one server-wide pool (`image_server_bytes`) before it
exists: a fetched body as each piece arrives, a data URL's decoded bytes, and
the pixels of a decode (width x height x bytes per pixel as decoded, plus the
scaled copy). A request whose next piece does not fit gets a 429
(`image_memory_full`, retry after a second): the pool is busy with other
requests. What a request's decodes add up to is bounded too
(`image_request_bytes`, a 400: the request can never fit), as is a single
image's need against the whole pool (a 400). The pool is a counter behind a
lock, taken from worker threads and the event loop alike.

    pool = ImageMemory(512 << 20)
    with pool.holding() as held:
        held.take(n, param)          # RateLimitError when the pool is full
        ...
    # everything taken is given back here, however the work ended
"""

from __future__ import annotations

import threading

from ..errors import RateLimitError

RETRY_AFTER_S = 1
"""What a 429 for a full pool tells the client to wait (`Retry-After`)."""


class ImageMemory:
    """A server's pool of image bytes."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._in_use = 0
        self._lock = threading.Lock()

    @property
    def in_use(self) -> int:
        return self._in_use

    def holding(self) -> "Holding":
        """What one request takes from the pool, given back together."""
        return Holding(self)

    def _take(self, n: int) -> bool:
        with self._lock:
            if self._in_use + n > self.limit:
                return False
            self._in_use += n
            return True

    def _give(self, n: int) -> None:
        with self._lock:
            self._in_use -= n

    def __repr__(self) -> str:
        return f"ImageMemory({self._in_use}/{self.limit})"


class Holding:
    """One request's share of the pool: `take` raises a 429 when the pool cannot give `n` bytes now;
    `give` returns part of it early; leaving the `with` returns the rest."""

    def __init__(self, memory: ImageMemory) -> None:
        self._memory = memory
        self._held = 0
        self._lock = threading.Lock()

    def take(self, n: int, param: str | None) -> None:
        if not self._memory._take(n):
            raise RateLimitError(
                f"The server is decoding as many images as its memory allows ({self._memory.limit} bytes, "
                f"setting image_server_bytes); retry after {RETRY_AFTER_S}s.",
                param=param, code="image_memory_full", retry_after=RETRY_AFTER_S,
            )
        with self._lock:
            self._held += n

    def give(self, n: int) -> None:
        with self._lock:
            n = min(n, self._held)
            self._held -= n
        self._memory._give(n)

    def __enter__(self) -> "Holding":
        return self

    def __exit__(self, *exc) -> None:
        self.give(self._held)

    def __repr__(self) -> str:
        return f"Holding({self._held})"
