"""A background task changing hands between replicas (`--store redis://…`): what the replica that takes it over
gets, and how a task that nobody may take ends.

The record keeps what a task needs to run anywhere (`redis_lua.py`: the validated request, the pinned history,
the model and family it was admitted for, its deadline). When its owner's lease lapses (killed, stopped, cut
off from Redis) or its owner hands it over (shutting down), the replicas race to take it with `CLAIM`; the one
that wins gets a `ClaimedTask` and rebuilds the task with its own engine through a `Resumer` (given by the API
layer above `jobs/`, which knows how a request is validated and prepared: `responses/background/resumable.py`). A
task that must not be taken ends here instead (`ended`), with its own code in the `error` event:

- `response_cancelled`: a cancel came through some replica while it had no owner;
- `job_timeout`: its deadline passed (a task is never resumed after it);
- `background_resume_limit`: it was taken over `--job-resume-limit` times already;
- `background_owner_lost`: no replica serving its model and family took it within `--job-claim-wait-s`;
- `background_resume_lost`: taken over, but what it had published can no longer be read (its log was trimmed
  past its bounds, or the taker could not rebuild it), so it cannot go on.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Awaitable, Callable, Protocol

import orjson

from .event_log import LoggedEvent
from .event_log_redis import unnumbered
from .manager import Job

MESSAGES = {
    "background_owner_lost": "The replica that ran this background response stopped renewing its lease (it was "
                             "stopped, or lost the store), and no replica serving its model took it over in time; "
                             "the response failed. Create it again.",
    "background_resume_limit": "This background response was taken over by another replica too many times (its "
                               "replicas kept stopping); the response failed. Create it again.",
    "background_resume_lost": "This background response's replica stopped, and what it had published can no longer "
                              "be read to continue it; the response failed. Create it again.",
    "background_log_failed": "This background response's events could not be written to the shared store (a "
                             "script failed there); the response failed. Create it again.",
    "job_timeout": "The background response did not finish before its deadline.",
    "response_cancelled": "The response was cancelled before it finished.",
}


@dataclass
class ClaimedTask:
    """A task this replica now holds under `fence` (the answer of `CLAIM`): enough to rebuild it here."""

    id: str
    owner_scope: str
    """The owner as Redis keys it (never the key): the rebuilt task's owner (`store.redis_link.ScopedOwner`)."""
    fence: int
    state: str
    """`queued` (never started: run it from the start) or `in_progress` (continue its output)."""
    request: bytes
    history: bytes
    prior_count: int
    snapshot: bytes
    deadline: float
    """Wall clock."""
    resumes: int
    cancel_asked: bool
    lapsed_at: float
    """When it became free to take (its lease's end, or its hand-over), wall clock."""
    events: list[LoggedEvent]
    """Its log so far (every event: nothing was trimmed), for a task in progress; empty for a queued one."""
    images: list[bytes] = field(default_factory=list)
    """Its images as its first owner fetched and scaled them (`KEEP_IMAGES`); empty: none kept."""

    def prior_items(self) -> list[dict]:
        return orjson.loads(self.history)[:self.prior_count]


class Resumer(Protocol):
    def __call__(self, claimed: ClaimedTask, new_log: Callable) -> Awaitable[Job]:
        """The task rebuilt for this replica's engine (`new_log(id, assembler)` makes its log); a `MayaError`
        when it cannot be (the task then fails with that error)."""


def packed_images(images: list[bytes]) -> tuple[bytes, str]:
    """Images as a record keeps them: joined, and their lengths."""
    return b"".join(images), ",".join(str(len(image)) for image in images)


def unpacked_images(joined: bytes, lengths: bytes) -> list[bytes]:
    images, start = [], 0
    for length in (int(part) for part in lengths.decode().split(",") if part):
        images.append(joined[start:start + length])
        start += length
    return images


def ended(snapshot: dict, code: str, message: str | None = None) -> tuple[str, dict, list[tuple[str, bytes]]]:
    """(the record's final state, its response, its terminal events unnumbered) for a task that ends without
    an owner: what it had published (`snapshot`, its output rebuilt from the log where the log is whole), its
    unfinished items closed incomplete."""
    for item in snapshot.get("output", []):
        if item.get("status") == "in_progress":
            item["status"] = "incomplete"
    message = message or MESSAGES[code]
    error = {"type": "error", "code": code, "message": message, "param": None}
    if code == "response_cancelled":
        snapshot.update(status="cancelled", completed_at=None, incomplete_details=None)
        return "cancelled", snapshot, [unnumbered(error)]
    snapshot.update(status="failed", completed_at=None, incomplete_details=None,
                    error={"code": "server_error", "message": message})
    return "failed", snapshot, [unnumbered(error), unnumbered({"type": "response.failed", "response": snapshot})]


@dataclass
class TakeOverFigures:
    """This replica's part in tasks changing hands: what /v1/status and the metrics show."""

    claimed: int = 0
    resumed: int = 0
    """Tasks in progress this replica continued (a queued one taken over is `claimed` only)."""
    handed_over: int = 0
    resume_seconds_sum: float = 0.0
    resume_seconds_count: int = 0
    """From the moment a task was free to take (its lease's end, its hand-over) to its start here."""
    ended: Counter = field(default_factory=Counter)
    """Tasks without an owner this replica ended, by code."""

    def started(self, continued: bool, waited_s: float) -> None:
        self.resumed += continued
        self.resume_seconds_sum += waited_s
        self.resume_seconds_count += 1

    def figures(self) -> dict:
        return {"claimed": self.claimed, "resumed": self.resumed, "handed_over": self.handed_over,
                "resume_seconds": {"sum": round(self.resume_seconds_sum, 6), "count": self.resume_seconds_count},
                "ended_unowned": dict(self.ended)}
