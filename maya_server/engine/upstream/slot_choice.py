"""Which llama-server slot a prompt goes to: the free one whose tokens share the longest prefix with it.

llama-server keeps each slot's last sequence (its prompt and the tokens it generated) in the slot's KV
cache, and copies idle slots' states into its RAM prompt cache (`--cache-ram`). Left to itself it gives
a request the idle slot most similar to the prompt, and looks in the RAM cache for a better state only
when that slot would lose over half its tokens. With long shared instructions and more sessions than
slots, every slot looks alike (the instructions are 0.9 of any prompt) and keeps most of its tokens, so a
continuation whose own slot another session has taken is evaluated again from the end of the
instructions, although its own state sits in the RAM cache: on the agent trace (`bench/agent_trace.py`,
8 sessions on 4 slots) ~160 tokens a turn instead of ~60, a cached ratio of 0.88–0.91.

Maya sends the sequences, so it knows what each slot holds: `SlotChooser` records, per slot, the ids of
the prompt it last sent there and the ids generated, and gives each request the free slot sharing the
longest prefix with its prompt (`id_slot`; a tie goes to the least recently used). When that slot holds
the conversation itself, llama-server reuses it in place; when none does, the embedded child, started with
`--slot-prompt-similarity 1` (`llama_server/child.py`), looks in its RAM cache before using the slot and
restores the conversation's own state from there. A record is a hint, never a promise: llama-server
computes the real shared prefix itself, so a wrong record costs time, never a wrong answer.

With the caches isolated per API key (`pipeline/cache_scope.py`), each record also says whose sequence the slot
holds (the generation's `cache_salt`): a request is given the free slot sharing most with its prompt among
its own key's slots and empty ones, and only when none is free another key's slot, least recently used, which
`reuses` then says it must not reuse (the request is sent with `cache_prompt: false`, so llama-server
evaluates the whole prompt and its `cached_tokens` is 0). llama-server's RAM cache is shared by every slot and
keyed by nothing but the tokens, so isolation also needs it off (`engine_setup` starts the child with
`--cache-ram 0` then).

Memory: one record per slot, each at most the slot's context (`--slots` × `--ctx` ids, 4 bytes each),
shown by `maya:engine_slot_record_tokens`. Used from the event loop only (take and release run in the
engine's stream), so it needs no lock.
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass
from typing import Iterator, Sequence

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

CHUNK_BYTES = 4096
"""Bytes compared at once while looking for where two records part (a C comparison each)."""


def _encode(ids: Sequence[int]) -> bytes:
    return array("i", ids).tobytes()


def common_prefix(a: bytes, b: bytes) -> int:
    """How many leading 4-byte ids `a` and `b` share: whole chunks compared in C, then the parting chunk's ids."""
    limit = min(len(a), len(b))
    start = 0
    while start < limit and a[start:start + CHUNK_BYTES] == b[start:start + CHUNK_BYTES]:
        start += CHUNK_BYTES
    start = min(start, limit)
    while start < limit and a[start:start + 4] == b[start:start + 4]:
        start += 4
    return start // 4


@dataclass
class _Slot:
    held: bytes = b""
    """The ids the slot holds, as `array('i')` bytes."""
    holder: str | None = None
    """The cache salt of the generation that left the slot as it is (None: nobody's, or the shared scope)."""
    busy: bool = False
    last_used: int = 0


class SlotChooser:
    """Per-slot records of the ids each llama-server slot holds, and the choice of a slot for a prompt."""

    def __init__(self, slots: int, max_tokens: int) -> None:
        self._slots = [_Slot() for _ in range(slots)]
        self._max_bytes = 4 * max_tokens
        self._clock = 0
        self.choices = {"whole": 0, "prefix": 0, "lru": 0}
        """How slots were given: `whole`, its record is all a prefix of the prompt (the slot holds this
        conversation, id for id); `prefix`, a part is shared (instructions, or a history rendered to other ids);
        `lru`, nothing is shared (the least recently used)."""
        self.reused_tokens = 0
        """Prompt tokens the chosen slots' records shared with their prompts, summed."""

    def take(self, prompt_ids: Sequence[int] | None, salt: str | None = None) -> int | None:
        """The free slot for `prompt_ids` (None: ids unknown, e.g. an image prompt, which takes the least
        recently used), marked busy until `release`; None when Maya sees every slot busy (llama-server then
        chooses). With a `salt` (the caches isolated per key), a slot another salt left is taken only when no
        slot of this salt or nobody's is free, and never counts as shared (`reuses` says so)."""
        prompt = _encode(prompt_ids) if prompt_ids else b""
        best, best_rank = None, None
        for index, slot in enumerate(self._slots):
            if slot.busy:
                continue
            foreign = not self.reuses(index, salt)
            shared = common_prefix(slot.held, prompt) if prompt and not foreign else 0
            rank = (not foreign, shared, -slot.last_used)  # own or empty first, then the most shared, then LRU
            if best_rank is None or rank > best_rank:
                best, best_rank = index, rank
        if best is None:
            return None
        best_shared = best_rank[1]
        chosen = self._slots[best]
        chosen.busy = True
        whole = best_shared > 0 and 4 * best_shared == len(chosen.held)
        self.choices["whole" if whole else "prefix" if best_shared > 0 else "lru"] += 1
        self.reused_tokens += max(0, best_shared)
        return best

    def reuses(self, index: int, salt: str | None) -> bool:
        """Whether a generation of `salt` may reuse what slot `index` holds: always when the caches are shared
        (no salt), else when the slot holds that salt's sequence or nobody's."""
        holder = self._slots[index].holder
        return salt is None or holder is None or holder == salt

    def release(self, index: int, held_ids: Sequence[int] | None, salt: str | None = None) -> None:
        """The slot is free again and holds `held_ids` (its prompt and generated ids; None: unknown), left by a
        generation of `salt`: whatever it holds now is that salt's."""
        slot = self._slots[index]
        held = _encode(held_ids) if held_ids else b""
        slot.holder = salt
        slot.held = held[:self._max_bytes]
        slot.busy = False
        self._clock += 1
        slot.last_used = self._clock

    @property
    def recorded_tokens(self) -> int:
        return sum(len(slot.held) for slot in self._slots) // 4

    def held(self, index: int) -> list[int]:
        """The ids recorded for slot `index` (what tests inspect)."""
        return array("i", self._slots[index].held).tolist()

    def __repr__(self) -> str:
        return (f"SlotChooser({len(self._slots)} slots, {self.recorded_tokens} ids recorded, "
                f"busy {[i for i, s in enumerate(self._slots) if s.busy]})")


class SlotChooserCollector:
    """`maya:engine_slot_*`: the records' size and how slots were chosen, read at scrape time."""

    def __init__(self, chooser: SlotChooser) -> None:
        self._chooser = chooser

    def collect(self) -> Iterator[Metric]:
        chooser = self._chooser
        yield GaugeMetricFamily("maya:engine_slot_record_tokens",
                                "Token ids Maya records of what the engine's slots hold (bounded by slots x context)",
                                value=chooser.recorded_tokens)
        choices = CounterMetricFamily("maya:engine_slot_choices", "Slots chosen for requests, by what decided",
                                      labels=["by"])
        for by, count in chooser.choices.items():
            choices.add_metric([by], count)
        yield choices
        yield CounterMetricFamily("maya:engine_slot_prefix_tokens",
                                  "Prompt tokens the chosen slots' records shared with the prompts",
                                  value=chooser.reused_tokens)
