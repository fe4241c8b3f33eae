"""What the Responses service needs of a response store, whichever keeps the bytes.

Two backends implement it: `MemoryStore` (`store/memory.py`, this process's memory: the default) and
`RedisStore` (`store/redis.py`, shared by every replica and kept across restarts); `store/opening.py` picks one
from `--store`. Operations that reach the stored bytes are coroutines, since Redis is a network round trip;
`check_fits`, `assembling` and `stats` only read settings and this process's figures, so they stay plain
calls. Every error is a `MayaError`: 404 for what the owner cannot see, 413 for what can never fit, 503 for
a full assembly budget or (Redis) a store that does not answer in time.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Protocol, Sequence


class StoredHistory(Protocol):
    """A stored response's full history (its input, then its output), held by one request until `release()`."""

    @property
    def history_bytes(self) -> int: ...

    def items(self) -> list[dict]: ...

    def release(self) -> None: ...


class ResponseStoreBackend(Protocol):
    backend: str
    """`memory` or `redis`: shown in /v1/status and the metrics."""

    async def start(self) -> None: ...

    async def close(self) -> None: ...

    async def begin(self, owner: str, response_id: str) -> StoredHistory:
        """The history a continuation sees; 404 at `previous_response_id` when this owner cannot see it."""

    async def get(self, owner: str, response_id: str) -> dict:
        """The stored response object, as it was when it finished."""

    async def input_items(self, owner: str, response_id: str) -> list[tuple[str, bytes]]:
        """(id, JSON) of each item of the response's input history, oldest first."""

    def check_fits(self, expanded_bytes: int) -> None:
        """Refuse (413), before generation, a snapshot that could never be stored."""

    async def put(self, owner: str, response: dict, new_items: Sequence[dict],
                  base: StoredHistory | None = None) -> None:
        """Store a finished response whole, or nothing (413 when no room can be made)."""

    async def delete(self, owner: str, response_id: str) -> None: ...

    def assembling(self, nbytes: int) -> AbstractContextManager[None]:
        """Hold `nbytes` of this process's assembly budget while a request expands stored JSON (503 when full)."""

    def stats(self) -> dict:
        """Aggregate figures for /v1/status and metrics: no owner or response identifiers."""

    async def ensure_available(self) -> None:
        """A 503 before generation when a store that was failing still does not answer."""

    async def fresh_stats(self) -> dict:
        """`stats()` with the shared figures read now (a store that does not answer shows `healthy: false`)."""

    async def owner_usage(self, owner: str) -> tuple[int, int]:
        """(entries, bytes) charged to one owner."""
