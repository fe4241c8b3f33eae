"""Several replicas of one model behind one Maya, as one `Engine` (`--upstream-url` given more than once).

A load balancer in front of data-parallel engines scatters a conversation's
turns, and each turn then prefills the whole history again on a replica that
never saw it. Maya routes instead (`replicas/router.py`): a prompt goes to the
replica that was sent its longest prefix (`prefix_affinity.py`, on token ids),
a new conversation to the least loaded one. Each replica is an ordinary
`UpstreamEngine`, so the relay, its wire formats and its health record are
the single upstream's own; this class only chooses which one streams. Prompts are
keyed with the request's cache salt, so one API key's prompts never match (nor
route after) another's. Several Maya replicas sharing one Redis share where each
conversation's latest prompt went (`shared_affinity.py`, given by `share_affinity`),
so a turn routed by another Maya still reaches the replica that holds its prefix.

Failures: a replica whose request fails, or that fails a liveness check (an
engine that accepts connections but never answers), is taken out and probed in the
background until it answers as the same model again (`replica.py`); its
prefixes are forgotten, so its conversations move on to the others (prefilled
there once). A request whose replica fails before anything reached the client
(a refused connection, an error answer; only counts had been learnt) is sent
to another replica at once, so a replica that died between two turns costs
the next turn nothing. One that fails mid-stream ends that stream with the
single upstream's error (an `upstream_error` event): half an answer cannot be
resumed elsewhere. When every replica is out, requests still go to one (and
fail with 503 `upstream_unavailable` while none answers).

Start-up meets every replica (all must answer) and refuses, with an
`EngineOptionError` naming `replicas`, replicas that serve different models:
Maya renders one prompt with one tokenizer for all of them. `--upstream-slots`
is per replica; the set's slots (Maya's queue) are their sum, and stay so while
a replica is out (the others' engines queue the excess). The relay's batching
(`--relay-batch-ms`) is each replica's own: it waits when other streams run on
the same replica.
"""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass, replace
from typing import AsyncIterator

from ...errors import EngineOptionError, UpstreamError, UpstreamRejected
from ..base import Counts, Engine, Generation, StreamItem
from ..defaults import AFFINITY_ENTRIES, REPLICA_CHECK_S, REPLICA_CHECK_TIMEOUT_S, REPLICA_PROBE_S, REPLICA_ROUTING
from ..prefill_gate import PrefillGateCollector
from .prefix_affinity import PrefixTable, block_keys
from .replica import Replica
from .metrics import ReplicaCollector
from .router import Reason, ReplicaLoad, ReplicaRouter
from .shared_affinity import SharedAffinity
from ..upstream.engine import UpstreamOptions
from ..upstream.grammar_support import GrammarRefusalsCollector

log = logging.getLogger("maya.engine")


@dataclass(frozen=True)
class ReplicaSetOptions:
    """What `ReplicaSetEngine.connect` needs; `engine_setup` fills it from the settings."""

    replicas: tuple[UpstreamOptions, ...]
    routing: str = REPLICA_ROUTING
    affinity_entries: int = AFFINITY_ENTRIES
    probe_s: float = REPLICA_PROBE_S
    check_s: float = REPLICA_CHECK_S
    """Seconds between liveness checks of a replica in rotation (0: none; `replica.py`)."""
    check_timeout: float = REPLICA_CHECK_TIMEOUT_S
    """Seconds a check or a probe may take."""


class ReplicaSetEngine(Engine):
    name = "upstream"

    def __init__(self, replicas: list[Replica], *, routing: str, affinity_entries: int, probe_s: float,
                 check_s: float = REPLICA_CHECK_S, check_timeout: float = REPLICA_CHECK_TIMEOUT_S) -> None:
        first = replicas[0].engine
        for replica in replicas[1:]:
            replica.engine.tokenizer = first.tokenizer  # one tokenizer renders for all (they serve one model)
        self.replicas = replicas
        self.tokenizer = first.tokenizer
        self.chat_template = first.chat_template
        self.model_type = first.model_type
        self.context_size = min(r.engine.context_size for r in replicas)
        self.slots = sum(r.engine.slots for r in replicas)
        self.accepts_images = all(r.engine.accepts_images for r in replicas)
        self.image_tokens = max(r.engine.image_tokens for r in replicas)
        self.images_refusal = next((r.engine.images_refusal for r in replicas if not r.engine.accepts_images),
                                   first.images_refusal)
        self.router = ReplicaRouter(routing)
        self.table = PrefixTable(affinity_entries)
        self.probe_s = probe_s
        self.check_s = check_s
        for replica in replicas:
            replica.check_timeout = check_timeout
        self.routes: Counter[tuple[int, Reason]] = Counter()
        """Requests routed, by replica and reason (`maya:replica_routes_total`)."""
        self.shared: SharedAffinity | None = None
        """Where other Maya replicas sent prompts (`share_affinity`); None: this Maya's own table only."""
        self._slot_choosers = [r.engine.slot_chooser for r in replicas]

    @classmethod
    def connect(cls, options: ReplicaSetOptions) -> "ReplicaSetEngine":
        """Meet every replica and check they serve one model; an `EngineOptionError` otherwise."""
        model = options.replicas[0].model
        replicas = [Replica.connect(replace(o, model=None)) for o in options.replicas]  # their own names, to compare
        first = replicas[0]
        for replica in replicas[1:]:
            if replica.identity != first.identity:
                raise EngineOptionError("replicas", _mismatch(first, replica))
        if model is not None:
            for replica in replicas:
                replica.engine.info = replace(replica.engine.info, model=model)
        log.info("%d upstream replicas, %s routing", len(replicas), options.routing)
        return cls(replicas, routing=options.routing, affinity_entries=options.affinity_entries,
                   probe_s=options.probe_s, check_s=options.check_s, check_timeout=options.check_timeout)

    @property
    def reports_prompt_progress(self) -> bool:
        return all(r.engine.reports_prompt_progress for r in self.replicas)

    @property
    def batch_interval(self) -> float:
        return self.replicas[0].engine.batch_interval

    @batch_interval.setter
    def batch_interval(self, seconds: float) -> None:
        for replica in self.replicas:
            replica.engine.batch_interval = seconds

    @property
    def prefill_concurrency(self) -> int:
        return self.replicas[0].engine.prefill_concurrency

    @prefill_concurrency.setter
    def prefill_concurrency(self, limit: int) -> None:
        for replica in self.replicas:  # each replica processes its own prompts
            replica.engine.prefill_concurrency = limit

    def share_affinity(self, shared: SharedAffinity | None) -> bool:
        """Route with (or, given None, without) the affinity other Maya replicas share; with affinity routing only.

        Sharing also leaves llama-server replicas their own slot choice. Maya pins a llama-server slot by its
        record of what each slot holds (`slot_choice.py`), but other Mayas send to the same slots: the record
        would be wrong whenever another Maya took the slot, and two Mayas would pin one slot while another
        idles (the second request queued behind the first). Measured with two Mayas and an alternating client
        (bench/replica_affinity.py --mayas 2), pinning kept 0.77 of continuation prompts cached, however
        routed. llama-server's own choice (least recently used with `--slot-prompt-similarity 0`) restores each
        conversation from its RAM prompt cache (`--cache-ram`) instead. With the caches isolated per key,
        prompts are then sent with `cache_prompt: false` (a slot's owner is unknown)."""
        if self.router.mode != "affinity":
            return False
        self.shared = shared
        for replica, chooser in zip(self.replicas, self._slot_choosers):
            replica.engine.slot_chooser = chooser if shared is None else None
        return True

    async def _stream(self, generation: Generation) -> AsyncIterator[StreamItem]:
        keys = block_keys(generation.prompt_ids, generation.cache_salt) if self.router.mode == "affinity" else []
        depths = await self._depths(keys)
        tried: set[int] = set()
        failure: UpstreamError | None = None
        while True:
            choice = self.router.route(self._loads(), depths, frozenset(tried))
            if choice is None:
                raise failure  # every replica failed this request before it showed anything
            index, reason = choice
            replica = self._send(index, reason, keys)
            shown = False
            items = replica.engine._stream(generation)
            try:
                async for item in items:
                    shown = shown or not isinstance(item, Counts)
                    yield item
                return
            except UpstreamRejected:
                raise  # this request's own problem (its context, its parameters): the same anywhere
            except UpstreamError as exc:
                if shown or generation.cancelled:
                    raise
                failure = exc
                tried.add(index)
                log.warning("replica %s failed before answering (%s); trying another", replica.url, exc.message)
            finally:
                await items.aclose()
                replica.in_flight -= 1
                if not replica.up:
                    self._take_out(index)

    def _send(self, index: int, reason: Reason, keys: list[int]) -> Replica:
        replica = self.replicas[index]
        replica.routed += 1
        replica.in_flight += 1
        self.routes[(index, reason)] += 1
        if keys:
            self.table.sent(keys, index)
            if self.shared is not None:
                self.shared.sent(keys[-1], replica.url)
        return replica

    def _loads(self) -> list[ReplicaLoad]:
        return [ReplicaLoad(r.up, r.in_flight, r.engine.slots, r.routed) for r in self.replicas]

    async def _depths(self, keys: list[int]) -> list[int]:
        """For each replica, the blocks of the longest earlier prompt it was sent that this one extends: this
        Maya's table, then (if shared) a deeper tip another Maya routed."""
        if not keys:
            return [0] * len(self.replicas)
        depths = self.table.matches(keys, len(self.replicas))
        if self.shared is not None:
            found = await self.shared.deepest(keys, max(depths))
            index = self._index_of(found[1]) if found else None
            if index is not None:
                depths[index] = max(depths[index], found[0])
        return depths

    def _index_of(self, url: str) -> int | None:
        return next((i for i, r in enumerate(self.replicas) if r.url == url), None)

    def _take_out(self, index: int) -> None:
        replica = self.replicas[index]
        if replica.probing:
            return
        log.warning("replica %s is out (%s); probing it every %gs", replica.url,
                    replica.engine.health.last_error, self.probe_s)
        self.table.forget(index)  # if it comes back it may have restarted empty; its conversations move on
        replica.watch(self.probe_s)

    def describe(self) -> dict:
        return {**super().describe(), "prefill_concurrency": self.prefill_concurrency,
                "routing": {"mode": self.router.mode, "affinity": self.table.describe(),
                            "shared_affinity": self.shared.describe() if self.shared is not None else None},
                "replicas": [self._describe(i, r) for i, r in enumerate(self.replicas)]}

    def describe_grammar(self) -> dict:
        """The replicas serve one kind of engine: its mechanism, with each replica's refusals."""
        each = [replica.engine.describe_grammar() for replica in self.replicas]
        return {**each[0], "in_use": any(e.get("in_use") for e in each),
                "refusals": sum(e.get("refusals", 0) for e in each), "replicas": each}

    def _describe(self, index: int, replica: Replica) -> dict:
        engine = replica.engine
        return {"kind": engine.info.kind, "model": engine.info.model, **engine.health.describe(),
                "up": replica.up, "slots": engine.slots, "in_flight": replica.in_flight, "routed": replica.routed,
                "routes": {reason.value: self.routes[(index, reason)] for reason in Reason}}

    def metric_collectors(self) -> list:
        return [ReplicaCollector(self),
                PrefillGateCollector(lambda: {r.url: r.engine.prefill_gate for r in self.replicas}),
                GrammarRefusalsCollector(lambda: [r.engine.grammars for r in self.replicas])]

    def begin_serving(self) -> None:
        """Check each replica in rotation every `check_s` (`replica.py`): one that stops answering is taken out."""
        if self.check_s:
            for index, replica in enumerate(self.replicas):
                replica.check_every(self.check_s, lambda index=index: self._take_out(index))

    async def close(self) -> None:
        for replica in self.replicas:
            replica.stop_watching()
            await replica.engine.close()

    def shutdown(self) -> None:
        for replica in self.replicas:
            replica.engine.shutdown()

    def __repr__(self) -> str:
        return f"ReplicaSetEngine({self.replicas!r}, {self.router.mode})"


def _mismatch(first: Replica, other: Replica) -> str:
    differ = sorted(k for k in first.identity.keys() | other.identity.keys()
                    if first.identity.get(k) != other.identity.get(k))
    said = ", ".join(f"{k}: {_short(other.identity.get(k))} vs {_short(first.identity.get(k))}" for k in differ)
    return (f"the replica {other.url} serves another model than {first.url} ({said}); every replica must serve "
            "the same model and tokenizer")


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
