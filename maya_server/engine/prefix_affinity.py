"""Which replica holds which prompt prefix: a bounded table of prefix-block hashes.

A prompt is cut into blocks of `BLOCK_TOKENS` ids, and block `i`'s key hashes
block `i` together with the key of block `i - 1`, so one key stands for the
whole prefix up to the end of its block (as vLLM's prefix cache keys its
blocks). Each key maps to the set of replicas (a bit mask) that were sent a
prompt with that prefix, and so have it in their KV or prompt cache unless
they evicted it since. Routing asks, for each replica, how many leading
tokens of a new prompt it holds (`matches`); the caller weighs that against
load (`replica_router.py`).

The token ids, not `prompt_cache_key`, are what is matched: the contract takes
that key as a hint only, and two clients sharing instructions share a prefix
whatever keys they send.

The table is bounded (`replica_affinity_entries`): least recently used keys
go first. A prompt's keys are touched deepest first, so its shallow keys are
the most recent and an eviction trims prefixes from their ends, never leaves
a deep key whose shallower ones are gone (a gap would end the match there
anyway). Plain Python, no lock: it is used on the event loop only.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Sequence

BLOCK_TOKENS = 16
"""Ids per block: a continuation's new turn (tens of tokens) adds blocks of its own, and a 100k-token prompt is
6k keys, hashed in a few milliseconds."""


def block_keys(prompt_ids: Sequence[int]) -> list[int]:
    """The chained key of each whole block of `prompt_ids` (a partial last block has none). Python's hash of a
    tuple of ints is the same in every process, and a 64-bit collision at worst sends one request elsewhere."""
    keys, previous = [], 0
    for start in range(0, len(prompt_ids) - BLOCK_TOKENS + 1, BLOCK_TOKENS):
        previous = hash((previous, *prompt_ids[start:start + BLOCK_TOKENS]))
        keys.append(previous)
    return keys


class PrefixTable:
    """Prefix-block keys → the bit mask of replicas that were sent them; at most `limit` keys."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._keys: OrderedDict[int, int] = OrderedDict()
        self.evictions = 0
        self.lookups = 0
        self.hits = 0
        """Lookups in which some replica held at least one block of the prompt."""

    def __len__(self) -> int:
        return len(self._keys)

    def matches(self, keys: Sequence[int], replicas: int) -> list[int]:
        """For each of `replicas`, the number of leading blocks of `keys` it was sent (0: none)."""
        depth = [0] * replicas
        alive = (1 << replicas) - 1
        for index, key in enumerate(keys):
            alive &= self._keys.get(key, 0)
            if not alive:
                break
            for replica in range(replicas):
                if alive >> replica & 1:
                    depth[replica] = index + 1
        self.lookups += 1
        self.hits += any(depth)
        return depth

    def sent(self, keys: Sequence[int], replica: int) -> None:
        """`replica` was sent a prompt with these blocks: it holds them now (shallow keys touched last)."""
        bit = 1 << replica
        table = self._keys
        for key in reversed(keys):
            table[key] = table.get(key, 0) | bit
            table.move_to_end(key)
        while len(table) > self.limit:
            table.popitem(last=False)
            self.evictions += 1

    def forget(self, replica: int) -> None:
        """`replica` lost its cache (it failed, and may come back empty): it holds nothing any more."""
        mask = ~(1 << replica)
        table = self._keys
        for key in list(table):
            left = table[key] & mask
            if left:
                table[key] = left
            else:
                del table[key]

    def describe(self) -> dict:
        return {"entries": len(self._keys), "limit": self.limit, "evictions": self.evictions,
                "lookups": self.lookups, "hits": self.hits, "block_tokens": BLOCK_TOKENS}

    def __repr__(self) -> str:
        return f"PrefixTable({len(self._keys)}/{self.limit} keys)"
