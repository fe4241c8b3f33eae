"""The response store on Redis (or Valkey): one store shared by every Maya replica, kept across restarts.

The layout is the memory store's (`store.py`): immutable item blocks, lineages of block references shared by
one chain of responses, and small entries. Every operation is one Lua script (`store_redis_lua.py`), so a
response is stored whole or not at all, a continuation reads a whole chain or nothing, and the entry, byte
and owner bounds with their LRU eviction hold for the fleet, not per replica.

What differs from memory, and why:

- **Owner scopes.** Keys hold `HMAC-SHA256(secret, owner)`, never a credential. `owner` is already a hash of
  the API key (`http/auth.py`); keyed again with a secret, a copy of Redis alone (a dump, a replica) cannot
  be used to test guessed keys. The secret is `--store-secret-file`'s content; without one, a random salt
  kept in Redis itself (set once by whichever replica comes first), which still makes each deployment's
  scopes its own but protects nothing from someone who can read Redis.
- **Blocks are keyed by their content's digest** within a scope, so an item is stored once per scope.
- **No pins.** A continuation reads its whole history in one script and keeps it in the request; when it is
  saved, the lineage it read is still referenced if nothing cut it back meanwhile (a generation counter says
  so), else the history is written again from the request's copy. A replica that dies mid-request leaves
  nothing pinned behind it.
- **Time** is the replicas' wall clock (`time.time`, NTP-synchronised), passed to every script: entries
  expire `CACHE_TTL_S` after completion, checked on every access and dropped by every script.
- **Faults.** A command that fails to connect or answer within `--store-command-timeout` is a 503
  `store_unavailable` (`redis_link.py`); the pool reconnects by itself on the next command. The assembly
  budget stays per process: it bounds this replica's memory.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from typing import Callable, Iterator, Sequence

import orjson

from ..errors import NotFoundError, StoreUnavailableError
from . import store_redis_lua as lua
from .redis_link import SCOPE_HEX, RedisLink, every
from .settings import ResponsesSettings
from .store import StoreCounters, not_found, _too_large, no_room, reserve_assembly
from .store_packing import pack_envelope, pack_item, pack_own, unpack_item, unpack_response

BLOCK_OVERHEAD = 80
"""What Redis holds per block besides its JSON and key name: the key's entry, the string object and its
reference count in the owner's `rc` hash (measured with MEMORY USAGE; `tests/responses/test_store_redis.py`)."""
SLOT_BYTES = 28
"""One lineage slot: a 24-character digest in a list node."""
LINEAGE_BYTES = 200
"""One lineage's list, users set and generation field."""
ENTRY_OVERHEAD = 600
"""One entry's hash (its fields but `own`: ~540 bytes with its key, in a listpack) and its places in the LRU, owner LRU
and expiry sets (~60)."""
DIGEST_BYTES = 12



def digest(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=DIGEST_BYTES).hexdigest()


@dataclass
class RedisHistory:
    """A continued response's history, read whole in one script; `release()` gives back its assembly bytes."""

    store: "RedisStore"
    lineage: str
    end: int
    generation: str
    digests: list[str]
    blocks: list[bytes]
    reserved: int
    released: bool = False

    @property
    def history_bytes(self) -> int:
        return sum(len(data) for data in self.blocks)

    def items(self) -> list[dict]:
        return [unpack_item(data) for data in self.blocks]

    def release(self) -> None:
        if not self.released:
            self.released = True
            self.store._assembling -= self.reserved


def _no_figures() -> dict:
    return {"entries": 0, "bytes": 0, "writes": 0, "evictions": 0, "expirations": 0, "deletions": 0}


class RedisStore:
    backend = "redis"

    def __init__(self, link: RedisLink, settings: ResponsesSettings, *, probe_s: float = 2.0,
                 clock: Callable[[], float] = time.time) -> None:
        self.link = link
        self.settings = settings
        self.prefix = link.prefix
        self.clock = clock
        self.probe_s = probe_s
        self.counters = StoreCounters()
        self.fleet = _no_figures()
        """The fleet's figures as this replica last read them (every script returns some; the probe all)."""
        self._assembling = 0
        self._scripts = {name: link.script(getattr(lua, name)) for name in ("READ", "PUT", "DELETE", "FIGURES")}
        self._probe: asyncio.Task | None = None
        self.block_overhead = BLOCK_OVERHEAD + len(self.prefix) + len("b::") + SCOPE_HEX + 2 * (2 * DIGEST_BYTES)
        """The key's name (prefix, scope, digest) and the digest again as the `rc` field, besides the fixed part."""

    # -- lifecycle --------------------------------------------------------------------
    async def start(self) -> None:
        """Probe Redis every `probe_s` (drops what expired, refreshes the fleet's figures, notices recovery)."""
        self._probe = asyncio.ensure_future(every(self.probe_s, self.refresh, "response store probe"))

    async def close(self) -> None:
        if self._probe is not None:
            self._probe.cancel()
            await asyncio.gather(self._probe, return_exceptions=True)
        await self.link.close()


    async def refresh(self, owner: str | None = None) -> tuple[int, int]:
        """Read the fleet's figures now; (entries, bytes) of `owner` when given."""
        args = [self.clock()] + ([await self.link.scope(owner)] if owner is not None else [])
        got = await self._run("FIGURES", args)
        names = ("entries", "bytes", "writes", "evictions", "expirations", "deletions")
        self.fleet = {name: int(value) for name, value in zip(names, got)}
        return int(got[6]), int(got[7])

    # -- reads ------------------------------------------------------------------------
    async def begin(self, owner: str, response_id: str) -> RedisHistory:
        started = time.perf_counter()
        found = await self._read(owner, response_id, "history", "previous_response_id")
        _, lineage, _, output_end, generation, own, envelope_size, digests, blocks = found
        size = sum(len(data) for data in blocks) + len(own) + int(envelope_size)  # the memory store's measure
        self._reserve(size)
        self.counters.assemblies += 1
        self.counters.assembly_seconds += time.perf_counter() - started
        return RedisHistory(self, lineage.decode(), int(output_end), generation.decode(),
                            [d.decode() for d in digests], list(blocks), size)

    async def get(self, owner: str, response_id: str) -> dict:
        found = await self._read(owner, response_id, "response")
        own, envelope, outputs = found[5], found[6], found[8]
        with self.assembling(len(own) + len(envelope) + sum(len(data) for data in outputs)):
            return unpack_response(own, envelope, outputs)

    async def input_items(self, owner: str, response_id: str) -> list[tuple[str, bytes]]:
        """(id, JSON) of each input item, oldest first."""
        blocks = (await self._read(owner, response_id, "input"))[8]
        return [(orjson.loads(data)["id"], data) for data in blocks]

    @contextmanager
    def assembling(self, nbytes: int) -> Iterator[None]:
        self._reserve(nbytes)
        try:
            yield
        finally:
            self._assembling -= nbytes

    async def _read(self, owner: str, response_id: str, mode: str, param: str | None = None) -> list:
        found = await self._run("READ", [await self.link.scope(owner), response_id, self.clock(), mode])
        if found[0] == 0:
            self.counters.misses += 1
            raise not_found(response_id, "in the shared Redis store", param)
        self.counters.hits += 1
        return found

    # -- writes -----------------------------------------------------------------------
    def check_fits(self, expanded_bytes: int) -> None:
        limit = self.settings.snapshot_limit
        if expanded_bytes > limit:
            self.counters.rejections += 1
            raise _too_large(expanded_bytes, limit)

    async def put(self, owner: str, response: dict, new_items: Sequence[dict], base: RedisHistory | None = None) -> None:
        started = time.perf_counter()
        packed = [pack_item(item) for item in (*new_items, *response["output"])]
        own, envelope = pack_own(response), pack_envelope(response)
        history = base.history_bytes if base else 0
        self.check_fits(history + sum(len(b) for b in packed) + len(own) + len(envelope))
        scope = await self.link.scope(owner)
        pairs = [(digest(data), data) for data in packed]
        outcome = await self._put(scope, response["id"], own, envelope, pairs, len(new_items), base)
        if outcome[0] == b"stale":  # the continued lineage was cut back meanwhile: write the history again
            again = list(zip(base.digests, base.blocks)) + pairs
            outcome = await self._put(scope, response["id"], own, envelope, again, len(base.blocks) + len(new_items), None)
        if outcome[0] == b"exists":
            raise RuntimeError(f"response {response['id']} is already stored")  # ids are generated: a bug
        self.fleet.update(entries=int(outcome[1]), bytes=int(outcome[2]))
        self.counters.evictions += int(outcome[3])
        if outcome[0] != b"ok":
            self.counters.rejections += 1
            raise no_room()
        self.counters.writes += 1
        self.counters.write_seconds += time.perf_counter() - started

    async def _put(self, scope: str, response_id: str, own: bytes, envelope: bytes, pairs: list[tuple[str, bytes]],
                   n_input: int, base: RedisHistory | None) -> list:
        s = self.settings
        now = self.clock()
        args: list = [scope, response_id, now, now + s.cache_ttl_s, own, digest(envelope), envelope,
                      base.lineage if base else "", base.end if base else 0, base.generation if base else "",
                      n_input, s.cache_entries, s.cache_bytes, s.owner_entries, s.owner_bytes, ENTRY_OVERHEAD]
        for pair in pairs:
            args.extend(pair)
        return await self._run("PUT", args)

    async def delete(self, owner: str, response_id: str) -> None:
        found = await self._run("DELETE", [await self.link.scope(owner), response_id, self.clock()])
        self.fleet.update(entries=int(found[1]), bytes=int(found[2]))
        if found[0] == 0:
            self.counters.misses += 1
            raise not_found(response_id, "in the shared Redis store")
        self.counters.hits += 1
        self.counters.deletions += 1

    # -- introspection ----------------------------------------------------------------
    def stats(self) -> dict:
        """This replica's counters and the fleet's last known figures (the probe refreshes them)."""
        s, f = self.settings, self.link.figures
        local = asdict(self.counters)
        return {
            "backend": "redis", "url": self.link.shown_url, "healthy": f.healthy,
            "entries": self.fleet["entries"], "bytes": self.fleet["bytes"], "assembly_bytes_in_flight": self._assembling,
            "limits": {"entries": s.cache_entries, "bytes": s.cache_bytes, "ttl_s": s.cache_ttl_s,
                       "entry_bytes": s.entry_bytes, "owner_entries": s.owner_entries,
                       "owner_bytes": s.owner_bytes, "assembly_bytes": s.assembly_bytes},
            **local,
            "expirations": self.fleet["expirations"],  # only the scripts see an entry expire: the fleet's count
            "fleet": dict(self.fleet),
            "commands": f.commands, "command_seconds": f.command_seconds, "command_errors": f.command_errors,
        }

    async def ensure_available(self) -> None:
        """Before generating a `store:true` response: while the last command failed, one PING decides (a 503
        now, not a failed response after the generation); while Redis answers, no round trip."""
        if not self.link.figures.healthy:
            await self.link.ping()

    async def fresh_stats(self) -> dict:
        try:
            await self.refresh()
        except StoreUnavailableError:
            pass  # the figures last read, and healthy: false
        return self.stats()

    async def owner_usage(self, owner: str) -> tuple[int, int]:
        return await self.refresh(owner)

    # -- internals --------------------------------------------------------------------
    def _reserve(self, nbytes: int) -> None:
        self._assembling = reserve_assembly(self._assembling, nbytes, self.settings, self.counters)


    async def _run(self, name: str, args: list) -> list:
        return await self._scripts[name]([self.prefix, self.block_overhead, SLOT_BYTES, LINEAGE_BYTES, *args])
