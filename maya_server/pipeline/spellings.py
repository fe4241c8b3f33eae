"""The ids the model generated for its recent turns, recalled when a turn comes back as history.

Agents send each answer back in the next request: Chat and Responses clients
as the whole history, Responses with `previous_response_id` from the store,
the MCP loop as its next round. The turn comes back as its published text and
calls; `model/spelling.py` spells it with the ids the engine generated (and
still holds in its prompt cache) where they fit. Keyed by what a turn publishes
(its text and its calls' names and arguments), so it serves every API alike and
the store keeps no ids.

Scoped by API key (`cache_scope.py`): an entry is found only by requests of the
key whose request generated it, so no key learns from its prompt's length (or
from a hit) that another key's model wrote a text. Bounded in bytes
(`spelling_memory_mib`, least recently used out first; the key and the ids are
what an entry counts). The ids belong to one tokenizer: a
different one (another model) empties the memory, so no id is ever read in a
vocabulary it was not generated in. The key and ids say nothing the sender
did not already send; they are never logged.
"""

from __future__ import annotations

import sys
from array import array
from typing import Sequence

import orjson

from ..model.tokenizer import Tokenizer
from ..neutral.conversation import Message
from ..util.ids_cache import IdsCache, IdsCacheCollector, scope_bytes


def turn_key(text: str, calls: Sequence[tuple[str, str]]) -> bytes:
    """What a turn publishes, as it comes back: its text and its calls' (name, arguments)."""
    return orjson.dumps([text, [list(call) for call in calls]])


def _entry_key_bytes(key: tuple[str, bytes]) -> int:
    return scope_bytes(key[0]) + sys.getsizeof(key[1])


class SpellingMemory(IdsCache[tuple[str, bytes]]):
    """(cache scope, published turn (`turn_key`)) → generated ids, for one tokenizer, in `IdsCache`'s bounds."""

    def __init__(self, limit_bytes: int) -> None:
        super().__init__(limit_bytes, key_bytes=_entry_key_bytes)
        self._tokenizer: Tokenizer | None = None

    def remember(self, tokenizer: Tokenizer, scope: str, key: bytes, ids: array) -> None:
        """Keep the ids `tokenizer`'s model generated, in cache `scope`, for the turn that publishes as `key`."""
        if ids:
            with self._lock:  # the model check and the keep as one step: no id is kept under another model
                self._adopt(tokenizer)
                # a copy of its exact size: an appended array holds spare room
                self.keep((scope, key), array(ids.typecode, ids))

    def recall(self, tokenizer: Tokenizer, scope: str, turn: object) -> array | None:
        """The ids generated in cache `scope` for an assistant `turn` (a `Message`) in `tokenizer`'s vocabulary,
        if still kept."""
        if not isinstance(turn, Message) or turn.role != "assistant":
            return None
        key = turn_key(turn.text, [(call.name, call.arguments) for call in turn.tool_calls])
        with self._lock:  # the model check and the lookup as one step: no id is read in another vocabulary
            self._adopt(tokenizer)
            return self.lookup((scope, key))

    def _adopt(self, tokenizer: Tokenizer) -> None:
        """Another tokenizer (another model): what was kept is in a vocabulary no longer read, so it goes."""
        if tokenizer is not self._tokenizer:
            self.clear()
            self._tokenizer = tokenizer


class SpellingMemoryCollector(IdsCacheCollector):
    """`maya:spelling_memory_*`: its size against its limit, its hits, misses and evictions."""

    def __init__(self, memory: SpellingMemory) -> None:
        super().__init__(memory, "maya:spelling_memory", "generated answers", "spelling_memory_mib")
