"""Background tasks on Redis (`--store redis://…`): any replica follows, cancels and takes over any task.

Generation runs where the task is held: that replica's workers run it exactly as in memory (`JobManager`), and
its cleanup still comes before its terminal state. What moves to Redis is everything another replica must see
(`jobs/redis_lua.py` has the keys and scripts):

- **The record and the log.** The task's state, its response as last published, its input history and its
  events (a Redis Stream, numbered by the log) live in Redis. Retrieve, `stream=true&starting_after=N`,
  delete (409 while active) and continuation read them through any replica. The per-task event bounds,
  `JOB_ENTRIES`, `JOB_OWNER_ENTRIES` and `JOB_TTL_S` hold for the fleet (the admission script checks them
  all at once); the reader bounds stay per replica, as they bound this process's connections.
- **What it needs to run anywhere.** Admission also keeps the validated request, how much of the history is
  the pinned history it continues, the model and family it was admitted for and its deadline (within the
  task's `JOB_INPUT_BYTES`), so that any replica can prepare it again with its own engine.
- **Leases.** The replica running a task holds a lease on it (`--job-lease-s`). Every flush of the task's
  events renews it, and a heartbeat renews all of this replica's leases every `min(1, lease / 4)` seconds
  in one script. The same heartbeat lists tasks whose lease lapsed (their replica was killed, or lost Redis
  for longer than the lease, or handed them over).
- **Taking over, not failing** (`jobs/handover.py`). For each lapsed task, the replicas race with `CLAIM`; the
  winner holds it under a new fence and rebuilds it (`resumer`, from the API layer): a queued task runs from
  its start, a running one continues its published output, its events numbered on. A replica whose model or
  family differs from the record's leaves it to another. A task ends instead, for every reader, when a cancel
  came while it had no owner, its deadline passed, it was taken over `--job-resume-limit` times, or nobody
  took it within `--job-claim-wait-s`; whichever replica ends it first wins, the others change nothing.
- **Fencing.** Taking a task over or ending it moves its fence on, and a finished record refuses every write:
  an owner that comes back late (SIGSTOP, a long partition) learns from its next write that the task is no
  longer its own, stops generating, and writes nothing.
- **Cancel through another replica** marks the record; the owner's next heartbeat or flush (at most one
  heartbeat away) cancels the task as in memory, and the caller waits up to five seconds for the record to
  finish, then answers with it as it is.
- **Shutdown hands over.** SIGTERM stops admission, hands queued tasks over at once, lets running ones finish
  here for up to `--job-shutdown-grace-s`, then stops the rest and hands them over with their progress flushed
  (`HAND_OVER`: the lease lapses now, so another replica takes them at its next heartbeat). Nothing is
  cancelled; readers here get the shutdown's `error` and reconnect through another replica.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from dataclasses import dataclass
from typing import Any, Awaitable, Callable

import orjson

from ...errors import EventTooLarge, MayaError, StoreUnavailableError
from . import redis_lua as lua
from ..assembly.assembler import ResponseAssembler, published_output
from .event_log_redis import JobLogs, RedisJobLog, RedisLogReader, unnumbered
from .handover import ClaimedTask, Resumer, TakeOverFigures, ended, packed_images, unpacked_images
from .manager import (
    ACTIVE, CANCEL_WAIT_S, Job, JobManager, _cannot_keep, _fleet_full, _owner_full, _still_active, _timeout_error,
)
from ..store.redis_link import RedisLink, every
from ..settings import ResponsesSettings

SCRIPTS = ("ADMIT", "APPEND", "HEARTBEAT", "READ", "RESERVE", "CANCEL", "DELETE", "REAP", "FIGURES", "CLAIM",
           "HAND_OVER", "KEEP_IMAGES")
CANCEL_POLL_S = 0.1


def job_scripts(link: RedisLink) -> dict:
    """Every job script on `link`. The writes a client is told of wait for `--store-wait-replicas` (`durable`): a
    task's admission (`ADMIT`: its request's 503 if they do not confirm) and the flush that ends its log
    (`APPEND_END`, the same script as `APPEND`: counted and logged if they do not, as nobody waits on it)."""
    scripts = {name: link.script(getattr(lua, name), durable="answer" if name == "ADMIT" else None)
               for name in SCRIPTS}
    scripts["APPEND_END"] = link.script(lua.APPEND, durable="note")
    return scripts

log = logging.getLogger("maya.jobs")


@dataclass
class SharedJob:
    """A task's record as read from Redis: what retrieve, stream, continue, delete and cancel need."""

    id: str
    owner: str
    state: str
    snapshot_json: bytes
    history: bytes
    """Empty unless the lookup asked for it."""
    log: RedisLogReader

    @property
    def active(self) -> bool:
        return self.state in ACTIVE

    def snapshot(self) -> dict:
        return orjson.loads(self.snapshot_json)

    def history_items(self) -> list[dict]:
        return orjson.loads(self.history) + self.snapshot()["output"]


class RedisJobManager(JobManager):
    backend = "redis"

    def __init__(self, settings: ResponsesSettings, *, link: RedisLink, tail_client: Any, lease_s: float,
                 wall_clock: Callable[[], float] = time.time, serves: tuple[str, str] = ("", ""),
                 claim_wait_s: float = 30.0, resume_limit: int = 3, shutdown_grace_s: float = 25.0,
                 **options) -> None:
        """`serves`: the model and family this replica generates with; it takes over only tasks admitted for the
        same two. `claim_wait_s`, `resume_limit`: when a task nobody holds ends instead (`jobs/handover.py`);
        `shutdown_grace_s`: how long a SIGTERM lets running tasks finish here before handing them over."""
        super().__init__(settings, **options)
        self.serves = serves
        self.claim_wait_s = claim_wait_s
        self.resume_limit = resume_limit
        self.shutdown_grace_s = shutdown_grace_s
        self.resumer: Resumer | None = None
        """Rebuilds a task taken over (set by the API layer, `responses/background/resumable.py`); None: this
        replica takes none over, and only ends the tasks that nobody may take."""
        self.link = link
        self.lease_s = lease_s
        self.heartbeat_s = min(1.0, lease_s / 4)
        self.wall_clock = wall_clock
        """Leases and retention are the replicas' wall clock (NTP-synchronised; skew must stay well under the lease)."""
        self.replica = secrets.token_hex(8)
        scripts = job_scripts(link)
        self.logs = JobLogs(link, tail_client, scripts, max_count=settings.event_count, max_bytes=settings.event_bytes)
        self._scripts = scripts
        self._draining: dict[str, Job] = {}
        """This replica's tasks whose log is not yet closed in Redis: the heartbeat renews their leases."""
        self._heartbeat: asyncio.Task | None = None
        self.fleet: dict = {"records": 0, "active": 0}
        self.fenced = 0
        self.reaped = 0
        self.takeovers = TakeOverFigures()
        self._stopping = False

    # -- lifecycle ------------------------------------------------------------------------
    async def start(self) -> None:
        self._heartbeat = asyncio.ensure_future(every(self.heartbeat_s, self.heartbeat, "background heartbeat"))

    async def close(self) -> None:
        if self._heartbeat is not None:
            self._heartbeat.cancel()
            await asyncio.gather(self._heartbeat, return_exceptions=True)
        await self.logs.tail_client.aclose()
        await self.logs.tail_client.connection_pool.disconnect()

    def new_log(self, job_id: str, assembler: ResponseAssembler) -> RedisJobLog:
        assembler.keeps_raw = True  # another replica may take the task over: it writes the cut turn back from it
        return RedisJobLog(self.logs, job_id, assembler.snapshot, lease_s=self.lease_s, clock=self.wall_clock,
                           on_cancel=lambda: self._cancel_asked(job_id), on_fenced=lambda: self._fenced(job_id),
                           raw=assembler.take_raw, on_broken=lambda reason: self._log_broken(job_id, reason))

    # -- admission ------------------------------------------------------------------------
    async def admit(self, job: Job) -> None:
        """One script checks the fleet's bounds, creates the record and writes the queued events."""
        self._check_accepting()
        s = self.settings
        try:
            events = [job.log.encode(event) for event in job.assembler.queued()]
        except EventTooLarge as exc:
            raise _cannot_keep(exc) from None
        now = self.wall_clock()
        args: list = [self.link.prefix, now, s.job_ttl_s, s.job_entries, s.job_owner_entries, s.event_count,
                      s.event_bytes, job.id, await self.link.scope(job.owner), self.replica, now + self.lease_s,
                      job.history, orjson.dumps(job.snapshot()), job.request, job.prior_count, *self.serves,
                      now + s.job_timeout_s]
        for kind, body in events:
            args += (kind, body)
        answer = await self._scripts["ADMIT"](args)
        outcome = answer[0].decode()
        if outcome != "ok":
            self.counters.rejections += 1
            if outcome == "owner_full":
                raise _owner_full(s)
            if outcome == "full":
                raise _fleet_full(s)
            raise RuntimeError(f"background response {job.id} already exists")  # ids are generated: a bug
        job.log.fence = int(answer[1])
        self._draining[job.id] = job
        self._enqueue(job)

    # -- lookups --------------------------------------------------------------------------
    def runs_here(self, job_id: str) -> bool:
        """Never, for a reader: a task here may be handed over when this replica stops, so every reader gets the
        shutdown's `error` and reconnects through another replica, where the task goes on."""
        return False

    async def find(self, owner: str, response_id: str, *, history: bool = False) -> SharedJob | None:
        s = self.settings
        got = await self._scripts["READ"]([self.link.prefix, response_id, await self.link.scope(owner),
                                           self.wall_clock(), s.job_ttl_s, 1 if history else 0])
        if got is None:
            return None
        state, snapshot, first, next_sequence, stored_history = got
        return SharedJob(response_id, owner, state.decode(), snapshot, stored_history,
                         RedisLogReader(self.logs, response_id, int(first), int(next_sequence)))

    async def delete(self, owner: str, response_id: str) -> bool:
        s = self.settings
        got = await self._scripts["DELETE"]([self.link.prefix, response_id, await self.link.scope(owner),
                                             self.wall_clock(), s.job_ttl_s])
        if isinstance(got, bytes):
            raise _still_active(response_id, got.decode())
        return bool(got)

    # -- cancellation ---------------------------------------------------------------------
    async def cancel(self, job: SharedJob) -> dict:
        """Cancel through whichever replica: the owner cancels and cleans up; this waits up to five seconds
        for the record to finish, then answers with the record as it is."""
        deadline = asyncio.get_running_loop().time() + CANCEL_WAIT_S
        if job.active:  # marked in Redis even when it runs here: its owner acts on the mark at its next write
            marked = await self._scripts["CANCEL"]([self.link.prefix, job.id, await self.link.scope(job.owner)])
            if marked is None:
                return job.snapshot()  # deleted meanwhile: what the caller found
        local = self._jobs.get(job.id)
        if local is not None:
            self._request_cancel(local)
        current = job
        while current.active and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(CANCEL_POLL_S)
            current = await self.find(job.owner, job.id) or current
        return current.snapshot()

    def _cancel_asked(self, job_id: str) -> None:
        """Redis says a cancel was asked through another replica."""
        job = self._jobs.get(job_id)
        if job is not None:
            self._request_cancel(job)

    def _fenced(self, job_id: str) -> None:
        """The record refused this replica's write: the task is no longer ours. Stop it; write nothing."""
        self.fenced += 1
        log.warning("a background response's lease lapsed and another replica ended it; stopping its generation")
        job = self._draining.pop(job_id, None)
        if job is not None and job.active:
            self._request_cancel(job)

    def _log_broken(self, job_id: str, reason: str) -> None:
        """This replica cannot write the task's log (`RedisJobLog._broken`): its generation stops, and the task
        ends now through the store's other script (`REAP`, under the fence it holds) with `background_log_failed`,
        rather than wait, its lease renewed, for a writer that will never write."""
        log.error("a background response's events could not be written to the store (%s); ending it", reason)
        job = self._draining.pop(job_id, None)
        if job is None:
            return
        if job.active:
            self._request_cancel(job)
        asyncio.ensure_future(self._end_broken(job_id, job.log.fence))

    async def _end_broken(self, job_id: str, fence: int) -> None:
        try:
            await self._end_unheld(job_id, fence, "background_log_failed", held=True)
        except Exception as error:  # the store fails that too: the lease lapses and the fleet ends it as unowned
            log.error("a background response whose log failed could not be ended (%s)", type(error).__name__)

    # -- state ----------------------------------------------------------------------------
    def _transition(self, job: Job, state: str) -> None:
        super()._transition(job, state)
        job.log.mark(state)

    def _finish(self, job: Job, state: str, events: list[dict]) -> None:
        try:
            super()._finish(job, state, events)
        finally:
            self._jobs.pop(job.id, None)  # the record lives in Redis; this replica keeps only what it runs
            asyncio.ensure_future(self._forget_when_drained(job))

    async def _forget_when_drained(self, job: Job) -> None:
        await job.log.drained()
        self._draining.pop(job.id, None)

    async def _claimed(self, job: Job) -> bool:
        """Generation starts only once Redis took `in_progress` from this replica: a task another replica failed
        meanwhile (its lease lapsed while it waited here) is not generated at all. Redis silent for a whole
        lease: the task fails here too, with what Redis refused when it refused (`RedisLink.unavailable`)."""
        try:
            claimed = await asyncio.wait_for(job.log.confirmed(), self.lease_s)
        except asyncio.TimeoutError:
            self._finish(job, "failed", job.assembler.fail(self.link.unavailable(
                "The response store (Redis) did not answer when this background response started.")))
            return False
        if not claimed:
            self._finish(job, "failed", [])  # another replica ended it; nothing more is written
        elif job.timer is not None and job.timer.when() <= asyncio.get_running_loop().time():
            self.counters.timeouts += 1  # its deadline passed while Redis was slow to answer
            self._finish(job, "failed", job.assembler.fail(_timeout_error(self.settings)))
            return False
        return claimed

    def _backlog(self, job: Job) -> Awaitable[None] | None:
        return job.log.room()

    # -- heartbeat ------------------------------------------------------------------------
    async def heartbeat(self) -> None:
        """Renew this replica's leases; act on cancels asked elsewhere and on records that refused us; fail
        the tasks whose lease lapsed."""
        held = list(self._draining.values())
        now = self.wall_clock()
        args: list = [self.link.prefix, now, self.settings.job_ttl_s, now + self.lease_s]
        for job in held:
            args += (job.id, job.log.fence)
        answers, lapsed, figures = await self._scripts["HEARTBEAT"](args)
        self._read_figures(figures)
        for job, answer in zip(held, answers):
            if answer == b"cancel":
                self._cancel_asked(job.id)
            elif answer in (b"fenced", b"gone"):
                job.log.refused()
            # b"ended": this replica's own last flush finished it; the flush's answer tells the log
        for job_id in lapsed:
            if job_id.decode() not in self._draining and not self._stopping:
                await self._take_over(job_id.decode())

    # -- taking over a task nobody holds (jobs/handover.py) ---------------------------------
    async def _take_over(self, job_id: str) -> None:
        """Race the other replicas for a task whose lease lapsed: the winner runs it on (`CLAIM`); a task that
        must not be taken ends with its code; one admitted for another model is left for a replica serving it."""
        key = self.logs.key("j:", job_id)
        fence = await self.link.command(lambda: self.link.client.hget(key, "f"))
        if fence is None:
            return
        now = self.wall_clock()
        if self.resumer is None:  # takes nothing over: only ends what must end
            serves = ("", "\n")  # matches no record
        else:
            serves = self.serves
        answer = await self._scripts["CLAIM"]([self.link.prefix, job_id, int(fence), now, *serves, self.resume_limit,
                                               self.claim_wait_s, self.replica, now + self.lease_s])
        outcome = answer[0].decode()
        if outcome == "end":
            await self._end_unheld(job_id, int(fence), answer[1].decode(), held=False)
        elif outcome == "claimed":
            await self._resume(job_id, answer)

    async def _end_unheld(self, job_id: str, fence: int, code: str, *, held: bool, message: str | None = None) -> None:
        """End a task no replica runs (`REAP`): its terminal events, for every reader; `held`: this replica holds
        its fence (it took the task and cannot run it)."""
        key = self.logs.key("j:", job_id)
        snapshot, status, first = await self.link.command(lambda: self.link.client.hmget(key, "snap", "s", "first"))
        if snapshot is None:
            return
        response = orjson.loads(snapshot)
        if status == b"in_progress" and first == b"0":  # the snapshot is as of the last item opened or closed:
            # what the task published is in its log, whole
            logged = await self.logs.everything(job_id)
            response["output"] = published_output([orjson.loads(event.json) for event in logged])
        state, final, events = ended(response, code, message)
        s = self.settings
        args: list = [self.link.prefix, job_id, fence, self.wall_clock(), s.event_count, s.event_bytes,
                      orjson.dumps(final), state, code, 1 if held else 0]
        for kind, body in events:
            args += (kind, body)
        if await self._scripts["REAP"](args):
            self.reaped += 1
            self.takeovers.ended[code] += 1
            log.warning("a background response without an owner ended: %s", code)

    async def _resume(self, job_id: str, answer: list) -> None:
        """This replica won the task: rebuild it with its own engine and queue it (a task in progress continues
        from what it published)."""
        (_, fence, state, request, history, prior_count, snapshot, first, _next, deadline, resumes, cancel_asked,
         scope, lapsed_at, images, lengths) = answer
        fence = int(fence)
        state = state.decode()
        if state == "in_progress" and int(first) > 0:  # the log was trimmed: the output so far is not all there
            await self._end_unheld(job_id, fence, "background_resume_lost", held=True)
            return
        events = await self.logs.everything(job_id) if state == "in_progress" else []
        claimed = ClaimedTask(job_id, scope.decode(), fence, state, request, history, int(prior_count), snapshot,
                              float(deadline), int(resumes), int(cancel_asked) == 1, float(lapsed_at), events,
                              unpacked_images(images, lengths))
        try:
            job = await self.resumer(claimed, self.new_log)
        except MayaError as exc:  # its request no longer validates here, say
            await self._end_unheld(job_id, fence, "background_resume_lost", held=True, message=exc.message)
            return
        except Exception:  # a record this replica cannot read: it ends, rather than go round the fleet
            log.exception("a background response taken over could not be rebuilt")
            await self._end_unheld(job_id, fence, "background_resume_lost", held=True)
            return
        job.log.fence = fence
        job.continues = state == "in_progress"
        job.taken_at = claimed.lapsed_at
        self.takeovers.claimed += 1
        self._draining[job.id] = job
        self._enqueue(job, max(0.0, claimed.deadline - self.wall_clock()))
        if claimed.cancel_asked:
            self._cancel_asked(job.id)

    async def keep_images(self, job_id: str, images: list[bytes]) -> None:
        """Keep a task's images as this replica fetched and scaled them, for a replica that takes it over, when
        they fit the task's `JOB_INPUT_BYTES` with its request and history (else it fetches them again)."""
        job = self._draining.get(job_id)
        joined, lengths = packed_images(images)
        if job is None or len(job.history) + len(job.request) + len(joined) > self.settings.job_input_bytes:
            return
        await self._scripts["KEEP_IMAGES"]([self.link.prefix, job_id, job.log.fence, joined, lengths])

    async def _execute(self, job: Job) -> None:
        if job.taken_at is not None:
            self.takeovers.started(job.continues, max(0.0, self.wall_clock() - job.taken_at))
        await super()._execute(job)

    # -- shutdown and figures -------------------------------------------------------------
    async def shutdown(self) -> None:
        """Stop admitting; hand queued tasks over at once; let running ones finish here for up to the grace
        period, then hand the rest over (their generation stopped, their progress flushed, their lease let go);
        then as in memory, until every last write of this replica is in Redis (within the shutdown wait)."""
        self.accepting = False
        if not self._stopping:
            self._stopping = True
            queued = [asyncio.ensure_future(self._let_go(job)) for job in self._jobs.values() if job.state == "queued"]
            if queued:
                await asyncio.wait(queued, timeout=self.shutdown_wait_s)  # Redis silent: the stop below gives up
            running = [job for job in self._jobs.values() if job.state == "in_progress"]
            if running and self.shutdown_grace_s > 0:
                waits = [asyncio.ensure_future(job.done.wait()) for job in running]
                _, unfinished = await asyncio.wait(waits, timeout=self.shutdown_grace_s)
                for wait in unfinished:
                    wait.cancel()
            for job in list(self._jobs.values()):
                if job.state == "in_progress" and job.task is not None:
                    job.handing_over = True
                    job.task.cancel()
        try:
            await super().shutdown()
        finally:
            logs = [job.log for job in self._draining.values()]
            if logs:
                _, pending = await asyncio.wait([asyncio.ensure_future(l.drained()) for l in logs],
                                                timeout=self.shutdown_wait_s)
                for job_log in logs:
                    job_log.stop()
                if pending:
                    log.error("%d background response(s) could not write their end to the store before shutdown",
                              len(pending))

    async def _let_go(self, job: Job) -> None:
        """Hand a task over to the fleet: what it published stays, no end is written, its lease lapses now; this
        replica forgets it without finishing it."""
        job.state = "handed_over"  # not a record state: the task goes on elsewhere; a worker skips it
        self._let_go_here(job)
        self._jobs.pop(job.id, None)
        await job.log.hand_over()
        self._draining.pop(job.id, None)
        if job.log.closed:
            self.takeovers.handed_over += 1

    def _read_figures(self, figures: list) -> None:
        records, active, named = figures
        self.fleet = {"records": int(records), "active": int(active),
                      **{key.decode(): int(value) for key, value in zip(named[::2], named[1::2])}}

    async def fresh_stats(self) -> dict:
        """`stats()` with the fleet's figures read now (as last read, when Redis does not answer)."""
        try:
            self._read_figures(await self._scripts["FIGURES"]([self.link.prefix, self.wall_clock(), self.settings.job_ttl_s]))
        except StoreUnavailableError:
            pass
        return self.stats()

    def stats(self) -> dict:
        c = self.counters
        local = list(self._jobs.values())
        return {
            "backend": "redis", "records": self.fleet["records"],
            "queued": sum(job.state == "queued" for job in local),
            "running": sum(job.state == "in_progress" for job in local),
            "event_bytes": sum(job.log.bytes for job in self._draining.values()),
            "readers": sum(self._readers.values()), "admitted": c.admitted, "rejections": c.rejections,
            "reader_rejections": c.reader_rejections, "cancellations": c.cancellations, "timeouts": c.timeouts,
            "evictions": c.evictions, "finished": dict(c.finished), "fenced": self.fenced, "reaped": self.reaped,
            **self.takeovers.figures(), "lease_s": self.lease_s, "claim_wait_s": self.claim_wait_s,
            "resume_limit": self.resume_limit, "shutdown_grace_s": self.shutdown_grace_s, "fleet": dict(self.fleet),
            **self.logs.tail_figures(),
            "limits": {"records": self.settings.job_entries, "workers": self.settings.job_workers,
                       "owner_active": self.settings.job_owner_entries, "readers": self.settings.stream_readers},
        }

