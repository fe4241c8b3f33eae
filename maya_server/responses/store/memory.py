"""The default response store: `ResponseStore` (`store/core.py`, this process's memory) behind the async interface.

The memory store does its work under its own lock and never waits, so each coroutine here runs to its end
without yielding: behaviour, bounds and figures are exactly the synchronous store's.
"""

from __future__ import annotations

import time
from contextlib import AbstractContextManager
from typing import Callable, Sequence

from ..settings import ResponsesSettings
from .core import Continuation, ResponseStore


class MemoryStore:
    backend = "memory"

    def __init__(self, settings: ResponsesSettings, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.core = ResponseStore(settings, clock=clock)
        self.settings = settings

    async def start(self) -> None:
        pass

    async def close(self) -> None:
        pass

    async def begin(self, owner: str, response_id: str) -> Continuation:
        return self.core.begin(owner, response_id)

    async def get(self, owner: str, response_id: str) -> dict:
        return self.core.get(owner, response_id)

    async def input_items(self, owner: str, response_id: str) -> list[tuple[str, bytes]]:
        return [(block.item_id, block.data) for block in self.core.input_blocks(owner, response_id)]

    def check_fits(self, expanded_bytes: int) -> None:
        self.core.check_fits(expanded_bytes)

    async def put(self, owner: str, response: dict, new_items: Sequence[dict], base: Continuation | None = None) -> None:
        self.core.put(owner, response, new_items, base)

    async def delete(self, owner: str, response_id: str) -> None:
        self.core.delete(owner, response_id)

    def assembling(self, nbytes: int) -> AbstractContextManager[None]:
        return self.core.assembling(nbytes)

    def stats(self) -> dict:
        return {"backend": "memory", "healthy": True, **self.core.stats()}

    async def ensure_available(self) -> None:
        pass

    async def fresh_stats(self) -> dict:
        return self.stats()

    async def owner_usage(self, owner: str) -> tuple[int, int]:
        return self.core.owner_usage(owner)
