"""The response store on Redis (or Valkey): one store shared by every Maya replica, kept across restarts.

The layout is the memory store's (`store/core.py`): immutable item blocks, lineages of block references shared by
one chain of responses, and small entries. Every operation is one Lua script (`store/redis_lua.py`), so a
response is stored whole or not at all, a continuation reads a whole chain or nothing, and the entry, byte
and owner bounds with their LRU eviction hold for the fleet, not per replica.

What differs from memory, and why:

- **Owner scopes.** Keys hold `HMAC-SHA256(secret, owner)`, never a credential. `owner` is already a hash of
  the API key (`http/auth.py`); keyed again with a secret, a copy of Redis alone (a dump, a replica) cannot
  be used to test guessed keys. The secret is `--store-secret-file`'s content; without one, a random salt
  kept in Redis itself (set once by whichever replica comes first), which still makes each deployment's
  scopes its own but protects nothing from someone who can read Redis.
- **Blocks are keyed by their content's digest** within a scope, so an item is stored once per scope, and a
  replica's copy of one is never stale: each replica keeps the blocks it wrote or read (`store/block_cache.py`,
  bounded by `--store-block-cache-bytes`) with a hint per recent lineage (how many of its leading blocks it
  holds). A continuation's one script checks the whole history and sends only the blocks past the hint, so a
  replica fetches just the turns other replicas wrote since it last saw the conversation; without a hint for the
  conversation it sends the digests alone, and a second script fetches the blocks the replica lacks, if any.
  Redis checks every block either way, so a block it lost is a lost entry, never one served from the copy.
- **No pins.** A continuation reads its whole history in one script and keeps it in the request; when it is
  saved, the lineage it read is still referenced if nothing cut it back meanwhile (a generation counter says
  so), else the history is written again from the request's copy. A replica that dies mid-request leaves
  nothing pinned behind it.
- **Time** is the replicas' wall clock (`time.time`, NTP-synchronised), passed to every script: entries
  expire `CACHE_TTL_S` after completion, checked on every access and dropped by every script.
- **Faults.** A command that fails to connect or answer within `--store-command-timeout` is a 503
  `store_unavailable` (`redis_link.py`); the pool reconnects by itself on the next command. The assembly
  budget stays per process: it bounds this replica's memory.
- **Lost keys.** Redis may drop keys Maya wrote (`allkeys-lru`, `volatile-lru` on the data keys, which alone carry
  TTLs, a person's DEL, a restart from an older snapshot). A read that finds a piece missing never answers a
  shorter history: it is a 404 `stored_response_lost` (the loss is permanent; SDKs retry a 5xx in vain), the broken
  entry is removed in the same script. A lost bookkeeping key (a reference count, a users set, an index) never
  makes a script delete anything: the script flags it (`P dirty`), and the next probe recounts every bookkeeping key
  from the data keys that exist (`RECOUNT`), as it also does when Redis reports evictions or a restart, or the
  figures vanished. A write that finds no room because an index was lost recounts at once and tries again.
- **A full Redis.** Reads answer on a Redis at `maxmemory` (their LRU touch is best-effort). A write Redis
  refuses for memory makes Maya evict its own least recently used entries and retry once (`EVICT`).
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import secrets
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from typing import Callable, Iterator, Sequence

import orjson
from redis.exceptions import ResponseError

from ...errors import NotFoundError, StoreUnavailableError
from ...util.echoed import echoed
from . import redis_lua as lua
from . import redis_upkeep_lua as upkeep
from .redis_lua import DATA_TTL_MARGIN_S
from .redis_link import SCOPE_HEX, UNREACHABLE, RedisLink, every
from ..settings import ResponsesSettings
from .block_cache import Block, BlockCache
from .core import StoreCounters, not_found, _too_large, no_room, reserve_assembly
from .packing import pack_envelope, pack_item, pack_own, unpack_response

BLOCK_OVERHEAD = 80
"""What Redis holds per block besides its JSON and key name: the key's entry, the string object and its
reference count in the owner's `rc` hash (measured with MEMORY USAGE; `tests/responses/store/test_redis.py`)."""
SLOT_BYTES = 28
"""One lineage slot: a 24-character digest in a list node."""
LINEAGE_BYTES = 200
"""One lineage's list, users set and generation field."""
ENTRY_OVERHEAD = 600
"""One entry's hash (its fields but `own`: ~540 bytes with its key, in a listpack) and its places in the LRU, owner LRU
and expiry sets (~60)."""
DIGEST_BYTES = 12
LINEAGE_ID_BYTES = 8
"""A new lineage's random id, and a recount's generation token (16 hex characters): never handed out twice, whatever
Redis loses."""
EVICT_MOST = 64
"""The most entries one `EVICT` removes when Redis refuses a write for memory (one script: it bounds its time)."""
EVICT_ROUNDS = 4
"""The most `EVICT` scripts one refused write runs (each followed by a look at Redis's memory)."""
EVICT_MARGIN = 2
"""Each `EVICT` frees (as Maya counts) this many times what Redis lacks for the refused response: Redis frees less
than Maya counts (allocator size classes; its Lua heap grows between collections)."""
RECOUNT_TIMEOUT_S = 30.0
"""How long the probe waits for a `RECOUNT` (it scans the database's keys: ~0.7 s for 10k entries on a loaded
2-core machine, `bench/store_redis_integrity.py`)."""
RECOUNT_SPACING = 10
"""Recounts are at least this many times their own last duration apart (and at least `probe_s`), so a Redis that
evicts all the time (`allkeys-lru`) spends at most about a tenth of its time recounting."""
LOST_NAMED = 32
"""How many broken entries a `RECOUNT` names in the log (the rest are counted)."""

log = logging.getLogger("maya.store")


def digest(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=DIGEST_BYTES).hexdigest()


@dataclass
class RedisHistory:
    """A continued response's history, read whole (checked whole by one script); `release()` gives back its
    assembly bytes. Its blocks come from this replica's block cache or from Redis, the same objects either way."""

    store: "RedisStore"
    lineage: str
    end: int
    generation: str
    digests: list[str]
    blocks: list[Block]
    reserved: int
    released: bool = False

    @property
    def history_bytes(self) -> int:
        return sum(len(block.data) for block in self.blocks)

    def items(self) -> list[dict]:
        return [block.item() for block in self.blocks]

    def release(self) -> None:
        if not self.released:
            self.released = True
            self.store._assembling -= self.reserved


def split_digests(joined: bytes) -> list[str]:
    """The digests a READ returns as one string (`redis_lua.READ`), one by one."""
    text, width = joined.decode(), 2 * DIGEST_BYTES
    return [text[at:at + width] for at in range(0, len(text), width)]


def lost_error(response_id: str, param: str | None) -> NotFoundError:
    """A stored response the store can no longer read whole: a 404, since the loss is permanent (clients retry
    a 5xx in vain)."""
    return NotFoundError(
        f"Response '{echoed(response_id)}' was stored, but the response store lost part of it (Redis evicted or "
        "removed its keys), so it cannot be read or continued. Send the history in 'input' with store:false instead.",
        param=param, code="stored_response_lost",
    )


def _no_figures() -> dict:
    return {"entries": 0, "bytes": 0, "writes": 0, "evictions": 0, "expirations": 0, "deletions": 0}


class RedisStore:
    backend = "redis"

    def __init__(self, link: RedisLink, settings: ResponsesSettings, *, probe_s: float = 2.0,
                 clock: Callable[[], float] = time.time, block_cache_bytes: int = 0) -> None:
        self.link = link
        self.blocks = BlockCache(block_cache_bytes)
        """This replica's copies of item blocks (`store/block_cache.py`): a continuation fetches only the rest."""
        self.settings = settings
        self.prefix = link.prefix
        self.clock = clock
        self.probe_s = probe_s
        self.counters = StoreCounters()
        self.fleet = _no_figures()
        """The fleet's figures as this replica last read them (every script returns some; the probe all)."""
        self._assembling = 0
        self._scripts = {name: link.script(getattr(lua, name)) for name in ("READ", "DELETE", "FIGURES")}
        self._scripts["PUT"] = link.script(lua.PUT, durable="answer")  # a stored response the client is told of
        self._scripts["EVICT"] = link.script(upkeep.EVICT)
        self._recount_script = link.client.register_script(upkeep.RECOUNT)
        self.lost = 0
        """Broken entries this replica found (a read, a delete or its recount) and removed."""
        self.recounts = 0
        self._recount_owed = False
        """This replica saw Redis lose keys (evictions, a restart) but could neither recount nor flag it for the
        fleet (`P dirty`): it keeps asking until a recount runs."""
        self._redis_seen: tuple[str, int] | None = None
        """Redis's run_id and evicted_keys at the last probe."""
        self._recount_s = 0.0
        """How long this replica's last recount took."""
        self._probe: asyncio.Task | None = None
        self.block_overhead = BLOCK_OVERHEAD + len(self.prefix) + len("b::") + SCOPE_HEX + 2 * (2 * DIGEST_BYTES)
        """The key's name (prefix, scope, digest) and the digest again as the `rc` field, besides the fixed part."""

    # -- lifecycle --------------------------------------------------------------------
    async def start(self) -> None:
        """Probe Redis every `probe_s` (drops what expired, refreshes the fleet's figures, notices recovery)."""
        self._probe = asyncio.ensure_future(every(self.probe_s, self.refresh, "response store probe"))
        self.link.start(self.probe_s, self.settings.cache_bytes)  # the salt, Redis's config, refusals (redis_link.py)

    async def close(self) -> None:
        if self._probe is not None:
            self._probe.cancel()
            await asyncio.gather(self._probe, return_exceptions=True)
        await self.link.close()


    async def refresh(self, owner: str | None = None) -> tuple[int, int]:
        """Read the fleet's figures now; (entries, bytes) of `owner` when given. Without an owner (the probe, the
        status page), also recount when the figures cannot be trusted (`_recount_if_due`)."""
        args = [self.clock()] + ([await self.link.scope(owner)] if owner is not None else [])
        got = await self._run("FIGURES", args)
        names = ("entries", "bytes", "writes", "evictions", "expirations", "deletions")
        believed, self.fleet = self.fleet["entries"], {name: int(value) for name, value in zip(names, got)}
        if owner is None:
            await self._recount_if_due(flagged=bool(int(got[9])), vanished=believed > 0 and not int(got[8]))
        return int(got[6]), int(got[7])

    async def _recount_if_due(self, *, flagged: bool, vanished: bool) -> None:
        """Recount when a script flagged bookkeeping it could not trust (a lost piece, a missing count, users set or
        index: `P dirty`), Redis evicted keys or restarted (INFO's evicted_keys grew, its run_id changed; on the
        first probe, any eviction at all) or the figures hash vanished: at most once per probe interval for the
        whole fleet (a lock key). A replica that loses the lock race hands what it saw to the fleet (`P dirty`), so
        whoever recounts next covers it."""
        info = await self._info("server", "stats")
        seen = (str(info.get("run_id", "")), int(info.get("evicted_keys", 0)))
        before, self._redis_seen = self._redis_seen, seen
        if before is None or seen[0] != before[0]:  # a Redis not seen before: have the rare scripts loaded now,
            for source in (upkeep.EVICT, upkeep.RECOUNT):   # not when it is full (compiling one takes its memory)
                await self.link.command(lambda source=source: self.link.client.script_load(source))
        redis_lost = seen[1] > 0 if before is None else (seen[0] != before[0] or seen[1] > before[1])
        self._recount_owed = self._recount_owed or redis_lost or vanished
        if not (flagged or self._recount_owed):
            return
        if not await self._take_recount_lock():
            if self._recount_owed and not flagged:  # another replica recounts in this interval: leave it a flag
                await self._flag_for_fleet()
            return
        await self.recount()

    async def _take_recount_lock(self) -> bool:
        """At most one recount per interval for the whole fleet (`P recount`, SET NX PX)."""
        lock = self.prefix + "recount"
        spacing_ms = int(max(self.probe_s, RECOUNT_SPACING * self._recount_s) * 1000)
        return bool(await self.link.command(lambda: self.link.client.set(lock, 1, nx=True, px=spacing_ms)))

    async def _flag_for_fleet(self) -> None:
        """`P dirty` for whichever replica recounts next; kept owed here too if Redis refuses even that."""
        try:
            await self.link.command(lambda: self.link.client.set(self.prefix + "dirty", 1))
        except StoreUnavailableError:
            return
        self._recount_owed = False

    async def recount(self) -> None:
        """Rebuild the derived keys and figures from the entries that exist; broken entries are removed."""
        args = [self.prefix, self.block_overhead, SLOT_BYTES, LINEAGE_BYTES, LOST_NAMED,
                secrets.token_hex(LINEAGE_ID_BYTES)]
        timeout = max(RECOUNT_TIMEOUT_S, self.link.command_timeout)
        started = time.perf_counter()
        got = await self.link.command(lambda: self._recount_script(keys=[], args=args), timeout=timeout)
        self._recount_s = time.perf_counter() - started
        self._recount_owed = False
        self.recounts += 1
        entries, nbytes, broken, orphans = (int(value) for value in got[:4])
        self.fleet.update(entries=entries, bytes=nbytes)
        self.lost += broken
        named = got[4:]
        for at in range(0, len(named), 2):
            self._log_lost(named[at].decode(), named[at + 1].decode())
        log.log(logging.WARNING if broken or orphans else logging.INFO,
                "response store recounted in %.3f s: %d entries, %d bytes; %d broken entries and %d orphan blocks "
                "removed", self._recount_s, entries, nbytes, broken, orphans)

    # -- reads ------------------------------------------------------------------------
    async def begin(self, owner: str, response_id: str) -> RedisHistory:
        """The history in one script: the blocks this replica holds by its lineage hints are checked in Redis but
        not sent (`store/block_cache.py`); for a lineage it has no hint for (while it holds some of the owner's
        blocks), every block is checked and none sent. Only when a block it needs is not here, a second script,
        which checks the whole history again and leaves out exactly the blocks held. Each script checks every
        block, so either is as strict as a read without the cache."""
        started = time.perf_counter()
        cache = self.blocks
        hints = cache.hints(await self.link.scope(owner))
        scope, found = await self._read(owner, response_id, "hinted" if hints else "history", "previous_response_id",
                                        hints)
        digests, skipped = split_digests(found[7]), int(found[9])
        if skipped == -1:  # no hint for this conversation's lineage: every block checked, none sent
            skipped = len(digests)
        held = cache.held(scope, digests[:skipped])
        if len(held) == skipped:
            blocks = [held[dg] for dg in digests[:skipped]]
            blocks += [cache.add(scope, dg, data) for dg, data in zip(digests[skipped:], found[8])]
        else:  # a block hinted (or, without a hint, any block) is not here: name the ones that are
            held = cache.held(scope, digests)
            scope, found = await self._read(owner, response_id, "history", "previous_response_id", list(held),
                                            counted=False)
            digests, sent = split_digests(found[7]), iter(found[8])
            blocks = [held.get(dg) or cache.add(scope, dg, next(sent)) for dg in digests]
        _, lineage, _, output_end, generation, own, envelope_size = found[:7]
        cache.count(len(digests) - len(found[8]), len(found[8]))
        cache.note(scope, lineage.decode(), generation.decode(), len(digests))
        size = sum(len(block.data) for block in blocks) + len(own) + int(envelope_size)  # the memory store's measure
        self._reserve(size)
        self.counters.assemblies += 1
        self.counters.assembly_seconds += time.perf_counter() - started
        return RedisHistory(self, lineage.decode(), int(output_end), generation.decode(), digests, blocks, size)

    async def get(self, owner: str, response_id: str) -> dict:
        found = (await self._read(owner, response_id, "response"))[1]
        own, envelope, outputs = found[5], found[6], found[8]
        with self.assembling(len(own) + len(envelope) + sum(len(data) for data in outputs)):
            return unpack_response(own, envelope, outputs)

    async def input_items(self, owner: str, response_id: str) -> list[tuple[str, bytes]]:
        """(id, JSON) of each input item, oldest first."""
        blocks = (await self._read(owner, response_id, "input"))[1][8]
        return [(orjson.loads(data)["id"], data) for data in blocks]

    @contextmanager
    def assembling(self, nbytes: int) -> Iterator[None]:
        self._reserve(nbytes)
        try:
            yield
        finally:
            self._assembling -= nbytes

    async def _read(self, owner: str, response_id: str, mode: str, param: str | None = None,
                    held: Sequence[str] = (), *, counted: bool = True) -> tuple[str, list]:
        """(the scope it was read under, the script's answer); `held`: digests whose bytes need not be sent;
        `counted`: False for the second read of one lookup (the first counted the hit)."""
        scope = await self.link.scope(owner)
        found = await self._run("READ", [scope, response_id, self.clock(), mode, *held])
        if found[0] == 0 and await self.link.follow_salt():  # the fleet's salt changed: read again under it
            scope = await self.link.scope(owner)
            found = await self._run("READ", [scope, response_id, self.clock(), mode, *held])
        if found[0] == 2:
            raise self._lose(response_id, found[1].decode(), param)
        if found[0] == 0:
            self.counters.misses += 1
            raise not_found(response_id, "in the shared Redis store", param)
        self.counters.hits += counted
        return scope, found

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
        # what the new response is counted for at most (its blocks all new): what `EVICT` frees room for
        size = (sum(len(b) + self.block_overhead + SLOT_BYTES for b in packed) + len(own) + ENTRY_OVERHEAD
                + len(envelope) + self.block_overhead + LINEAGE_BYTES)
        scope = await self.link.scope(owner)
        pairs = [(digest(data), data) for data in packed]
        outcome = await self._save(scope, response["id"], own, envelope, pairs, len(new_items), base, size)
        if outcome[0] == b"full" and int(outcome[4]) and await self._take_recount_lock():
            # no room, though other entries are counted: an index or the figures were lost; true again, try again
            self.counters.evictions += int(outcome[3])
            await self.recount()
            outcome = await self._save(scope, response["id"], own, envelope, pairs, len(new_items), base, size)
        if outcome[0] == b"exists":
            raise RuntimeError(f"response {response['id']} is already stored")  # ids are generated: a bug
        self.fleet.update(entries=int(outcome[1]), bytes=int(outcome[2]))
        self.counters.evictions += int(outcome[3])
        if outcome[0] != b"ok":
            self.counters.rejections += 1
            raise no_room()
        for dg, data in pairs:  # the next turn continues this one: its blocks need not come back from Redis
            self.blocks.add(scope, dg, data)
        self.blocks.note(scope, outcome[4].decode(), outcome[5].decode(), int(outcome[6]))
        self.counters.writes += 1
        self.counters.write_seconds += time.perf_counter() - started

    async def _save(self, scope: str, response_id: str, own: bytes, envelope: bytes, pairs: list[tuple[str, bytes]],
                    n_input: int, base: RedisHistory | None, size: int) -> list:
        """One PUT (`_put`) continuing `base`; when the continued lineage was cut back meanwhile (`stale`), one more
        with the history written again from `base`'s own copy."""
        outcome = await self._put(scope, response_id, own, envelope, pairs, n_input, base, size)
        if outcome[0] != b"stale":
            return outcome
        again = [(dg, block.data) for dg, block in zip(base.digests, base.blocks)] + pairs
        return await self._put(scope, response_id, own, envelope, again, len(base.blocks) + n_input, None,
                               size + base.history_bytes + len(base.blocks) * (self.block_overhead + SLOT_BYTES))

    async def _put(self, scope: str, response_id: str, own: bytes, envelope: bytes, pairs: list[tuple[str, bytes]],
                   n_input: int, base: RedisHistory | None, size: int) -> list:
        """One PUT; when Redis refuses it for memory (maxmemory under noeviction), Maya evicts its own least
        recently used entries (`EVICT`: INFO says by how much Redis is over) and tries once more: a full Redis
        never stays full until a person acts."""
        try:
            return await self._put_once(scope, response_id, own, envelope, pairs, n_input, base)
        except StoreUnavailableError as error:
            if error.reason != "oom":
                raise
        await self._make_room(size)
        try:
            return await self._put_once(scope, response_id, own, envelope, pairs, n_input, base)
        except StoreUnavailableError as error:
            if error.reason != "oom":
                raise
            raise StoreUnavailableError(
                "The response store (Redis) is at its maxmemory and refused this response even after Maya evicted "
                "its least recently used responses. Raise Redis's maxmemory (or lower the store's byte limit), or "
                "send the history with store:false.", reason="oom",
            ) from None

    async def _make_room(self, size: int) -> None:
        """Evict the fleet's least recently used entries until Redis (INFO) has `size` bytes below its maxmemory:
        at most `EVICT_ROUNDS` scripts of `EVICT_MOST` entries. Rounds, because what Redis frees is not what Maya
        counts (allocator size classes, and its Lua heap grows between collections)."""
        for _ in range(EVICT_ROUNDS):
            memory = await self._info("memory")
            if memory:
                limit, used = int(memory.get("maxmemory", 0)), int(memory.get("used_memory", 0))
                if not limit or used + size < limit:
                    return
                want = used + size - limit
            else:  # INFO refused: one round, for the response's size
                want = size
            got = await self._run("EVICT", [EVICT_MARGIN * want, EVICT_MOST])
            self.counters.evictions += int(got[0])
            self.fleet.update(entries=int(got[2]), bytes=int(got[3]))
            if not memory or int(got[0]) == 0:
                return  # no way to tell whether there is room now, or nothing left to evict

    async def _put_once(self, scope: str, response_id: str, own: bytes, envelope: bytes,
                        pairs: list[tuple[str, bytes]], n_input: int, base: RedisHistory | None) -> list:
        s = self.settings
        now = self.clock()
        args: list = [scope, response_id, now, now + s.cache_ttl_s, own, digest(envelope), envelope,
                      base.lineage if base else "", base.end if base else 0, base.generation if base else "",
                      n_input, s.cache_entries, s.cache_bytes, s.owner_entries, s.owner_bytes, ENTRY_OVERHEAD,
                      secrets.token_hex(LINEAGE_ID_BYTES), int(s.cache_ttl_s) + DATA_TTL_MARGIN_S,
                      int(s.cache_ttl_s) + DATA_TTL_MARGIN_S // 2]
        for pair in pairs:
            args.extend(pair)
        return await self._run("PUT", args)

    async def delete(self, owner: str, response_id: str) -> None:
        found = await self._run("DELETE", [await self.link.scope(owner), response_id, self.clock()])
        self.fleet.update(entries=int(found[1]), bytes=int(found[2]))
        if found[0] == 2:
            raise self._lose(response_id, found[3].decode(), None)
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
            "lost": self.lost, "recounts": self.recounts,
            "block_cache": self.blocks.report(),
            "fleet": dict(self.fleet),
            "commands": f.commands, "command_seconds": f.command_seconds, "command_errors": f.command_errors,
            "redis": self.link.report(),
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
    def _lose(self, response_id: str, kind: str, param: str | None) -> NotFoundError:
        """A broken entry a script found and removed: counted, logged once (its id, the kind of key missing;
        never the owner's scope; the script flagged a recount for the fleet); the client's 404."""
        self.lost += 1
        self._log_lost(response_id, kind)
        return lost_error(response_id, param)

    @staticmethod
    def _log_lost(response_id: str, kind: str) -> None:
        log.warning("stored response %s lost its %s key in Redis (evicted or removed); removed it",
                    echoed(response_id), kind)

    async def _info(self, *sections: str) -> dict:
        """Redis's INFO sections; empty where INFO is refused (some managed Redis rename or forbid it): the
        checks that read it then go without."""
        try:  # not through `link.command`: INFO refused by an ACL is no refusal of the store's own commands
            return await asyncio.wait_for(self.link.client.info(*sections), self.link.command_timeout)
        except (ResponseError, *UNREACHABLE):
            return {}

    def _reserve(self, nbytes: int) -> None:
        self._assembling = reserve_assembly(self._assembling, nbytes, self.settings, self.counters)


    async def _run(self, name: str, args: list) -> list:
        return await self._scripts[name]([self.prefix, self.block_overhead, SLOT_BYTES, LINEAGE_BYTES, *args])
