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

Lineage hints: the blocks of one conversation sit in one lineage in Redis, appended to turn after turn (a
cut-back bumps its generation). Per scope this cache remembers, for its `HINTS` most recent lineages, the
generation and the number of leading slots it holds; the continuation's script then leaves out those slots'
bytes and sends the rest in the same round trip, whichever replica wrote them. A hint is only a guess at what is
held: the script still checks every block, the replica takes each block by the digest the script returns, and a
block evicted here meanwhile is fetched by a second read (`RedisStore.begin`).

The decoded items are shared between requests: they are read-only (`stored_items.replay` parses them into new
request models; nothing writes to a stored item).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

from .packing import unpack_item

HINTS = 32
"""Lineage hints kept per scope (while the scope has a block here): a key's concurrent conversations."""


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
        """Blocks held per scope; a scope's hints go when its last block does."""
        self._hints: dict[str, OrderedDict[str, tuple[str, int]]] = {}
        """scope → lineage id → (generation, leading slots held), most recently noted last."""

    def hints(self, scope: str) -> list:
        """The scope's hints as the READ script takes them: lineage, generation, slots, ..."""
        flat: list = []
        for lineage, (generation, slots) in self._hints.get(scope, {}).items():
            flat += [lineage, generation, slots]
        return flat

    def note(self, scope: str, lineage: str, generation: str, slots: int) -> None:
        """This replica holds (it just read or wrote) the first `slots` blocks of `lineage` at `generation`."""
        if scope not in self._per_scope:
            return  # nothing held for the scope (the cache is off, or every block was larger than it)
        hints = self._hints.setdefault(scope, OrderedDict())
        hints[lineage] = (generation, slots)
        hints.move_to_end(lineage)
        if len(hints) > HINTS:
            hints.popitem(last=False)

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
                self._hints.pop(key[0], None)

    def report(self) -> dict:
        """For /v1/status (`responses.cache.block_cache`) and the metrics: aggregates only, no scope or digest."""
        return {"bytes": self.bytes, "limit_bytes": self.limit_bytes, "blocks": len(self._blocks),
                "hits": self.stats.hits, "misses": self.stats.misses, "evictions": self.stats.evictions}
