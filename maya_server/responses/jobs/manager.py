"""Background responses: admission, workers, job records and their one-way lifecycle.

    queued ──► in_progress ──► completed | incomplete | failed | cancelled
       └──► cancelled (removed before generating) | failed (deadline passed while queued)

A job is admitted with everything validated (400s, 404s, 413s come first),
its history pinned and its prompt prepared; `JOB_WORKERS` worker tasks take
jobs in order and run them through the same pipeline as a foreground
request, so the engine FIFO still decides who generates. A worker owns the
job's generation and its cleanup: cancelling or timing out a running job
cancels its generation task, awaits the pipeline's close (its engine slot
released, its generation cancelled), and only then publishes the terminal
state. Readers come and go without touching the job.

Bounds: `JOB_ENTRIES` records (finished ones are evicted, oldest first, to
admit new jobs; active ones never are), `JOB_OWNER_ENTRIES` active jobs per
key, a deadline `JOB_TIMEOUT_S` after admission, finished records kept
`JOB_TTL_S`, `STREAM_READERS` / `STREAM_OWNER_READERS` concurrent readers.
Pressure is a 429. All of it runs on the event loop, so no lock is needed.

This is the memory backend; `jobs/redis.py` keeps the records and event logs in Redis for a fleet of
replicas and reuses everything here that runs a job (workers, cancellation, deadlines, shutdown).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter, OrderedDict
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import AsyncIterator, Awaitable, Callable, Iterator

import orjson

from ...errors import (
    ConflictError, EventLimitError, EventTooLarge, JobCleanupError, JobTimeoutError, MayaError,
    RateLimitError, ServiceUnavailableError, StorageCapacityError,
)
from ...neutral.events import PipelineEvent
from ...pipeline.drain import drain
from ..assembly.assembler import ResponseAssembler
from .event_log import EventLog
from ..settings import ResponsesSettings
from ..persistence.stored_turn import StoredTurn

TRANSITIONS = {
    "queued": {"in_progress", "cancelled", "failed"},
    "in_progress": {"completed", "incomplete", "failed", "cancelled"},
}
ACTIVE = ("queued", "in_progress")
CANCEL_WAIT_S = 5.0

log = logging.getLogger("maya.jobs")


@dataclass(eq=False)
class Job:
    id: str
    owner: str
    assembler: ResponseAssembler
    log: EventLog
    """Its events: an `EventLog` here, a `RedisJobLog` on Redis (`new_log` makes the one that fits)."""
    generate: Callable[[], AsyncIterator[PipelineEvent]]
    """Starts the job's pipeline (engine slot, generation, parser, gate)."""
    turn: StoredTurn
    """Handed over to the job at admission (`start_job`); `JobManager._finish` releases it."""
    history: bytes
    """The job's input history as a JSON array, to continue it after the store evicts its copy."""
    state: str = "queued"
    finished_at: float | None = None
    timed_out: bool = False
    task: asyncio.Task | None = None
    done: asyncio.Event = field(default_factory=asyncio.Event)
    timer: asyncio.TimerHandle | None = None
    """Fires `JobManager._expire` at the deadline (event-loop time)."""
    request: bytes = b""
    """The validated request's JSON, kept with a shared record so that another replica can run the task again."""
    prior_count: int = 0
    """How many of `history`'s items are the continued history pinned at admission (the rest are this request's)."""
    continues: bool = False
    """Taken over mid-generation from another replica (`jobs/redis.py`): its opening events are in the log already,
    and its worker continues the output published so far instead of starting it."""
    handing_over: bool = False
    """Its replica is shutting down and lets another take it over: stopping its generation publishes no end."""
    taken_at: float | None = None
    """When it became free to take over (wall clock): a resumed task's latency is counted from it."""

    @property
    def active(self) -> bool:
        return self.state in ACTIVE

    def snapshot(self) -> dict:
        return self.assembler.snapshot()

    def history_items(self) -> list[dict]:
        """Input history then output: what a continuation of this response sees."""
        return orjson.loads(self.history) + self.snapshot()["output"]


@dataclass
class JobCounters:
    admitted: int = 0
    rejections: int = 0
    cancellations: int = 0
    timeouts: int = 0
    reader_rejections: int = 0
    evictions: int = 0
    finished: Counter = field(default_factory=Counter)


class JobManager:
    backend = "memory"
    resumer = None
    """What rebuilds a task taken over from another replica (`jobs/handover.py`): only a shared backend takes
    tasks over; the API layer sets it (`responses/background/resumable.py`)."""

    def __init__(
        self,
        settings: ResponsesSettings,
        *,
        clock: Callable[[], float] = time.monotonic,
        on_failure_saved: Callable[[Job], Awaitable[None]] | None = None,
        shutdown_wait_s: float = 10.0,
        keepalive_s: float | None = None,
    ) -> None:
        """`on_failure_saved` undoes a save when a job that was stored fails afterwards; `keepalive_s` is the
        longest a reader's stream stays silent (a queued task or a held answer) before a comment line."""
        self.settings = settings
        self.keepalive_s = keepalive_s
        self.clock = clock
        self.shutdown_wait_s = shutdown_wait_s
        self.counters = JobCounters()
        self._on_failure_saved = on_failure_saved
        self._jobs: OrderedDict[str, Job] = OrderedDict()
        self._active: Counter[str] = Counter()
        self._readers: Counter[str] = Counter()
        self._queue: asyncio.Queue[Job | None] | None = None
        self._workers: list[asyncio.Task] = []
        self.accepting = True

    async def start(self) -> None:
        """Nothing to start in memory (a shared backend starts its heartbeat here)."""

    async def close(self) -> None:
        """Nothing to close in memory."""

    def new_log(self, job_id: str, assembler: ResponseAssembler) -> EventLog:
        """The event log of a job about to be admitted."""
        s = self.settings
        return EventLog(s.event_count, s.event_bytes, assembler.reserve_sequence)

    # -- admission --------------------------------------------------------------------
    async def admit(self, job: Job) -> None:
        """Record and queue a job, or refuse it (503 shutting down, 429 under pressure)."""
        self._check_accepting()
        s = self.settings
        if self._active[job.owner] >= s.job_owner_entries:
            self.counters.rejections += 1
            raise _owner_full(s)
        self._purge()
        if len(self._jobs) >= s.job_entries and not self._evict_finished():
            self.counters.rejections += 1
            raise _fleet_full(s)
        try:
            self._publish(job, job.assembler.queued())
        except EventTooLarge as exc:
            raise _cannot_keep(exc) from None
        self._enqueue(job)

    def _check_accepting(self) -> None:
        if not self.accepting:
            raise ServiceUnavailableError("The server is shutting down and accepts no background responses.")

    def _enqueue(self, job: Job, timeout_s: float | None = None) -> None:
        """The admitted job joins this process: its deadline starts (`timeout_s` from now: what is left of a
        deadline set elsewhere, for a task taken over, which counts as claimed, not admitted), a worker will
        take it."""
        self._jobs[job.id] = job
        self._active[job.owner] += 1
        self.counters.admitted += timeout_s is None
        loop = asyncio.get_running_loop()
        timeout_s = self.settings.job_timeout_s if timeout_s is None else timeout_s
        job.timer = loop.call_later(timeout_s, self._expire, job)
        self._start_workers()
        self._queue.put_nowait(job)

    def _start_workers(self) -> None:
        if self._queue is None:
            self._queue = asyncio.Queue()
            self._workers = [asyncio.ensure_future(self._worker()) for _ in range(self.settings.job_workers)]

    def _evict_finished(self) -> bool:
        for job in self._jobs.values():
            if not job.active:
                del self._jobs[job.id]
                self.counters.evictions += 1
                return True
        return False

    def _purge(self) -> None:
        expired = [j for j in self._jobs.values()
                   if not j.active and j.finished_at is not None
                   and j.finished_at + self.settings.job_ttl_s <= self.clock()]
        for job in expired:
            del self._jobs[job.id]

    async def keep_images(self, job_id: str, images: list[bytes]) -> None:
        """Keep a task's loaded images for a replica that may take it over (a shared backend); nothing here."""

    # -- lookups ----------------------------------------------------------------------
    def runs_here(self, job_id: str) -> bool:
        """Whether this process runs the job (always, in memory): its readers then end with it."""
        return True

    async def find(self, owner: str, response_id: str, *, history: bool = False) -> Job | None:
        """The owner's job record, or None. `history`: the caller reads its input history (a shared backend
        fetches it only then)."""
        return self.find_local(owner, response_id)

    def find_local(self, owner: str, response_id: str) -> Job | None:
        self._purge()
        job = self._jobs.get(response_id)
        return job if job is not None and job.owner == owner else None

    async def delete(self, owner: str, response_id: str) -> bool:
        """Forget a finished job's record; True if there was one. An active job is a 409."""
        job = self.find_local(owner, response_id)
        if job is None:
            return False
        if job.active:
            raise _still_active(response_id, job.state)
        del self._jobs[response_id]
        return True

    @contextmanager
    def reader(self, owner: str) -> Iterator[None]:
        """Admit one stream reader (429 over the global or per-key limit) for the `with` block."""
        s = self.settings
        if sum(self._readers.values()) >= s.stream_readers or self._readers[owner] >= s.stream_owner_readers:
            self.counters.reader_rejections += 1
            raise RateLimitError("Too many background stream readers are connected; retry later.")
        self._readers[owner] += 1
        try:
            yield
        finally:
            self._readers[owner] -= 1
            if not self._readers[owner]:
                del self._readers[owner]

    # -- cancellation -----------------------------------------------------------------
    async def cancel(self, job: Job) -> dict:
        """Cancel (idempotent); waits up to five seconds for a running job to clean up."""
        self._request_cancel(job)
        if job.state == "in_progress":
            try:
                await asyncio.wait_for(asyncio.shield(job.done.wait()), CANCEL_WAIT_S)
            except asyncio.TimeoutError:
                pass  # still cleaning up: the snapshot says in_progress; the client polls
        return job.snapshot()

    def _request_cancel(self, job: Job) -> None:
        """A queued job ends cancelled now; a running one's generation is cancelled (it ends after cleanup)."""
        if job.state == "queued":
            self._finish(job, "cancelled", job.assembler.cancelled())
        elif job.state == "in_progress" and job.task is not None:
            job.task.cancel()

    def _expire(self, job: Job) -> None:
        """The deadline passed: a queued job fails now, a running one after its cleanup."""
        if job.state == "queued":
            self.counters.timeouts += 1
            self._finish(job, "failed", job.assembler.fail(_timeout_error(self.settings)))
        elif job.state == "in_progress" and job.task is not None:
            job.timed_out = True
            job.task.cancel()

    # -- workers ----------------------------------------------------------------------
    async def _worker(self) -> None:
        while True:
            job = await self._queue.get()
            if job is None:
                return
            if job.state != "queued":
                continue  # cancelled or expired while it waited
            if job.timer is not None and job.timer.when() <= asyncio.get_running_loop().time():
                self._expire(job)  # its deadline passed while it waited; the timer is just late
            else:
                await self._execute(job)

    async def _execute(self, job: Job) -> None:
        self._transition(job, "in_progress")
        if not job.continues:  # a task taken over mid-generation published its start already
            self._publish(job, job.assembler.started())
        if not await self._claimed(job):
            return
        job.task = asyncio.ensure_future(self._generate(job))
        await asyncio.wait({job.task})  # every outcome below ends in _finish, which releases the turn
        error = None if job.task.cancelled() else job.task.exception()
        if isinstance(error, EventTooLarge):
            await self._fail_after_events(job, EventLimitError(f"The response failed: {error}."))
        elif error is not None:
            log.error("background job failed: %s", type(error).__name__)
            await self._fail_after_events(job, MayaError("The server had an error while generating this response."))
        elif job.assembler.finished:
            self._finish(job, job.assembler.status, [])
        elif job.timed_out:
            self.counters.timeouts += 1
            self._finish(job, "failed", job.assembler.fail(_timeout_error(self.settings)))
        elif job.handing_over:
            await self._let_go(job)
        else:
            self._finish(job, "cancelled", job.assembler.cancelled())

    async def _let_go(self, job: Job) -> None:
        """Hand a stopped task to another replica (a shared backend, shutting down); in memory there is none:
        it ends cancelled."""
        self._finish(job, "cancelled", job.assembler.cancelled())

    async def _generate(self, job: Job) -> None:
        # closed fully even when the job is cancelled meanwhile: the pipeline's cleanup (its admission
        # released, its generation cancelled) is over before the job is reported finished
        def deliver(event: PipelineEvent) -> Awaitable[None] | None:
            delivered = job.assembler.deliver(event)
            if isinstance(delivered, list):
                self._publish(job, delivered)
                return self._backlog(job)
            return self._publish_saved(job, delivered)

        await drain(job.generate(), deliver, close_fully=True)

    async def _claimed(self, job: Job) -> bool:
        """Whether the job is still this process's to run once it is marked in progress (always, in memory)."""
        return True

    def _backlog(self, job: Job) -> Awaitable[None] | None:
        """What the generation awaits before its next event: nothing in memory, where appending is the write."""
        return None

    async def _publish_saved(self, job: Job, delivered: Awaitable[list[dict]]) -> None:
        """The events of the one event that saved the response, once the save is over."""
        self._publish(job, await delivered)

    async def _fail_after_events(self, job: Job, failure: MayaError) -> None:
        """An event was too large to keep: the job fails, and a copy stored on completion goes."""
        if job.assembler.status in ("completed", "incomplete") and self._on_failure_saved is not None:
            try:
                await self._on_failure_saved(job)
            except MayaError:
                log.error("background job failed after it was stored, and its stored copy could not be removed")
        events = job.assembler.fail(failure)
        try:
            self._finish(job, "failed", events)
        except EventTooLarge:  # the failed snapshot is as large: the `error` event alone ends the stream
            job.log.close()

    # -- state ------------------------------------------------------------------------
    def _transition(self, job: Job, state: str) -> None:
        if state not in TRANSITIONS.get(job.state, ()):
            raise RuntimeError(f"job {job.id}: no transition {job.state} -> {state}")
        job.state = state

    def _finish(self, job: Job, state: str, events: list[dict]) -> None:
        self._transition(job, state)
        if state == "cancelled":
            self.counters.cancellations += 1
        self.counters.finished[state] += 1
        job.finished_at = self.clock()
        self._let_go_here(job)
        try:
            self._publish(job, events)
        finally:
            job.log.close()

    def _let_go_here(self, job: Job) -> None:
        """What a task held on this replica goes back: its owner's active slot, its deadline timer, its turn in
        the engine; whoever waits on it is woken. (It finished here, or another replica goes on with it.)"""
        self._active[job.owner] -= 1
        if not self._active[job.owner]:
            del self._active[job.owner]
        if job.timer is not None:
            job.timer.cancel()
        job.turn.release()
        job.done.set()

    def _publish(self, job: Job, events: list[dict]) -> None:
        for event in events:
            job.log.append(event)

    # -- shutdown and figures ---------------------------------------------------------
    async def shutdown(self) -> None:
        """Stop admission, cancel queued and running jobs, join the workers; raise
        `JobCleanupError` if they do not finish within the shutdown wait."""
        self.accepting = False
        for job in list(self._jobs.values()):
            if job.state == "queued":
                self._finish(job, "cancelled", job.assembler.cancelled())
            elif job.state == "in_progress" and job.task is not None:
                job.task.cancel()
        if not self._workers:
            return
        for _ in self._workers:
            self._queue.put_nowait(None)
        _, pending = await asyncio.wait(self._workers, timeout=self.shutdown_wait_s)
        if pending:
            raise JobCleanupError(
                f"{len(pending)} background worker(s) did not finish cleaning up within {self.shutdown_wait_s}s: "
                "the engine has not confirmed it released their generations."
            )

    async def fresh_stats(self) -> dict:
        """`stats()`, for /v1/status (a shared backend reads the fleet's figures first)."""
        return self.stats()

    def stats(self) -> dict:
        self._purge()
        states = Counter(job.state for job in self._jobs.values())
        c = self.counters
        return {
            "backend": self.backend, "records": len(self._jobs), "queued": states["queued"], "running": states["in_progress"],
            "event_bytes": sum(job.log.bytes for job in self._jobs.values()),
            "readers": sum(self._readers.values()), "admitted": c.admitted, "rejections": c.rejections,
            "reader_rejections": c.reader_rejections, "cancellations": c.cancellations, "timeouts": c.timeouts,
            "evictions": c.evictions, "finished": dict(c.finished),
            "limits": {"records": self.settings.job_entries, "workers": self.settings.job_workers,
                       "owner_active": self.settings.job_owner_entries, "readers": self.settings.stream_readers},
        }


def _owner_full(s: ResponsesSettings) -> RateLimitError:
    return RateLimitError(f"Too many active background responses for this API key (limit {s.job_owner_entries}); "
                          "wait for one to finish or cancel one.")


def _fleet_full(s: ResponsesSettings) -> RateLimitError:
    return RateLimitError(f"The server is running its limit of {s.job_entries} background responses; retry later.")


def _cannot_keep(exc: EventTooLarge) -> StorageCapacityError:
    return StorageCapacityError(f"This background response cannot be kept: {exc}.")


def _still_active(response_id: str, state: str) -> ConflictError:
    return ConflictError(f"Response '{response_id}' is still {state}; cancel it before deleting it.", param=None)


def _timeout_error(settings: ResponsesSettings) -> JobTimeoutError:
    return JobTimeoutError(f"The background response did not finish within {settings.job_timeout_s} seconds.")
