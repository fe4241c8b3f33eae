"""Which replica was sent which prompt: a bounded table of prefix-block hashes.

A prompt is cut into blocks of `BLOCK_TOKENS` ids, and block `i`'s key hashes
block `i` together with the key of block `i - 1`, so one key stands for the
whole prefix up to the end of its block (as vLLM's prefix cache keys its
blocks). Each key remembers the replicas that were sent a prompt with that
prefix, and, for the last whole block of a prompt, that a prompt ended there
(its tip). A conversation's next turn extends its previous prompt, so it
passes that prompt's tip: `matches` gives, for each replica, how many leading
blocks of the longest prompt sent to it the new one extends. A new
conversation that only shares instructions with earlier ones passes no tip
(their prompts ended in their own messages) and matches nowhere, so routing
spreads it by load instead of piling every conversation that starts with a
popular system prompt onto the replica that saw it first
(`replicas/router.py`).

The token ids, not `prompt_cache_key`, are what is matched: the contract takes
that key as a hint only, and two requests with one history share a prefix
whatever keys they send.

The table is bounded (`replica_affinity_entries`): least recently used keys
go first. A prompt's keys are touched deepest first, so its shallow keys are
the most recent and an eviction trims prefixes from their deep ends (a gap
ends a match, so a deep key without its shallow ones would be dead weight).
Plain Python, no lock: it is used on the event loop only.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from typing import Sequence

BLOCK_TOKENS = 16
"""Ids per block: a continuation's new turn (tens of tokens) adds blocks of its own, and a 100k-token prompt is
6k keys, hashed in a few milliseconds."""


def block_keys(prompt_ids: Sequence[int], salt: str | None = None) -> list[int]:
    """The chained key of each whole block of `prompt_ids` (a partial last block has none). Python's hash of a
    tuple of ints is the same in every process (Maya replicas share keys: `shared_affinity.py`), and a 64-bit
    collision at worst sends one request elsewhere. A `salt` (the generation's `cache_salt`: caches isolated per
    API key) starts the chain, so one key's prompts never match another's: the table's hits, and where a request
    is routed, say nothing across keys. The salt enters as its BLAKE2b digest, not Python's `hash` of the string,
    which differs from process to process."""
    keys, previous = [], 0 if salt is None else _salt_seed(salt)
    for start in range(0, len(prompt_ids) - BLOCK_TOKENS + 1, BLOCK_TOKENS):
        previous = hash((previous, *prompt_ids[start:start + BLOCK_TOKENS]))
        keys.append(previous)
    return keys


def _salt_seed(salt: str) -> int:
    return int.from_bytes(hashlib.blake2b(salt.encode(), digest_size=8).digest(), "big", signed=True)


class PrefixTable:
    """Prefix-block keys → [replicas sent the prefix, replicas sent a prompt whose last whole block this is], as
    bit masks; at most `limit` keys."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._keys: OrderedDict[int, list[int]] = OrderedDict()
        self.evictions = 0
        self.lookups = 0
        self.hits = 0
        """Lookups that found a prompt sent before which the new one extends (a continuation)."""

    def __len__(self) -> int:
        return len(self._keys)

    def matches(self, keys: Sequence[int], replicas: int) -> list[int]:
        """For each of `replicas`, the blocks of the longest prompt sent to it that `keys` extends (0: none)."""
        depth = [0] * replicas
        alive = (1 << replicas) - 1
        for index, key in enumerate(keys):
            holders, tips = self._keys.get(key, (0, 0))
            alive &= holders
            if not alive:
                break
            ended = alive & tips
            for replica in range(replicas):
                if ended >> replica & 1:
                    depth[replica] = index + 1
        self.lookups += 1
        self.hits += any(depth)
        return depth

    def sent(self, keys: Sequence[int], replica: int) -> None:
        """`replica` was sent a prompt with these blocks: it holds them now (shallow keys touched last)."""
        if not keys:
            return
        bit = 1 << replica
        table = self._keys
        for key in reversed(keys):
            entry = table.get(key)
            if entry is None:
                table[key] = [bit, 0]
            else:
                entry[0] |= bit
                table.move_to_end(key)
        table[keys[-1]][1] |= bit
        while len(table) > self.limit:
            table.popitem(last=False)
            self.evictions += 1

    def forget(self, replica: int) -> None:
        """`replica` lost its cache (it failed, and may come back empty): it holds nothing any more."""
        mask = ~(1 << replica)
        table = self._keys
        for key in list(table):
            entry = table[key]
            entry[0] &= mask
            entry[1] &= mask
            if not entry[0]:
                del table[key]

    def describe(self) -> dict:
        return {"entries": len(self._keys), "limit": self.limit, "evictions": self.evictions,
                "lookups": self.lookups, "hits": self.hits, "block_tokens": BLOCK_TOKENS}

    def __repr__(self) -> str:
        return f"PrefixTable({len(self._keys)}/{self.limit} keys)"
