"""One task's tail on one replica: a single `XREAD` loop whose entries are decoded once and shared by every reader
of that task on this replica (`RedisLogReader.follow`, `event_log_redis.py`).

Without it each reader ran its own blocking read and parsed every entry itself: a replica with three readers of a
task paid three round trips and three decodes per flush. The tail reads from where it stands, decodes each entry
(one flush's events, `redis_lua.py`) into `LoggedEvent`s, keeps the latest of them, and wakes its readers
together; a reader then takes what comes after its own cursor from that buffer. The buffer holds at most the
log's own bounds (`EVENT_COUNT`, `EVENT_BYTES`), what the memory backend holds for a task anyway, so a reader
that reconnects to this replica after a short pause is served without asking Redis at all. A reader whose cursor
is older than the buffer reads the entries between on its own, without blocking, until it reaches it.

With every read the tail asks for the record's `first` (the oldest number the log still holds) in the same round
trip: a reader whose next number is below it fell behind, as in memory, even while Redis still holds the entry it
was in (`redis_lua.py`: trimming drops numbers, entries go once all theirs are dropped).

A tail exists while it has readers: it starts with the first, and its loop stops after the read in flight once
the last has left (within `BLOCK_MS`), so the replica holds at most one tail connection per task it has readers
of, and never more than its reader bound (`STREAM_READERS`, the size of the tail pool). While Redis does not
answer the loop waits and retries; its readers wait with it (their streams keep sending keep-alive comments).
"""

from __future__ import annotations

import asyncio
from collections import deque
from itertools import islice
from typing import Protocol

import orjson

from ...errors import StoreUnavailableError
from .event_log import LoggedEvent

RETRY_S = (0.05, 1.0)
"""The first and the longest wait between attempts while Redis does not answer."""

Numbered = tuple[int, "LoggedEvent | None"]
"""A sequence number and its event; None for a number reserved for another reader's error (skipped)."""


def sequence_of(entry_id: bytes) -> int:
    """The last number an entry holds; for the end entry, the last number before it."""
    return int(entry_id.split(b"-")[0]) - 1


def decode(entries: list, with_raw: bool = False) -> tuple[list[Numbered], bool]:
    """(the numbers the entries hold, oldest first; whether the log's end entry came). `with_raw`: each event with
    the model's text the log kept with it (`LoggedEvent.raw`), for a replica taking the task over; readers skip
    it."""
    numbered: list[Numbered] = []
    for entry_id, fields in entries:
        if b"e" in fields:
            return numbered, True
        last = sequence_of(entry_id)
        if b"p" in fields:
            numbered.append((last, None))
            continue
        first = int(fields[b"a"]) if b"a" in fields else last  # an entry of one event, as written before packing
        types, jsons = fields[b"t"].split(b"\n"), fields[b"j"].split(b"\n")
        if len(types) != last - first + 1 or len(jsons) != len(types):
            raise ValueError(f"a packed log entry {entry_id!r} does not hold the numbers {first}..{last}")
        raw = orjson.loads(fields[b"r"]) if with_raw and b"r" in fields else {}
        for offset, (kind, json) in enumerate(zip(types, jsons)):
            numbered.append((first + offset, LoggedEvent(kind.decode(), json, raw.get(str(offset)))))
    return numbered, False


class TailSource(Protocol):
    """What a tail needs of its replica's logs (`JobLogs`): the log's bounds, the blocking read, and to be let go."""

    max_count: int
    max_bytes: int

    async def tail(self, job_id: str, cursor: int) -> tuple[list, int | None]: ...

    def forget(self, tail: "TaskTail") -> None: ...


class TaskTail:
    """The shared read of one task's log on this replica, and the latest events it decoded."""

    def __init__(self, logs: TailSource, job_id: str, position: int) -> None:
        self.logs = logs
        self.job_id = job_id
        self.events: deque[Numbered] = deque()
        """Contiguous numbers, the newest ending at `position`."""
        self.bytes = 0
        self.position = position
        """The last number read from Redis (the tail reads after it)."""
        self.first = 0
        """The oldest number the log held at the last read (the record's `first`)."""
        self.ended = False
        self.gone = False
        """The record is gone (deleted, or lost by Redis): nothing more will come."""
        self.error: Exception | None = None
        """What stopped the loop other than Redis not answering (its readers raise it)."""
        self.readers = 0
        self.changed = asyncio.Event()
        """Set and replaced whenever the tail learns something: what its readers wait on."""
        self._loop: asyncio.Task | None = None

    @property
    def start(self) -> int:
        """The oldest number the buffer holds (`position + 1` when it holds none)."""
        return self.events[0][0] if self.events else self.position + 1

    def after(self, cursor: int) -> list[Numbered]:
        """What the buffer holds after `cursor` (which must be at or after `start - 1`)."""
        return list(islice(self.events, cursor + 1 - self.start, None))

    def attach(self) -> None:
        self.readers += 1
        if self._loop is None or self._loop.done():
            if not (self.ended or self.gone or self.error):
                self._loop = asyncio.ensure_future(self._run())

    def detach(self) -> None:
        self.readers -= 1
        if self.readers == 0 and (self._loop is None or self._loop.done()):
            self.logs.forget(self)

    def take(self, entries: list, first: int | None) -> None:
        """What one read returned: its entries, and the record's `first` (None: the record is gone)."""
        if first is None and not entries:
            self.gone = True
        if first is not None:
            self.first = max(self.first, first)
        numbered, ended = decode(entries)
        for sequence, event in numbered:
            if sequence <= self.position:
                continue  # the start of an entry the tail began inside
            if sequence > self.position + 1:  # numbers were dropped before this tail read them
                self.events.clear()
                self.bytes = 0
            self.events.append((sequence, event))
            self.bytes += len(event.json) if event is not None else 0
            self.position = sequence
        self.ended = self.ended or ended
        while self.events and (len(self.events) > self.logs.max_count or self.bytes > self.logs.max_bytes):
            dropped = self.events.popleft()[1]
            self.bytes -= len(dropped.json) if dropped is not None else 0
        self._wake()

    def _wake(self) -> None:
        self.changed.set()
        self.changed = asyncio.Event()

    async def _run(self) -> None:
        retry = RETRY_S[0]
        try:
            while self.readers and not (self.ended or self.gone):
                try:
                    entries, first = await self.logs.tail(self.job_id, self.position)
                except StoreUnavailableError:
                    await asyncio.sleep(retry)
                    retry = min(RETRY_S[1], retry * 2)
                    continue
                retry = RETRY_S[0]
                self.take(entries, first)
        except Exception as error:  # a reply this code cannot read: every reader of the task fails with it
            self.error = error
            self._wake()
        finally:
            if self.readers == 0:
                self.logs.forget(self)
