"""The ids the model generated for its recent turns, recalled when a turn comes back as history.

Agents send each answer back in the next request: Chat and Responses clients
as the whole history, Responses with `previous_response_id` from the store,
the MCP loop as its next round. The turn comes back as its published text and
calls; `model/spelling.py` spells it with the ids the engine generated (and
still holds in its prompt cache) where they fit. Keyed by what a turn publishes
(its text and its calls' names and arguments), so it serves every API alike and
the store keeps no ids.

Bounded in bytes (`spelling_memory_mib`, least recently used out first; the key
and the ids are what an entry counts). The ids belong to one tokenizer: a
different one (another model) empties the memory, so no id is ever read in a
vocabulary it was not generated in. The key and ids say nothing the sender
did not already send; they are never logged.
"""

from __future__ import annotations

import sys
import threading
from array import array
from collections import OrderedDict
from typing import Iterator, Sequence

import orjson
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from ..model.tokenizer import Tokenizer
from ..neutral.conversation import Message

ENTRY_OVERHEAD = 200
"""Bytes an entry costs beyond its key and ids: the dict slot, the LRU links, the objects' headers."""


def turn_key(text: str, calls: Sequence[tuple[str, str]]) -> bytes:
    """What a turn publishes, as it comes back: its text and its calls' (name, arguments)."""
    return orjson.dumps([text, [list(call) for call in calls]])


class SpellingMemory:
    """Published turn → generated ids, for one tokenizer; thread-safe (prompts are prepared in worker threads)."""

    def __init__(self, limit_bytes: int) -> None:
        self.limit_bytes = limit_bytes
        self.size_bytes = 0
        self.hits = 0
        self.misses = 0
        self.evictions = 0
        self._entries: OrderedDict[bytes, array] = OrderedDict()
        self._tokenizer: Tokenizer | None = None
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._entries)

    def remember(self, tokenizer: Tokenizer, key: bytes, ids: array) -> None:
        """Keep the ids `tokenizer`'s model generated for the turn that publishes as `key`."""
        cost = _cost(key, ids)
        if not ids or cost > self.limit_bytes:
            return
        with self._lock:
            self._adopt(tokenizer)
            old = self._entries.pop(key, None)
            if old is not None:
                self.size_bytes -= _cost(key, old)
            while self._entries and self.size_bytes + cost > self.limit_bytes:
                old_key, old_ids = self._entries.popitem(last=False)
                self.size_bytes -= _cost(old_key, old_ids)
                self.evictions += 1
            self._entries[key] = ids
            self.size_bytes += cost

    def recall(self, tokenizer: Tokenizer, turn: object) -> array | None:
        """The ids generated for an assistant `turn` (a `Message`) in `tokenizer`'s vocabulary, if still kept."""
        if not isinstance(turn, Message) or turn.role != "assistant":
            return None
        key = turn_key(turn.text, [(call.name, call.arguments) for call in turn.tool_calls])
        with self._lock:
            self._adopt(tokenizer)
            ids = self._entries.get(key)
            if ids is None:
                self.misses += 1
                return None
            self._entries.move_to_end(key)
            self.hits += 1
            return ids

    def _adopt(self, tokenizer: Tokenizer) -> None:
        """Another tokenizer (another model): what was kept is in a vocabulary no longer read, so it goes."""
        if tokenizer is not self._tokenizer:
            self.evictions += len(self._entries)
            self._entries.clear()
            self.size_bytes = 0
            self._tokenizer = tokenizer


def _cost(key: bytes, ids: array) -> int:
    return sys.getsizeof(key) + sys.getsizeof(ids) + ENTRY_OVERHEAD


class SpellingMemoryCollector:
    """`maya:spelling_memory_*`: its size against its limit, its hits, misses and evictions."""

    def __init__(self, memory: SpellingMemory) -> None:
        self._memory = memory

    def collect(self) -> Iterator[Metric]:
        memory = self._memory
        yield GaugeMetricFamily("maya:spelling_memory_bytes", "Bytes the generated turns' ids take", value=memory.size_bytes)
        yield GaugeMetricFamily("maya:spelling_memory_limit_bytes", "The limit of generated turns' ids kept "
                                "(spelling_memory_mib)", value=memory.limit_bytes)
        yield GaugeMetricFamily("maya:spelling_memory_entries", "Generated turns whose ids are kept", value=len(memory))
        yield CounterMetricFamily("maya:spelling_memory_hits", "Assistant turns of a prompt whose generated ids were kept",
                                  value=memory.hits)
        yield CounterMetricFamily("maya:spelling_memory_misses", "Assistant turns of a prompt whose ids were not kept",
                                  value=memory.misses)
        yield CounterMetricFamily("maya:spelling_memory_evictions", "Generated turns' ids dropped (the limit, a new "
                                  "model)", value=memory.evictions)
