"""The bounded in-memory store of finished responses, isolated per API key.

Layout, chosen so a long conversation costs its unique items once and a
continuation never walks its ancestors:

    Block      one item's immutable JSON (an input or output item), refcounted
    Lineage    an append-only flat list of blocks shared by one chain of
               responses of one owner; a response's input history is
               `blocks[:input_end]` and its output `blocks[input_end:output_end]`
    Entry      one stored response: its lineage slice, its own small JSON
               (id, status, times, usage) and a shared "envelope" block (the
               request-derived fields, usually identical turn after turn)

What those bytes are, and how a response is split into them and put back
together, is `store_packing`'s; this module keeps them: sharing, refcounts,
limits, TTL and LRU.

Continuing response k appends the new turn's blocks to k's lineage when k is
its tip, so a 500-turn chain holds ~1000 slots, not ~250,000; continuing from
an older response (a branch) copies the slice's references into a new lineage,
never the items. Deleting or evicting an ancestor releases only what no
descendant still references; deleting a tip releases the items past the
lineage's longest remaining use. A continuation in progress pins its lineage
(`Continuation`), so its history cannot vanish under it.

Limits (see `ResponsesSettings`): entries, bytes (unique blocks + entry JSON +
8 bytes per lineage slot), a fixed TTL from completion (reads do not extend
it; expired entries are dropped on every access and insertion), LRU eviction
under pressure, optional per-owner quotas (evicting that owner's own LRU
entries), a single-snapshot limit, and an admission budget for concurrently
expanded snapshots (503 when exhausted, never a truncated history). Every
operation takes the store's one lock; JSON is encoded and decoded outside it.
"""

from __future__ import annotations

import threading
import time
from collections import Counter, OrderedDict
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import Callable, Iterator, Sequence

from ...errors import NotFoundError, ServiceUnavailableError, StorageCapacityError
from ...util.echoed import echoed
from ..settings import ResponsesSettings
from .packing import pack_envelope, pack_item, pack_own, unpack_item, unpack_response

REFERENCE_BYTES = 8
"""What one lineage slot (a reference to a block) counts for."""


@dataclass(eq=False)
class Block:
    data: bytes
    item_id: str = ""
    refs: int = 0

    @property
    def size(self) -> int:
        return len(self.data)


@dataclass(eq=False)
class Lineage:
    owner: str
    blocks: list[Block] = field(default_factory=list)
    offsets: list[int] = field(default_factory=lambda: [0])
    """offsets[i] = bytes of blocks[:i], so any slice's expanded size is one subtraction."""
    users: Counter[int] = field(default_factory=Counter)
    """How many entries and in-flight continuations use `blocks[:end]`, by end. Slots past the
    largest end in use are released (a deleted tip frees its items); at no users, all are."""


@dataclass(eq=False)
class Entry:
    id: str
    owner: str
    lineage: Lineage
    input_end: int
    output_end: int
    own: bytes
    envelope: Block
    expires_at: float

    @property
    def expanded_bytes(self) -> int:
        """Its full history, output and metadata as JSON: what a continuation expands."""
        return self.lineage.offsets[self.output_end] + len(self.own) + self.envelope.size

    @property
    def response_bytes(self) -> int:
        """Its output and metadata as JSON: what retrieving the response expands."""
        offsets = self.lineage.offsets
        return offsets[self.output_end] - offsets[self.input_end] + len(self.own) + self.envelope.size


@dataclass
class Continuation:
    """A pinned view of a stored response's full history (its input, then its output), owned by
    one request until `release()`; the bytes it expands are held in the assembly budget."""

    store: "ResponseStore"
    lineage: Lineage
    end: int
    reserved: int
    released: bool = False

    @property
    def blocks(self) -> list[Block]:
        return self.lineage.blocks[: self.end]

    @property
    def history_bytes(self) -> int:
        return self.lineage.offsets[self.end]

    def items(self) -> list[dict]:
        return [unpack_item(block.data) for block in self.blocks]

    def release(self) -> None:
        if not self.released:
            self.released = True
            self.store._release(self)


@dataclass
class StoreCounters:
    hits: int = 0
    misses: int = 0
    writes: int = 0
    rejections: int = 0
    evictions: int = 0
    expirations: int = 0
    deletions: int = 0
    assembly_rejections: int = 0
    write_seconds: float = 0.0
    assembly_seconds: float = 0.0
    assemblies: int = 0


MEMORY = "in this server's memory"
"""Where the memory store keeps responses, as its 404 says it."""


def not_stored_hint(kept: str) -> str:
    """Why an id may be unknown: the commonest cause is a turn that was never stored. Maya's default `store` is
    false where OpenAI's is true, so a client that continues with `previous_response_id` without asking to store
    its turns gets this 404 on turn 2; it names the fix of each client known to do so. `kept` says where this
    store keeps them (the memory store and the Redis store word it each their own)."""
    return (
        f"Only responses created with \"store\": true are kept (omitting store means false), {kept}, "
        "for a limited time; send the whole history in 'input' instead, or store the earlier turn "
        "(openai-agents: ModelSettings(store=True); LangChain: ChatOpenAI(store=True))."
    )


def not_found(response_id: str, kept: str, param: str | None = None) -> NotFoundError:
    """The 404 for an id this owner has no stored response under; the id is quoted at most `ECHOED_CHARS` long."""
    return NotFoundError(f"Response with id '{echoed(response_id)}' not found. {not_stored_hint(kept)}", param=param)


class ResponseStore:
    def __init__(self, settings: ResponsesSettings, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.settings = settings
        self.clock = clock
        self.counters = StoreCounters()
        self._lock = threading.Lock()
        self._entries: OrderedDict[str, Entry] = OrderedDict()  # least recently used first
        self._expiry: OrderedDict[str, Entry] = OrderedDict()
        """Insertion order = expiry order (the TTL is fixed). Every removal takes its entry out of here
        too, so nothing evicted or deleted lingers behind an entry that is still alive."""
        self._envelopes: dict[tuple[str, bytes], Block] = {}
        self._bytes = 0
        self._owner_bytes: Counter[str] = Counter()
        self._owner_entries: Counter[str] = Counter()
        self._assembling = 0

    # -- reads ------------------------------------------------------------------------
    def begin(self, owner: str, response_id: str) -> Continuation:
        """Pin `response_id`'s history for a continuation; 404 (at `previous_response_id`) when this
        owner cannot see it."""
        started = time.perf_counter()
        with self._lock:
            entry = self._find(owner, response_id, "previous_response_id")
            self._reserve(entry.expanded_bytes)
            entry.lineage.users[entry.output_end] += 1
            continuation = Continuation(self, entry.lineage, entry.output_end, entry.expanded_bytes)
            self.counters.assemblies += 1
            self.counters.assembly_seconds += time.perf_counter() - started
        return continuation

    def get(self, owner: str, response_id: str) -> dict:
        """The stored response object, as it was when it finished."""
        with self._lock:
            entry = self._find(owner, response_id)
            own, envelope = entry.own, entry.envelope.data
            outputs = entry.lineage.blocks[entry.input_end : entry.output_end]
        with self.assembling(entry.response_bytes):
            return unpack_response(own, envelope, (block.data for block in outputs))

    def input_blocks(self, owner: str, response_id: str) -> list[Block]:
        """The blocks of a response's input history, oldest first (immutable; decode outside the lock)."""
        with self._lock:
            entry = self._find(owner, response_id)
            return entry.lineage.blocks[: entry.input_end]

    @contextmanager
    def assembling(self, nbytes: int) -> Iterator[None]:
        """Hold `nbytes` of the assembly budget while a request expands stored JSON."""
        with self._lock:
            self._reserve(nbytes)
        try:
            yield
        finally:
            with self._lock:
                self._assembling -= nbytes

    # -- writes -----------------------------------------------------------------------
    def check_fits(self, expanded_bytes: int) -> None:
        """Refuse, before generation, a snapshot that could never be stored."""
        limit = self.settings.snapshot_limit
        if expanded_bytes > limit:
            with self._lock:
                self.counters.rejections += 1
            raise _too_large(expanded_bytes, limit)

    def put(self, owner: str, response: dict, new_items: Sequence[dict], base: Continuation | None = None) -> None:
        """Store a finished response: `new_items` are this turn's input items (with ids), appended
        to `base`'s history; `response["output"]` its output items. Raises StorageCapacityError."""
        started = time.perf_counter()
        blocks = [Block(pack_item(item), item["id"]) for item in (*new_items, *response["output"])]
        own = pack_own(response)
        envelope = pack_envelope(response)
        history = base.history_bytes if base else 0
        expanded = history + sum(b.size for b in blocks) + len(own) + len(envelope)
        self.check_fits(expanded)
        with self._lock:
            now = self.clock()
            self._purge(now)
            lineage = self._lineage_for(owner, base)
            input_end = len(lineage.blocks) + len(new_items)
            for block in blocks:
                self._append(lineage, block)
            entry = Entry(response["id"], owner, lineage, input_end, len(lineage.blocks), own,
                          self._envelope(owner, envelope), now + self.settings.cache_ttl_s)
            lineage.users[entry.output_end] += 1
            self._charge(owner, len(own))
            self._entries[entry.id] = entry
            self._owner_entries[owner] += 1
            self._expiry[entry.id] = entry
            if not self._make_room(entry):
                self._remove(entry)  # its blocks go with it: nobody else uses the slots it appended
                self.counters.rejections += 1
                raise no_room()
            self.counters.writes += 1
            self.counters.write_seconds += time.perf_counter() - started

    def delete(self, owner: str, response_id: str) -> None:
        with self._lock:
            entry = self._find(owner, response_id)
            self._remove(entry)
            self.counters.deletions += 1

    # -- introspection ----------------------------------------------------------------
    def stats(self) -> dict:
        """Aggregate figures for /v1/status and metrics: no owner or response identifiers."""
        with self._lock:
            self._purge(self.clock())
            s, c = self.settings, self.counters
            return {
                "entries": len(self._entries), "bytes": self._bytes, "assembly_bytes_in_flight": self._assembling,
                "limits": {"entries": s.cache_entries, "bytes": s.cache_bytes, "ttl_s": s.cache_ttl_s,
                           "entry_bytes": s.entry_bytes, "owner_entries": s.owner_entries,
                           "owner_bytes": s.owner_bytes, "assembly_bytes": s.assembly_bytes},
                **asdict(c),
            }

    def owner_usage(self, owner: str) -> tuple[int, int]:
        """(entries, bytes) charged to one owner; for tests and quotas."""
        with self._lock:
            return self._owner_entries[owner], self._owner_bytes[owner]

    # -- internals (lock held) --------------------------------------------------------
    def _find(self, owner: str, response_id: str, param: str | None = None) -> Entry:
        self._purge(self.clock())
        entry = self._entries.get(response_id)
        if entry is None or entry.owner != owner:
            self.counters.misses += 1
            raise not_found(response_id, MEMORY, param)
        self._entries.move_to_end(response_id)  # recently used; the TTL is not extended
        self.counters.hits += 1
        return entry

    def _reserve(self, nbytes: int) -> None:
        self._assembling = reserve_assembly(self._assembling, nbytes, self.settings, self.counters)

    def _release(self, continuation: Continuation) -> None:
        with self._lock:
            self._assembling -= continuation.reserved
            self._drop_user(continuation.lineage, continuation.end)


    def _lineage_for(self, owner: str, base: Continuation | None) -> Lineage:
        """The base's lineage when the base is its tip; else a new one holding the base's references."""
        if base is not None and len(base.lineage.blocks) == base.end:
            return base.lineage
        lineage = Lineage(owner)
        for block in base.blocks if base else ():
            self._append(lineage, block)
        return lineage

    def _append(self, lineage: Lineage, block: Block) -> None:
        if block.refs == 0:
            self._charge(lineage.owner, block.size)
        block.refs += 1
        lineage.blocks.append(block)
        lineage.offsets.append(lineage.offsets[-1] + block.size)
        self._charge(lineage.owner, REFERENCE_BYTES)

    def _envelope(self, owner: str, data: bytes) -> Block:
        block = self._envelopes.get((owner, data))
        if block is None:
            block = self._envelopes[(owner, data)] = Block(data)
            self._charge(owner, block.size)
        block.refs += 1
        return block

    def _charge(self, owner: str, nbytes: int) -> None:
        self._bytes += nbytes
        self._owner_bytes[owner] += nbytes
        if not self._owner_bytes[owner]:
            del self._owner_bytes[owner]

    def _make_room(self, new: Entry) -> bool:
        """Evict least recently used entries until every limit holds; False if that is impossible."""
        s = self.settings
        owner = new.owner
        while self._owner_over(owner):
            if not self._evict_one(new, owner):
                return False
        while len(self._entries) > s.cache_entries or self._bytes > s.cache_bytes:
            if not self._evict_one(new, None):
                return False
        return True

    def _owner_over(self, owner: str) -> bool:
        s = self.settings
        return bool((s.owner_entries and self._owner_entries[owner] > s.owner_entries)
                    or (s.owner_bytes and self._owner_bytes[owner] > s.owner_bytes))

    def _evict_one(self, keep: Entry, owner: str | None) -> bool:
        for entry in self._entries.values():
            if entry is not keep and (owner is None or entry.owner == owner):
                self._remove(entry)
                self.counters.evictions += 1
                return True
        return False

    def _purge(self, now: float) -> None:
        while self._expiry:
            entry = next(iter(self._expiry.values()))
            if entry.expires_at > now:
                return
            self._remove(entry)
            self.counters.expirations += 1

    def _remove(self, entry: Entry) -> None:
        del self._entries[entry.id]
        del self._expiry[entry.id]
        self._owner_entries[entry.owner] -= 1
        if not self._owner_entries[entry.owner]:
            del self._owner_entries[entry.owner]
        self._charge(entry.owner, -len(entry.own))
        envelope = entry.envelope
        envelope.refs -= 1
        if envelope.refs == 0:
            del self._envelopes[(entry.owner, envelope.data)]
            self._charge(entry.owner, -envelope.size)
        self._drop_user(entry.lineage, entry.output_end)

    def _drop_user(self, lineage: Lineage, end: int) -> None:
        lineage.users[end] -= 1
        if not lineage.users[end]:
            del lineage.users[end]
        self._truncate(lineage, max(lineage.users, default=0))

    def _truncate(self, lineage: Lineage, length: int) -> None:
        """Release the lineage's slots from `length` on (and each block no other slot references)."""
        if length >= len(lineage.blocks):
            return
        for block in lineage.blocks[length:]:
            block.refs -= 1
            if block.refs == 0:
                self._charge(lineage.owner, -block.size)
        self._charge(lineage.owner, -REFERENCE_BYTES * (len(lineage.blocks) - length))
        del lineage.blocks[length:]
        del lineage.offsets[length + 1 :]


def reserve_assembly(in_flight: int, nbytes: int, settings: ResponsesSettings, counters: StoreCounters) -> int:
    """The assembly budget with `nbytes` more in flight, or a 503 (counted) when that passes
    `assembly_bytes`: both stores expand snapshots under the same budget."""
    if in_flight + nbytes > settings.assembly_bytes:
        counters.assembly_rejections += 1
        raise ServiceUnavailableError(
            "The server is assembling too many stored conversations at once; retry shortly.",
            code="assembly_capacity_exceeded",
        )
    return in_flight + nbytes


def no_room() -> StorageCapacityError:
    """A response that would fit, but only by evicting responses still in use (either store)."""
    return StorageCapacityError("The response store cannot make room for this response: the responses it would have "
                                "to evict are still in use. Retry later, or send the history with store:false.")


def _too_large(size: int, limit: int) -> StorageCapacityError:
    return StorageCapacityError(
        f"This response would take {size} bytes in the response store, over its limit of {limit} bytes for "
        "one response. Send the history with store:false, or start a shorter conversation.",
    )
