"""Token ids by key, bounded in bytes, least recently used dropped first: the one LRU both id caches share.

The embedded engine keeps prompt text runs' ids (`engine/llama_server/tokenizer.py`'s `TokenCache`), the generation
service the ids of its recent answers (`pipeline/spellings.SpellingMemory`). An entry costs what its key and
its ids take in memory, plus `ENTRY_OVERHEAD`; an entry larger than the whole limit is not kept. Thread-safe:
prompts are prepared in worker threads. `IdsCacheCollector` serves its size, limit, hits, misses and
evictions as `<prefix>_*` metrics.
"""

from __future__ import annotations

import sys
import threading
from array import array
from collections import OrderedDict
from typing import Callable, Generic, Hashable, Iterator, TypeVar

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

ENTRY_OVERHEAD = 200
"""Bytes an entry costs beyond its key's text and its ids: the dict slot, the LRU links, a key tuple."""

Key = TypeVar("Key", bound=Hashable)


def scope_bytes(scope: str) -> int:
    """What an entry's cache scope takes: an owner scope is a string of its own per entry, the shared scope
    ("") one string for all."""
    return sys.getsizeof(scope) if scope else 0


class IdsCache(Generic[Key]):
    def __init__(self, limit_bytes: int, key_bytes: Callable[[Key], int] = sys.getsizeof) -> None:
        """`key_bytes`: what a key's own text takes (a tuple key names the item that holds it)."""
        self.limit_bytes = limit_bytes
        self._key_bytes = key_bytes
        self.size_bytes = 0
        self.hits = 0
        self.misses = 0
        self.evictions = 0
        self._entries: OrderedDict[Key, array] = OrderedDict()
        self._lock = threading.RLock()  # re-entrant: a subclass may hold it around a lookup or a keep

    def __len__(self) -> int:
        return len(self._entries)

    def lookup(self, key: Key) -> array | None:
        with self._lock:
            ids = self._entries.get(key)
            if ids is None:
                self.misses += 1
                return None
            self._entries.move_to_end(key)
            self.hits += 1
            return ids

    def keep(self, key: Key, ids: array) -> None:
        cost = self._cost(key, ids)
        if cost > self.limit_bytes:
            return
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self.size_bytes -= self._cost(key, old)
            while self._entries and self.size_bytes + cost > self.limit_bytes:
                old_key, old_ids = self._entries.popitem(last=False)
                self.size_bytes -= self._cost(old_key, old_ids)
                self.evictions += 1
            self._entries[key] = ids
            self.size_bytes += cost

    def _cost(self, key: Key, ids: array) -> int:
        return self._key_bytes(key) + sys.getsizeof(ids) + ENTRY_OVERHEAD

    def clear(self) -> None:
        """Drop every entry (counted as evictions)."""
        with self._lock:
            self.evictions += len(self._entries)
            self._entries.clear()
            self.size_bytes = 0


class IdsCacheCollector:
    """`<prefix>_bytes`, `_limit_bytes`, `_entries`, `_hits`, `_misses`, `_evictions`; `what` names the cache's
    entries in the help texts, `setting` its limit's setting."""

    def __init__(self, cache: IdsCache, prefix: str, what: str, setting: str) -> None:
        self._cache, self._prefix, self._what, self._setting = cache, prefix, what, setting

    def collect(self) -> Iterator[Metric]:
        cache, prefix, what = self._cache, self._prefix, self._what
        yield GaugeMetricFamily(f"{prefix}_bytes", f"Bytes the ids of {what} take", value=cache.size_bytes)
        yield GaugeMetricFamily(f"{prefix}_limit_bytes", f"The limit of the ids of {what} kept ({self._setting})",
                                value=cache.limit_bytes)
        yield GaugeMetricFamily(f"{prefix}_entries", f"Entries kept: {what}", value=len(cache))
        yield CounterMetricFamily(f"{prefix}_hits", f"Lookups that found the ids of {what}", value=cache.hits)
        yield CounterMetricFamily(f"{prefix}_misses", f"Lookups that did not find the ids of {what}",
                                  value=cache.misses)
        yield CounterMetricFamily(f"{prefix}_evictions", f"Entries dropped to stay in the limit, or cleared: {what}",
                                  value=cache.evictions)
