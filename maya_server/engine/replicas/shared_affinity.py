"""Prefix affinity shared by several Maya replicas: which engine replica was sent a conversation's latest prompt.

Why: each Maya's affinity table (`prefix_affinity.py`) knows only the prompts it routed itself. Behind a load
balancer a conversation's turns land on different Maya replicas, and each would keep its own half of the
conversation on the engine replica it chose, so every turn prefills the other half again. With a shared store
(`--store redis://…`) the Maya replicas already share one Redis; they share there, too, where each prompt went.

What is shared is a prompt's *tip*: the chained key of its last whole block (`block_keys`, salted by the key's
cache scope, so one API key's prompts never match another's) → the URL of the engine replica it was sent to,
with a TTL (`replica_affinity_shared_ttl_s`). One key per routed prompt, written in batches (one pipelined
round trip) by a background task, so a stream never waits for the write. A chained key stands for its whole
prefix, so a tip that a new prompt passes is the conversation's previous turn, whichever Maya routed it. To
route, Maya asks for the new prompt's keys deeper than what its own table matched (at most
`replica_affinity_shared_lookup_blocks` from the deep end: one MGET), and the deepest tip found counts as the
local table's matches do. Only tips are shared, as locally: a new conversation that only shares a system
prompt passes no tip, and spreads by load rather than piling onto one replica (rendezvous hashing of the first
blocks would herd exactly those onto one replica). Redis holds hashes and replica URLs, never prompt text.

Faults cost routing quality only, never a request: a lookup that fails or takes longer than the command
timeout routes on the local table, and lookups then pause for `RETRY_S` (so a Redis that hangs costs one
request the timeout, not each); writes that fail are dropped; writes beyond `PENDING_LIMIT` waiting are
dropped. Everything is counted (`maya:replica_affinity_shared_*`). A replica that restarts empty leaves tips
naming it until they expire or are overwritten: a conversation sent there prefills once and continues there.

The backend (`AffinityBackend`) is given by the composition root (`app.py`): the engine layer does not know
Redis, only these two calls.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from typing import Protocol, Sequence

log = logging.getLogger("maya.engine")

RETRY_S = 5.0
"""Seconds shared lookups pause after one failed: Redis down or slow costs one request its timeout, not each."""
PENDING_LIMIT = 4096
"""Tips waiting to be written; past it new ones are dropped (counted): a Redis slower than the request rate."""


class AffinityBackend(Protocol):
    async def get(self, keys: Sequence[int]) -> list[str | None]:
        """The replica URL each block key names (None: none), in one round trip."""

    async def put(self, entries: dict[int, str], ttl_s: float) -> None:
        """Each block key → replica URL, expiring after `ttl_s`, in one round trip."""


@dataclass
class SharedFigures:
    lookups: int = 0
    hits: int = 0
    """Lookups that found a tip deeper than the local table's match (another Maya routed the previous turn)."""
    errors: int = 0
    """Lookups and writes that failed or timed out (routing fell back to the local table)."""
    skipped: int = 0
    """Lookups not made while paused after a failure."""
    records: int = 0
    """Tips written."""
    dropped: int = 0
    """Tips not written: too many waiting, or their write failed."""


class SharedAffinity:
    def __init__(self, backend: AffinityBackend, *, ttl_s: float, lookup_blocks: int, timeout_s: float,
                 clock=time.monotonic) -> None:
        self.backend = backend
        self.ttl_s = ttl_s
        self.lookup_blocks = lookup_blocks
        self.timeout_s = timeout_s
        self.figures = SharedFigures()
        self._clock = clock
        self._paused_until = 0.0
        self._pending: dict[int, str] = {}
        self._writer: asyncio.Task | None = None

    async def deepest(self, keys: Sequence[int], after: int) -> tuple[int, str] | None:
        """The deepest tip among `keys[after:]` (at most `lookup_blocks` from the end): its depth in blocks and the
        replica URL it was sent to; None if none, or on any failure (counted, then lookups pause)."""
        start = max(after, len(keys) - self.lookup_blocks)
        if start >= len(keys):
            return None
        f = self.figures
        if self._clock() < self._paused_until:
            f.skipped += 1
            return None
        f.lookups += 1
        try:
            urls = await asyncio.wait_for(self.backend.get(keys[start:]), self.timeout_s)
        except Exception as exc:  # an optimisation's failure: route on the local table
            self._failed("lookup", exc)
            self._paused_until = self._clock() + RETRY_S
            return None
        for offset in range(len(urls) - 1, -1, -1):
            if urls[offset] is not None:
                f.hits += 1
                return start + offset + 1, urls[offset]
        return None

    def sent(self, tip: int, url: str) -> None:
        """A prompt whose last whole block has key `tip` was sent to `url`: written soon, in the background."""
        if len(self._pending) >= PENDING_LIMIT and tip not in self._pending:
            self.figures.dropped += 1
            return
        self._pending[tip] = url
        if self._writer is None or self._writer.done():
            self._writer = asyncio.get_running_loop().create_task(self._write())

    async def _write(self) -> None:
        while self._pending:
            batch, self._pending = self._pending, {}
            try:
                await asyncio.wait_for(self.backend.put(batch, self.ttl_s), self.timeout_s)
                self.figures.records += len(batch)
            except Exception as exc:
                self._failed("write", exc)
                self.figures.dropped += len(batch)

    def _failed(self, what: str, exc: Exception) -> None:
        self.figures.errors += 1
        log.warning("shared prefix affinity: %s failed (%s); routing on this replica's own table", what,
                    type(exc).__name__)

    def describe(self) -> dict:
        return {"ttl_s": self.ttl_s, "lookup_blocks": self.lookup_blocks, "pending": len(self._pending),
                **vars(self.figures)}

    async def close(self) -> None:
        """Stop writing (what waits is dropped: tips are hints, and the connection is about to close)."""
        if self._writer is not None and not self._writer.done():
            self._writer.cancel()
            try:
                await self._writer
            except (asyncio.CancelledError, Exception):
                pass
        self._pending.clear()
