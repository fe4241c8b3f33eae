"""A background task's event log on Redis: the owner's writer (`RedisJobLog`) and any replica's reader
(`RedisLogReader`). The memory log's contract holds (`event_log.py`): events keep their sequence numbers,
the oldest are dropped past `EVENT_COUNT` / `EVENT_BYTES`, a reader that fell behind gets a terminal `error`
event with a number of its own, and no event is silently skipped.

The writer costs Redis a round trip per flush, not per token: events wait in a buffer while one flush is in
flight and for `FLUSH_INTERVAL_S` after it, and the next flush carries all of them in one script (`APPEND`),
which also renews the task's lease,
writes a changed state or snapshot, and answers whether a cancel was asked through another replica. The
snapshot is sent when it changes for a reader that retrieves it: at a state change and when an output item
opens or closes (an item in progress shows no content anyway). While Redis does not answer, the buffer
keeps every event and the flush is retried; past the log's own bounds the buffer makes the generation wait
(`room`), so the replica's memory stays bounded and nothing is dropped. A write the record refuses (its
fence moved on: another replica failed the task after its lease lapsed) stops the writer for good.

A flush is one Stream entry (`redis_lua.py`), so Redis adds one entry per flush and a reader decodes one
per flush. Readers of one task on one replica share one tail (`event_tail_redis.py`): one `XREAD BLOCK` loop on
the tail pool (`tail_client`, sized by the reader bound) whose entries are decoded once; Redis answers it at
once with every entry it has not read, or when the next one arrives. While Redis does not answer, the tail
waits and retries; the streams stay open and their keep-alive comments go on.
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Any, AsyncIterator, Awaitable, Callable

import orjson

from ...errors import EventTooLarge, StoreUnavailableError
from .event_log import LoggedEvent, cursor_problem, overtaken_error
from ..store.redis_link import RedisLink
from .event_tail_redis import RETRY_S, Numbered, TaskTail, decode

SNAPSHOT_EVENTS = frozenset({"response.output_item.added", "response.output_item.done"})
"""Events after which a retrieve's answer differs: the snapshot is written with them."""
SEQUENCE_BYTES = 32
"""What `{"sequence_number":N,` adds to an event's JSON, at most: counted before the log numbers it."""
FLUSH_INTERVAL_S = 0.05
"""The least time between two flushes of one task: at most 20 round trips a second per task, whatever its token
rate (1,000 live tasks: 20k appends/s at most, well inside one Redis core); a reader sees events at most this
much later than in memory."""
BATCH_EVENTS = 512
"""Events one flush carries at most, so one script never holds Redis long."""
READ_COUNT = 64
"""Entries one read returns at most (each up to `BATCH_EVENTS` events)."""
BLOCK_MS = 1000


def stream_id(sequence: int) -> str:
    """Where a read after sequence number `sequence` starts (-1: before the first): the entries after it hold the
    numbers after `sequence`, the one that holds `sequence + 1` included."""
    return f"{sequence + 1}-0"


def unnumbered(event: dict) -> tuple[str, bytes]:
    """(type, JSON without its sequence number): what the log numbers as it appends."""
    return event["type"], orjson.dumps({key: value for key, value in event.items() if key != "sequence_number"})


class RedisLogReader:
    """Where a reader starts (`check_cursor`, from the record as read) and what it reads (`follow`, `batches`)."""

    def __init__(self, logs: "JobLogs", job_id: str, first: int, next_sequence: int) -> None:
        self.logs = logs
        self.job_id = job_id
        self.first_retained = first
        self.last = next_sequence - 1
        self.cursor = -1
        """The last sequence number `follow` delivered (or skipped as a placeholder); `batches`: the last of the
        list it handed out."""
        self._position = -1
        """The last number read, delivered or not yet."""
        self._stopped = False

    def check_cursor(self, after: int) -> str | None:
        return cursor_problem(after, self.first_retained, self.last)

    def reader(self, after: int) -> "RedisLogReader":
        """Itself: a task found through another replica is read through the reader it was found with."""
        return self

    async def follow(self, after: int) -> AsyncIterator[LoggedEvent]:
        """Every event after `after`, live until the log's end entry."""
        self.cursor = after
        async for held in self._held(after):
            for sequence, event in held:
                self.cursor = sequence
                if event is not None:  # a placeholder holds a number another reader's error took
                    yield event

    async def batches(self, after: int) -> AsyncIterator[list[LoggedEvent]]:
        """As `follow`, in lists of the events that came together (a reader over HTTP writes each at once)."""
        self.cursor = after
        async for held in self._held(after):
            self.cursor = held[-1][0]
            batch = [event for _, event in held if event is not None]
            if batch:
                yield batch

    async def _held(self, after: int) -> AsyncIterator[list[Numbered]]:
        """The numbers after `after` as they come, placeholders included: from this replica's tail of the task,
        and from Redis directly while the reader is older than what the tail holds. A terminal error comes
        numbered with the position it ends at (its own number is in its JSON)."""
        self._position = after
        tail = self.logs.attach(self.job_id, after)
        try:
            while True:
                changed = tail.changed  # taken before looking, so news in between is not missed
                following = self._position + 1
                if tail.error is not None:
                    raise tail.error
                if following < tail.first:  # dropped while this reader lagged
                    yield [await self._overtaken()]
                    return
                if tail.start <= following <= tail.position:
                    held = tail.after(self._position)
                    self._position = held[-1][0]
                    yield held
                elif following <= tail.position:  # older than the tail's buffer
                    async for held in self._catch_up(tail.start - 1):
                        yield held
                    if self._stopped:
                        return
                elif tail.ended:
                    return
                elif tail.gone:
                    yield [(self._position, _logged(_gone(self._position)))]  # deleted, or lost by Redis
                    return
                else:
                    await changed.wait()
        finally:
            self.logs.detach(tail)

    async def _catch_up(self, until: int) -> AsyncIterator[list[Numbered]]:
        """The numbers after the position up to `until` at least, read from Redis without blocking. Sets
        `_stopped` when the stream ends here: the log's end, a gone record, or this reader's overtaken error."""
        retry = RETRY_S[0]
        while self._position < until:
            try:
                entries, first = await self.logs.read(self.job_id, self._position)
            except StoreUnavailableError:
                await asyncio.sleep(retry)
                retry = min(RETRY_S[1], retry * 2)
                continue
            retry = RETRY_S[0]
            self._stopped = True
            if first is None and not entries:
                yield [(self._position, _logged(_gone(self._position)))]
                return
            numbered, ended = decode(entries)
            held = [(sequence, event) for sequence, event in numbered if sequence > self._position]
            following = self._position + 1
            if following < (first or 0) or not (held or ended) or (held and held[0][0] > following):
                yield [await self._overtaken()]  # nothing after the position: the entries it was in are gone
                return
            if held:
                self._position = held[-1][0]
                yield held
            if ended:
                return
            self._stopped = False

    async def _overtaken(self) -> Numbered:
        """This reader's terminal error: what it would read next was dropped while it lagged."""
        return self._position, _logged(overtaken_error(self._position, await self._reserve(self._position)))

    async def farewell_sequence(self) -> int:
        """A number for the error that ends this reader's stream when its replica shuts down."""
        return await self._reserve(self.cursor)

    async def _reserve(self, cursor: int) -> int:
        """A number for this reader's error; Redis lost or unreachable: the one after its cursor (the reader
        ends there; one that reconnects is told by the cursor check what is left)."""
        try:
            reserved = await self.logs.reserve(self.job_id)
        except StoreUnavailableError:
            return cursor + 1
        return reserved if reserved >= 0 else cursor + 1


class JobLogs:
    """What every log of one replica shares: the link, the tail connection pool, the scripts, the bounds."""

    def __init__(self, link: RedisLink, tail_client: Any, scripts: dict, *, max_count: int, max_bytes: int,
                 block_ms: int = BLOCK_MS) -> None:
        self.link = link
        self.tail_client = tail_client
        self.scripts = scripts
        self.max_count = max_count
        self.max_bytes = max_bytes
        self.block_ms = block_ms
        self.tails: dict[str, TaskTail] = {}
        """This replica's tails, one per task it has readers of."""

    def key(self, kind: str, job_id: str) -> str:
        return f"{self.link.prefix}{kind}{job_id}"

    def attach(self, job_id: str, cursor: int) -> TaskTail:
        """The task's tail on this replica, started at `cursor` unless it runs already; `detach` when done."""
        tail = self.tails.get(job_id)
        if tail is None:
            tail = self.tails[job_id] = TaskTail(self, job_id, cursor)
        tail.attach()
        return tail

    def detach(self, tail: TaskTail) -> None:
        tail.detach()

    def forget(self, tail: TaskTail) -> None:
        if self.tails.get(tail.job_id) is tail:
            del self.tails[tail.job_id]

    def tail_figures(self) -> dict:
        """How many tails this replica runs and the bytes of events they hold (each bounded by the log's bounds,
        their count by the reader bound)."""
        return {"tails": len(self.tails), "tail_bytes": sum(tail.bytes for tail in self.tails.values())}

    async def tail(self, job_id: str, cursor: int) -> tuple[list, int | None]:
        """The entries after `cursor`, waiting up to `block_ms` for one (none when none came), and the record's
        `first` read after them in the same round trip (None: no record)."""
        return await self._read(self.tail_client, job_id, cursor, self.block_ms)

    async def read(self, job_id: str, cursor: int) -> tuple[list, int | None]:
        """As `tail`, without waiting (on the store's pool): a reader catching up with its task's tail."""
        return await self._read(self.link.client, job_id, cursor, None)

    async def _read(self, client: Any, job_id: str, cursor: int, block_ms: int | None) -> tuple[list, int | None]:
        async def read() -> list:
            pipe = client.pipeline(transaction=False)
            pipe.xread({self.key("js:", job_id): stream_id(cursor)}, count=READ_COUNT, block=block_ms)
            pipe.hget(self.key("j:", job_id), "first")
            return await pipe.execute()

        timeout = self.link.command_timeout + (block_ms or 0) / 1000
        got, first = await self.link.command(read, timeout=timeout)
        return (got[0][1] if got else []), (None if first is None else int(first))

    async def everything(self, job_id: str) -> list[LoggedEvent]:
        """Every event of the log, oldest first, placeholders left out, with the model's text kept with it: what a
        replica that takes the task over continues (the log is bounded by `EVENT_COUNT` and `EVENT_BYTES`, so this
        is too)."""
        entries = await self.link.command(lambda: self.link.client.xrange(self.key("js:", job_id)))
        return [event for _, event in decode(entries, with_raw=True)[0] if event is not None]

    async def exists(self, job_id: str) -> bool:
        return bool(await self.link.command(lambda: self.link.client.exists(self.key("j:", job_id))))

    async def reserve(self, job_id: str) -> int:
        return int(await self.scripts["RESERVE"]([self.link.prefix, job_id, self.max_count, self.max_bytes]))


def _batch_count(pending: deque[tuple[str, bytes, bytes]]) -> int:
    """How many pending events the next flush carries: all of them up to `BATCH_EVENTS`; when it must stop short,
    before an event that carries the model's text, so the events one piece of that text made are never split
    between two flushes (a task taken over between them would have the text without all its events)."""
    if len(pending) <= BATCH_EVENTS:
        return len(pending)
    for count in range(BATCH_EVENTS, 0, -1):
        if pending[count][2]:
            return count
    return BATCH_EVENTS


def _raw_of(batch: list[tuple[str, bytes, bytes]]) -> bytes:
    """The model's text the batch's events were made from, as the log entry keeps it (`redis_lua.append`):
    a JSON object from an event's offset in the batch to its pieces; b"" when none has any."""
    parts = [b'"%d":%s' % (offset, raw) for offset, (_, _, raw) in enumerate(batch) if raw]
    return b"{" + b",".join(parts) + b"}" if parts else b""


class RedisJobLog:
    """The owner's side of one task's log: `append`, `mark` (a state), `close` (the end), and `follow` for
    its first reader. `on_cancel` runs when Redis says a cancel was asked elsewhere; `on_fenced` when the
    record refused a write (the task was failed by another replica, or is gone)."""

    def __init__(self, logs: JobLogs, job_id: str, snapshot: Callable[[], dict], *, lease_s: float,
                 clock: Callable[[], float], on_cancel: Callable[[], None], on_fenced: Callable[[], None],
                 raw: Callable[[int], list | None] = lambda sequence: None,
                 on_broken: Callable[[str], None] = lambda reason: None) -> None:
        """`raw`: the model's text read before the event of a sequence number was made, if any
        (`ResponseAssembler.take_raw`): written with that event, for a replica that takes the task over.
        `on_broken`: a write failed in Redis in a way no retry mends (a script error: a bug, or a key changed
        under it), with what Redis said; nothing more is written."""
        self.logs = logs
        self._raw = raw
        self.job_id = job_id
        self.fence = 0
        """Set when the record is created (`RedisJobManager.admit`)."""
        self.lease_s = lease_s
        self.clock = clock
        self._snapshot = snapshot
        self._on_cancel = on_cancel
        self._on_fenced = on_fenced
        self._on_broken = on_broken
        self._pending: deque[tuple[str, bytes, bytes]] = deque()
        """(type, JSON, the model's text read before it as JSON or b"")"""
        self.bytes = 0
        """Bytes of events waiting for a flush: this replica's memory for the task's log."""
        self._state: str | None = None
        self._snapshot_due = False
        self._closing = False
        self._handing = False
        self.closed = False
        """The log is closed in Redis, or (`hand_over`) this writer let go of it."""
        self.fenced = False
        self._flusher: asyncio.Task | None = None
        self._room = asyncio.Event()
        self._room.set()
        self._drained = asyncio.Event()
        self._flushed = asyncio.Event()
        """Set and replaced after every flush attempt: what `confirmed` waits on."""
        self.flushes = 0
        self._written = 0
        """Events this writer has written under its fence: sent with each write, so one retried after it went
        through appends nothing twice (`APPEND` is idempotent by it)."""
        self._unconfirmed = 0
        """The events of a write whose answer did not come (a timeout): the retry sends exactly those."""

    # -- what the job manager writes ----------------------------------------------------
    def encode(self, event: dict) -> tuple[str, bytes]:
        """The event as the log keeps it; one larger than the log's byte bound is refused."""
        kind, body = unnumbered(event)
        size = len(body) + SEQUENCE_BYTES
        if size > self.logs.max_bytes:
            raise EventTooLarge(size, self.logs.max_bytes)
        return kind, body

    def append(self, event: dict) -> None:
        if self.fenced:
            return
        kind, body = self.encode(event)
        raw = self._raw(event["sequence_number"])
        raw_json = orjson.dumps(raw) if raw else b""
        self._pending.append((kind, body, raw_json))
        self.bytes += len(body) + len(raw_json)
        if kind in SNAPSHOT_EVENTS:
            self._snapshot_due = True
        if len(self._pending) > self.logs.max_count or self.bytes > self.logs.max_bytes:
            self._room.clear()
        self._kick()

    def mark(self, state: str) -> None:
        """The task's new state, written with the next flush (with the snapshot)."""
        self._state = state
        self._snapshot_due = True
        self._kick()

    def close(self) -> None:
        """No more events: the next flush writes the terminal state and ends the log."""
        self._closing = True
        self._kick()

    def hand_over(self) -> Awaitable[None]:
        """No more events from this replica, and no end either: the next flush writes what is buffered and lets go
        of the task (`HAND_OVER`: its fence moves on and its lease lapses now, for another replica to take it
        over at once). Awaits that flush (or the writer being refused)."""
        self._handing = True
        self._kick()
        return self.drained()

    def room(self) -> Awaitable[None] | None:
        """None while the buffer is within the log's bounds; else what the generation awaits."""
        return None if self._room.is_set() else self._room.wait()

    async def confirmed(self) -> bool:
        """Until the state last marked is in Redis: True, or the record refused it: False."""
        while self._state is not None and not self.fenced:
            await self._flushed.wait()
        return not self.fenced

    async def drained(self) -> None:
        """Until the log is closed in Redis (or the writer was fenced)."""
        await self._drained.wait()

    def reader(self, after: int) -> RedisLogReader:
        """A reader of this task's log after `after`: from Redis, like every other (its creator's stream too)."""
        return RedisLogReader(self.logs, self.job_id, 0, after + 1)

    def follow(self, after: int) -> AsyncIterator[LoggedEvent]:
        """The task's first reader."""
        return self.reader(after).follow(after)

    def batches(self, after: int) -> AsyncIterator[list[LoggedEvent]]:
        """`follow` in lists of the events that came together."""
        return self.reader(after).batches(after)

    def refused(self) -> None:
        """The record refused this writer (its fence moved on, or it is gone): nothing more is written, the
        generation waits for nothing, and the manager is told once."""
        if self._stop_writing():
            self._on_fenced()

    def _broken(self, error: Exception) -> None:
        """A write Redis failed for good (not a refusal or a lost connection, which are retried): the writer stops
        as when refused, and the manager is told what Redis said."""
        if self._stop_writing():
            self._on_broken(f"{type(error).__name__}: {str(error)[:200]}")

    def _stop_writing(self) -> bool:
        """Nothing more is written, and nothing waits for a write; False if it had stopped already."""
        if self.fenced:
            return False
        self.fenced = True
        self._pending.clear()
        self.bytes = 0
        self._room.set()
        self._drained.set()
        return True

    def stop(self) -> None:
        """Shutdown gave up waiting: stop retrying."""
        if self._flusher is not None:
            self._flusher.cancel()
        self._drained.set()

    # -- flushing -------------------------------------------------------------------------
    def _kick(self) -> None:
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.ensure_future(self._flush_all())

    def _has_work(self) -> bool:
        return bool(self._pending) or self._state is not None or self._snapshot_due or \
            ((self._closing or self._handing) and not self.closed)

    async def _flush_all(self) -> None:
        retry = RETRY_S[0]
        while not self.fenced and self._has_work():
            try:
                await self._flush_once()
            except StoreUnavailableError:
                await asyncio.sleep(retry)
                retry = min(RETRY_S[1], retry * 2)
                continue
            except Exception as error:  # a script error: retrying would fail alike, and the loop must not die silent
                self._broken(error)
                break
            finally:
                self._flushed.set()
                self._flushed = asyncio.Event()
            retry = RETRY_S[0]
            if not self.closed:
                await asyncio.sleep(FLUSH_INTERVAL_S)  # what arrives meanwhile goes in the next flush
        if self.closed or self.fenced:
            self._drained.set()

    async def _flush_once(self) -> None:
        # a write that failed is sent again with the same events (more may have come meanwhile): one that went
        # through after all then matches what Redis counted (`_written`) and appends nothing twice
        count = self._unconfirmed or _batch_count(self._pending)
        if self._handing and count == len(self._pending):
            await self._let_go(count)
            return
        batch = [self._pending[i] for i in range(count)]
        state, due = self._state, self._snapshot_due
        close = self._closing and count == len(self._pending)
        self._snapshot_due = False
        snapshot = orjson.dumps(self._snapshot()) if due or close else b""
        now = self.clock()
        args: list = [self.logs.link.prefix, self.job_id, self.fence, now, now + self.lease_s, self.logs.max_count,
                      self.logs.max_bytes, state or "", snapshot, 1 if close else 0, _raw_of(batch), self._written]
        for kind, body, _ in batch:
            args += (kind, body)
        self._unconfirmed = count
        try:
            answer = await self.logs.scripts["APPEND_END" if close else "APPEND"](args)
        except BaseException:
            self._snapshot_due = self._snapshot_due or due
            raise
        self._unconfirmed = 0
        self.flushes += 1
        if answer[0] != b"ok":
            self.refused()
            return
        self._written += count
        for _ in range(count):
            _, body, raw = self._pending.popleft()
            self.bytes -= len(body) + len(raw)
        if self._state == state:
            self._state = None
        if close:
            self.closed = True
        if len(self._pending) <= self.logs.max_count and self.bytes <= self.logs.max_bytes:
            self._room.set()
        if int(answer[1]) == 1 and not close:
            self._on_cancel()


    async def _let_go(self, count: int) -> None:
        """The last flush of a task handed over: its remaining events and snapshot, then the lease let go."""
        batch = list(self._pending)[:count]
        args: list = [self.logs.link.prefix, self.job_id, self.fence, self.clock(), self.logs.max_count,
                      self.logs.max_bytes, orjson.dumps(self._snapshot()), self._state or "", _raw_of(batch)]
        for kind, body, _ in batch:
            args += (kind, body)
        answer = await self.logs.scripts["HAND_OVER"](args)
        self.flushes += 1
        if answer != b"ok":
            self.refused()
            return
        self._pending.clear()
        self.bytes = 0
        self._state = None
        self._snapshot_due = False
        self.closed = True
        self._room.set()


def _logged(event: dict) -> LoggedEvent:
    return LoggedEvent(event["type"], orjson.dumps(event))


def _gone(cursor: int) -> dict:
    return {
        "type": "error", "sequence_number": cursor + 1, "code": "response_gone", "param": None,
        "message": "This background response's record is gone (deleted, or lost by the store); retrieve it to see "
                   "whether a stored copy remains.",
    }
