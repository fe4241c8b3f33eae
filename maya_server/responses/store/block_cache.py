"""A replica-local copy of the Redis store's item blocks, so a continuation does not move its whole history.

Why it is safe: a block is keyed by the digest of its bytes within an owner scope (`store/redis.py`), so a copy
held here can never be stale, only absent. What it must never do is vouch for a block Redis no longer has: the
store asks Redis to check every block a history needs (held here or not) in the same script that reads the
lineage, and only then takes the held ones from here. A block Redis lost is reported lost exactly as without
the cache (`stored_response_lost`).

Why per scope: the key is (scope, digest), never the digest alone, so two API keys that store the same item
never share a cached block (the same isolation Redis's keys have).

Bounds: the encoded bytes of the blocks held, at most `limit_bytes` (`--store-block-cache-bytes`; 0 turns it
off); a block larger than the whole bound is not cached. A block is decoded on first use and the decoded item
kept beside its bytes; the bound counts the encoded length, which is what the setting names (Python's decoded
dicts take a few times that). Eviction is CLOCK (second chance): a block used since the hand last passed is
spared once, so a chain read every turn stays while one-off reads go first.

The decoded items are shared between requests: they are read-only (`stored_items.replay` parses them into new
request models; nothing writes to a stored item).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

from .packing import unpack_item


class Block:
    """One block's bytes and, once asked for, its decoded item (shared, read-only)."""

    __slots__ = ("data", "_item", "used")

    def __init__(self, data: bytes) -> None:
        self.data = data
        self._item: dict | None = None
        self.used = False
        """Set on every hit; CLOCK's hand clears it once before evicting the block."""

    def item(self) -> dict:
        if self._item is None:
            self._item = unpack_item(self.data)
        return self._item


@dataclass
class BlockCacheStats:
    hits: int = 0
    """Blocks a history took from here (Redis checked that they exist, and sent no bytes for them)."""
    misses: int = 0
    """Blocks a history had to fetch from Redis."""
    evictions: int = 0


class BlockCache:
    """Blocks by (scope, digest), bounded in encoded bytes, CLOCK eviction; see the module docstring."""

    def __init__(self, limit_bytes: int) -> None:
        self.limit_bytes = limit_bytes
        self.bytes = 0
        self.stats = BlockCacheStats()
        self._blocks: OrderedDict[tuple[str, str], Block] = OrderedDict()
        """In CLOCK order: the hand is at the front; a spared block moves to the back."""
        self._per_scope: dict[str, int] = {}
        """Blocks held per scope: a scope with none skips the look-ahead round trip (`RedisStore.begin`)."""

    def holds_any(self, scope: str) -> bool:
        return scope in self._per_scope

    def held(self, scope: str, digests: list[str]) -> dict[str, Block]:
        """The blocks of `digests` held here, marked used. The caller keeps the returned objects for its request,
        so an eviction meanwhile takes nothing from it. Not counted as hits until the history is whole (`count`)."""
        found = {}
        for dg in digests:
            block = self._blocks.get((scope, dg))
            if block is not None:
                block.used = True
                found[dg] = block
        return found

    def count(self, hits: int, misses: int) -> None:
        self.stats.hits += hits
        self.stats.misses += misses

    def add(self, scope: str, dg: str, data: bytes) -> Block:
        """The block for `data`, held from now on when it fits the bound (the one already held when there is one)."""
        key = (scope, dg)
        block = self._blocks.get(key)
        if block is not None:
            return block
        block = Block(data)
        size = len(data)
        if size > self.limit_bytes:
            return block  # never held: larger than the whole cache (or the cache is off)
        self._make_room(self.limit_bytes - size)
        self._blocks[key] = block
        self.bytes += size
        self._per_scope[scope] = self._per_scope.get(scope, 0) + 1
        return block

    def _make_room(self, most: int) -> None:
        """Evict, CLOCK order, until at most `most` bytes are held."""
        while self.bytes > most:
            key, block = next(iter(self._blocks.items()))
            if block.used:
                block.used = False
                self._blocks.move_to_end(key)
                continue
            del self._blocks[key]
            self.bytes -= len(block.data)
            self.stats.evictions += 1
            left = self._per_scope[key[0]] - 1
            if left:
                self._per_scope[key[0]] = left
            else:
                del self._per_scope[key[0]]

    def report(self) -> dict:
        """For /v1/status (`responses.cache.block_cache`) and the metrics: aggregates only, no scope or digest."""
        return {"bytes": self.bytes, "limit_bytes": self.limit_bytes, "blocks": len(self._blocks),
                "hits": self.stats.hits, "misses": self.stats.misses, "evictions": self.stats.evictions}
