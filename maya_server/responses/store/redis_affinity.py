"""The engine replicas' shared prefix affinity (`engine/replicas/shared_affinity.py`) kept in the store's Redis.

One key per prompt tip, `<prefix>affinity:<16 hex digits>` (a salted hash of token ids, never text) → the URL
of the engine replica the prompt went to (without credentials), expiring after the TTL. Lookups are one MGET,
writes one pipeline of SETs (no transaction: each is a hint on its own). It uses the store's connection pool
but not `RedisLink.command`: a failure here is no request's 503 but a hint not had, which the caller counts.
"""

from __future__ import annotations

from typing import Sequence

from .redis_link import RedisLink

MASK = (1 << 64) - 1


class RedisAffinity:
    def __init__(self, link: RedisLink) -> None:
        self._client = link.client
        self._prefix = link.prefix + "affinity:"

    def name(self, key: int) -> str:
        return f"{self._prefix}{key & MASK:016x}"

    async def get(self, keys: Sequence[int]) -> list[str | None]:
        values = await self._client.mget([self.name(key) for key in keys])
        return [None if value is None else value.decode() for value in values]

    async def put(self, entries: dict[int, str], ttl_s: float) -> None:
        pipe = self._client.pipeline(transaction=False)
        milliseconds = max(1, round(ttl_s * 1000))
        for key, url in entries.items():
            pipe.set(self.name(key), url, px=milliseconds)
        await pipe.execute()
