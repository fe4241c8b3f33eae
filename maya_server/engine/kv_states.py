"""Saved KV states of conversations, so interleaved conversations keep their prefixes.

An engine with one context keeps the KV of one sequence: when conversations
A and B take turns, each turn overwrites the other's KV and every turn is
evaluated cold. A continuation's prompt begins with the tokens the previous
turn already processed (its prompt and its answer), so a copy of the KV taken
before it is overwritten, keyed by exactly the tokens it holds, lets the next
turn of that conversation skip them.

This module is the pure part: a bounded LRU of saved states keyed by token
ids, the longest-shared-prefix lookup, byte accounting and counters, and the
per-generation decision (`plan`): reuse the live KV, restore a saved state,
and whether the live KV must be saved first because the prompt will overwrite
it. It never touches llama.cpp; a state is an opaque object with a byte size.

Saving is lazy: the live KV is copied only when a prompt is about to discard
a worthwhile part of it (another conversation, or a restore). One conversation
continued turn after turn therefore costs no copies at all, and a saved state
that a newer one extends (the same conversation, later) is dropped as
superseded, since the newer one shares at least as much with any prompt.

Bounds: `max_entries` states and `max_bytes` bytes (states plus their keys);
either at 0 turns the cache off. An entry larger than `max_bytes` is not kept.
"""

from __future__ import annotations

import threading
from array import array
from collections import OrderedDict
from dataclasses import dataclass
from typing import Generic, Sequence, TypeVar

S = TypeVar("S")

MIN_GAIN_TOKENS = 16
"""Restore (or save) only for at least this many tokens of reuse. Measured on SmolLM2-135M:
restoring a 1500-token state takes ~2 ms and saving it ~17 ms, while evaluating one prompt
token takes 4-10 ms; below a handful of tokens the copies are not worth their memory."""

_TOKEN_BYTES = array("i").itemsize


def pack(tokens: Sequence[int]) -> bytes:
    """Token ids as native 32-bit ints: compact keys, compared with memcmp speed."""
    return array("i", tokens).tobytes()


def shared_prefix_length(a: bytes, b: bytes) -> int:
    """Tokens two packed sequences share from the start (binary search over slice equality)."""
    low, high = 0, min(len(a), len(b)) // _TOKEN_BYTES
    while low < high:
        middle = (low + high + 1) // 2
        end = middle * _TOKEN_BYTES
        if a[:end] == b[:end]:
            low = middle
        else:
            high = middle - 1
    return low


@dataclass(frozen=True)
class SavedState(Generic[S]):
    """A copy of the KV that holds exactly `key`'s tokens, positions 0..len-1."""

    key: bytes
    state: S
    size: int
    """Bytes held: the state plus its key."""

    @property
    def token_count(self) -> int:
        return len(self.key) // _TOKEN_BYTES


@dataclass(frozen=True)
class Plan(Generic[S]):
    """What to do before evaluating a prompt, decided on the engine thread."""

    reuse: int
    """Prompt tokens the KV will already hold, never the prompt's last (it must be evaluated to sample)."""
    restore: SavedState[S] | None
    """A saved state to load into the context first, or None to keep the live KV."""
    save_live: bool
    """Copy the live KV into the cache before the prompt (or a restore) overwrites it."""


@dataclass(frozen=True)
class KvStateStats:
    """A consistent snapshot of the cache's contents, limits and counters, for status and metrics."""

    entries: int
    bytes: int
    max_entries: int
    max_bytes: int
    hits: int
    """Generations that restored a saved state."""
    live_reuses: int
    """Generations that restored nothing because the live KV already held a worthwhile prefix."""
    misses: int
    """Generations that found no worthwhile prefix anywhere (fewer than MIN_GAIN_TOKENS)."""
    saves: int
    evictions: int
    """Entries dropped to make room (least recently used first)."""
    superseded: int
    """Entries dropped because a newer one holds the same tokens and more."""
    rejected: int
    """States not kept because they alone exceed `max_bytes`."""
    restore_seconds: float
    save_seconds: float


class KvStateCache(Generic[S]):
    """A bounded LRU of saved KV states keyed by the token ids they hold. Owns its lock: the
    engine thread mutates it while status and metrics read snapshots from the event loop."""

    def __init__(self, max_entries: int, max_bytes: int) -> None:
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self._entries: OrderedDict[bytes, SavedState[S]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        self._counts = dict(hits=0, live_reuses=0, misses=0, saves=0, evictions=0, superseded=0, rejected=0)
        self._seconds = dict(restore_seconds=0.0, save_seconds=0.0)

    @property
    def enabled(self) -> bool:
        return self.max_entries > 0 and self.max_bytes > 0

    def plan(self, live: Sequence[int], prompt: Sequence[int]) -> Plan[S]:
        """Keep the live KV, or restore the saved state sharing the longest prefix with `prompt`
        when that gains at least MIN_GAIN_TOKENS; save the live KV first when the choice would
        discard at least MIN_GAIN_TOKENS of it that no saved state already holds."""
        live_key, prompt_key = pack(live), pack(prompt)
        limit = max(len(prompt) - 1, 0)
        live_reuse = min(shared_prefix_length(live_key, prompt_key), limit)
        best = self._best(prompt_key) if self.enabled else None
        restore = None
        reuse = live_reuse
        if best is not None and min(best[1], limit) >= live_reuse + MIN_GAIN_TOKENS:
            restore, reuse = best[0], min(best[1], limit)
        kept = 0 if restore is not None else live_reuse
        save_live = self.enabled and len(live) - kept >= MIN_GAIN_TOKENS and not self._holds(live_key)
        return Plan(reuse, restore, save_live)

    def _best(self, prompt_key: bytes) -> tuple[SavedState[S], int] | None:
        with self._lock:
            scored = [(shared_prefix_length(e.key, prompt_key), e) for e in self._entries.values()]
        if not scored:
            return None
        shared, entry = max(scored, key=lambda pair: pair[0])
        return entry, shared

    def _holds(self, key: bytes) -> bool:
        """Whether some entry already holds these tokens (it is them, or extends them)."""
        with self._lock:
            return any(e.key.startswith(key) for e in self._entries.values())

    def fits(self, size: int) -> bool:
        """Whether a state of `size` bytes could be kept at all (ask before copying it)."""
        return self.enabled and size <= self.max_bytes

    def reject(self) -> None:
        """Count a state not saved because it alone exceeds `max_bytes`."""
        with self._lock:
            self._counts["rejected"] += 1

    def put(self, tokens: Sequence[int], state: S, state_size: int, seconds: float = 0.0) -> bool:
        """Keep `state` as holding `tokens`, dropping entries it supersedes and, least recently
        used first, those it has no room for. False (and nothing kept) when it alone is too big."""
        key = pack(tokens)
        entry = SavedState(key, state, state_size + len(key))
        with self._lock:
            self._seconds["save_seconds"] += seconds
            if not self.enabled or entry.size > self.max_bytes:
                self._counts["rejected"] += 1
                return False
            for old in [e for e in self._entries.values() if key.startswith(e.key)]:
                self._drop(old, "superseded")
            while self._entries and (
                len(self._entries) >= self.max_entries or self._bytes + entry.size > self.max_bytes
            ):
                self._drop(next(iter(self._entries.values())), "evictions")
            self._entries[key] = entry
            self._bytes += entry.size
            self._counts["saves"] += 1
            return True

    def _drop(self, entry: SavedState[S], reason: str) -> None:
        del self._entries[entry.key]
        self._bytes -= entry.size
        self._counts[reason] += 1

    def restored(self, entry: SavedState[S], seconds: float) -> None:
        """Count a hit and mark `entry` most recently used."""
        with self._lock:
            self._counts["hits"] += 1
            self._seconds["restore_seconds"] += seconds
            if entry.key in self._entries:
                self._entries.move_to_end(entry.key)

    def kept_live(self, reuse: int) -> None:
        """Count a generation served by the live KV alone: a live reuse, or a miss when it kept
        fewer than MIN_GAIN_TOKENS (such as a chat template's opening tokens)."""
        with self._lock:
            self._counts["live_reuses" if reuse >= MIN_GAIN_TOKENS else "misses"] += 1

    def discard(self, entry: SavedState[S]) -> None:
        """Forget an entry that failed to restore."""
        with self._lock:
            if self._entries.get(entry.key) is entry:
                del self._entries[entry.key]
                self._bytes -= entry.size

    def snapshot(self) -> KvStateStats:
        with self._lock:
            return KvStateStats(
                entries=len(self._entries), bytes=self._bytes,
                max_entries=self.max_entries, max_bytes=self.max_bytes,
                **self._counts, **self._seconds,
            )
