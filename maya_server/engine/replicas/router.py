"""Which replica takes a request: prefix affinity weighed against load, or plain round-robin.

Affinity (`replica_routing: affinity`, the default): a prompt that extends one
sent before (`PrefixTable.matches`: a conversation's next turn) goes to the
replica that was sent the longest such prompt, so it lands where its KV is and
only the new turn is prefilled. A prompt that extends none (a new
conversation, even one sharing instructions with others) goes to the least
loaded replica (Maya's own streams on it per slot, then the fewest requests so
far, so that sequential new conversations alternate).

A holder whose slots are all taken, while another replica has a free one,
gives the request to the least loaded replica (`overflow`): waiting behind a
full replica costs whole answers' time, while the other replica prefills only
what it lacks of the conversation (engines with a prompt cache keep shared
instructions on every replica). Maya's queue holds no more streams than all
replicas' slots together, so no replica ever queues work another could start.
The conversation then continues there, where its latest prompt went.
When every slot is busy all the time (more sessions than slots), a turn is
admitted when some slot frees, which is on its own replica only about half the
time, so this rule then keeps little more cached than round-robin; a looser
rule (overflow only once the holder was a whole replica's slots busier) kept
more cached in one run of bench/replica_affinity.py (0.967 against 0.944) but
queued turns on full replicas beside idle slots (continuation TTFT 1.24x
round-robin's). Keeping both would take a queue that, when a replica's slot
frees, admits first the oldest waiter that replica holds.

Round-robin (`round-robin`) ignores prefixes: each request goes to the next
replica in turn, as a plain load balancer would. It is there to measure what
affinity is worth (bench/replica_affinity.py), and for engines whose prefix
cache does not matter.

Replicas that are out (failed, not yet back) are passed over; when all are
out, all are candidates, so a request still finds an engine that came back
before its probe noticed. Pure logic, no I/O: `route` is given every fact.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Sequence


class Reason(enum.Enum):
    """Why a replica was chosen (the `reason` label of `maya:replica_routes_total`)."""

    AFFINITY = "affinity"
    """It was sent the longest earlier prompt this one extends (the conversation's previous turn)."""
    LEAST_LOADED = "least_loaded"
    """The prompt extends none sent before (a new conversation): the least loaded took it."""
    OVERFLOW = "overflow"
    """The prefix's holder had no free slot and another replica had: the least loaded took it instead."""
    ROUND_ROBIN = "round_robin"
    RETRY = "retry"
    """Another replica failed this request before anything was sent to the client."""


@dataclass(frozen=True)
class ReplicaLoad:
    up: bool
    in_flight: int
    """Maya's streams on the replica now."""
    slots: int
    routed: int = 0
    """Requests sent to it so far: among equally loaded replicas the one that had fewest takes the next, so
    sequential new conversations alternate rather than all landing on the first."""


class ReplicaRouter:
    def __init__(self, mode: str) -> None:
        if mode not in ("affinity", "round-robin"):
            raise ValueError(f"unknown replica routing {mode!r}")
        self.mode = mode
        self._next = 0

    def route(self, loads: Sequence[ReplicaLoad], depths: Sequence[int], exclude: frozenset[int] = frozenset()
              ) -> tuple[int, Reason] | None:
        """The replica for a prompt that extends an earlier prompt of `depths[i]` blocks sent to replica `i`, and
        why; None when every replica is in `exclude` (already tried for this request)."""
        candidates = [i for i, load in enumerate(loads) if load.up and i not in exclude]
        if not candidates:
            candidates = [i for i in range(len(loads)) if i not in exclude]
        if not candidates:
            return None
        if exclude:
            return self._least_loaded(loads, candidates), Reason.RETRY
        if self.mode == "round-robin":
            return self._round_robin(candidates), Reason.ROUND_ROBIN
        return self._affine(loads, depths, candidates)

    def _affine(self, loads: Sequence[ReplicaLoad], depths: Sequence[int], candidates: list[int]
                ) -> tuple[int, Reason]:
        least = self._least_loaded(loads, candidates)
        deepest = max(depths[i] for i in candidates)
        if deepest == 0:
            return least, Reason.LEAST_LOADED
        holder = self._least_loaded(loads, [i for i in candidates if depths[i] == deepest])
        if loads[holder].in_flight >= loads[holder].slots and loads[least].in_flight < loads[least].slots:
            return least, Reason.OVERFLOW
        return holder, Reason.AFFINITY

    @staticmethod
    def _least_loaded(loads: Sequence[ReplicaLoad], candidates: list[int]) -> int:
        return min(candidates, key=lambda i: (loads[i].in_flight / loads[i].slots, loads[i].routed, i))

    def _round_robin(self, candidates: list[int]) -> int:
        index = next((i for i in candidates if i >= self._next), candidates[0])
        self._next = index + 1
        return index

    def __repr__(self) -> str:
        return f"ReplicaRouter({self.mode})"
