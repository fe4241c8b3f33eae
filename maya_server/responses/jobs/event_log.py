"""A background response's retained events, and readers that replay then follow them.

Each event is kept as its type and its JSON, serialised once at append
(`LoggedEvent`); a reader that streams them frames them as SSE where it sends
them (`jobs/over_http.py`), so this log knows nothing of SSE or HTTP, and its
memory is the bytes it counts, not Python objects several times their size.
The oldest are dropped first once the log holds more than `max_count` events
or `max_bytes` bytes of JSON, so a task's memory is bounded however long it
runs; that is what a replay sends, less the few dozen bytes of SSE framing,
so `max_bytes` and the `event_bytes` figure keep meaning the bytes of the
stream a reader replays. Readers hold a cursor (the last
sequence number they delivered); a reader whose next event has been dropped
is told so with a terminal `error` event: no event is ever silently skipped.
That error takes a sequence number of its own, reserved from the task's
numbering (`reserve_sequence`) and held in the log by an empty placeholder
that other readers skip, so no two events ever share a number.
A single event larger than `max_bytes` is refused with `EventTooLarge`: the
task fails explicitly rather than publish a hole.

Everything here runs on the event loop; waiting readers are woken by
replacing one `asyncio.Event` per append.
"""

from __future__ import annotations

import asyncio
from collections import deque
from dataclasses import dataclass
from itertools import islice
from typing import AsyncIterator, Callable

import orjson

from ...errors import EventTooLarge


@dataclass(frozen=True, slots=True)
class LoggedEvent:
    """One retained event: its `type` (the SSE event name) and its JSON, encoded once for every reader."""

    type: str
    json: bytes
    raw: list | None = None
    """The model's text read before the event was made (pieces: text, whether a tag), as a Redis log keeps it for
    a replica that takes the task over (`event_log_redis.everything`); None for any reader."""


class EventLog:
    def __init__(self, max_count: int, max_bytes: int, reserve_sequence: Callable[[], int]) -> None:
        """`reserve_sequence` takes the task's next sequence number (from its assembler, which numbers
        every event) for an event only one reader sees; the log never numbers an event itself."""
        self.max_count = max_count
        self.max_bytes = max_bytes
        self._reserve_sequence = reserve_sequence
        self._events: deque[tuple[int, LoggedEvent | None]] = deque()
        """(sequence number, the event, or None for a reserved number)"""
        self.bytes = 0
        self.last = -1
        """The last sequence number appended (-1: none yet)."""
        self.closed = False
        self._appended = asyncio.Event()

    @property
    def first_retained(self) -> int:
        """The oldest sequence number still held (`last + 1` when none is)."""
        return self._events[0][0] if self._events else self.last + 1

    def append(self, event: dict) -> None:
        logged = _logged(event)
        if len(logged.json) > self.max_bytes:
            raise EventTooLarge(len(logged.json), self.max_bytes)
        self._add(event["sequence_number"], logged)

    def _add(self, sequence: int, event: LoggedEvent | None) -> None:
        self._events.append((sequence, event))
        self.bytes += _size(event)
        self.last = sequence
        while len(self._events) > self.max_count or self.bytes > self.max_bytes:
            self.bytes -= _size(self._events.popleft()[1])
        self._wake()

    def _reserve(self) -> int:
        """A sequence number no retained or future event has, held by an empty placeholder."""
        sequence = self._reserve_sequence()
        self._add(sequence, None)
        return sequence

    def close(self) -> None:
        """No more events will come: readers stop once they have delivered the last one."""
        self.closed = True
        self._wake()

    def _wake(self) -> None:
        self._appended.set()
        self._appended = asyncio.Event()

    def check_cursor(self, after: int) -> str | None:
        return cursor_problem(after, self.first_retained, self.last)

    async def follow(self, after: int) -> AsyncIterator[LoggedEvent]:
        """Every event after sequence number `after`, live until the log closes.

        Sequence numbers are contiguous, so the next event's place in the deque is arithmetic.
        """
        cursor = after
        while True:
            waiter = self._appended  # taken before looking, so an append in between is not missed
            first = self.first_retained
            if cursor + 1 < first:
                yield _logged(overtaken_error(cursor, self._reserve()))
                return
            index = cursor + 1 - first
            if index < len(self._events):
                cursor, event = self._events[index]
                if event is not None:  # a placeholder holds a number another reader's error event took
                    yield event
            elif self.closed:
                return
            else:
                await waiter.wait()

    async def batches(self, after: int) -> AsyncIterator[list[LoggedEvent]]:
        """As `follow`, in lists of the events that are there together: a reader over HTTP writes each list at
        once (`over_http.py`). Events handed out in a list are delivered even if dropped while it is written."""
        cursor = after
        while True:
            waiter = self._appended  # taken before looking, so an append in between is not missed
            first = self.first_retained
            if cursor + 1 < first:
                yield [_logged(overtaken_error(cursor, self._reserve()))]
                return
            index = cursor + 1 - first
            if index < len(self._events):
                held = list(islice(self._events, index, None))
                cursor = held[-1][0]
                batch = [event for _, event in held if event is not None]  # a placeholder: another reader's error
                if batch:
                    yield batch
            elif self.closed:
                return
            else:
                await waiter.wait()


def cursor_problem(after: int, first_retained: int, last: int) -> str | None:
    """Why a reader cannot start after `after`: "future", "expired", or None when it can (either backend's log)."""
    if after > last:
        return "future"
    if after + 1 < first_retained:
        return "expired"
    return None


def _logged(event: dict) -> LoggedEvent:
    return LoggedEvent(event["type"], orjson.dumps(event))


def _size(event: LoggedEvent | None) -> int:
    return len(event.json) if event is not None else 0


def overtaken_error(cursor: int, sequence: int) -> dict:
    """The terminal `error` event of a reader whose next event was dropped (also on Redis: `jobs/event_log_redis.py`)."""
    return {
        "type": "error", "sequence_number": sequence, "code": "stream_cursor_expired", "param": "starting_after",
        "message": f"This reader fell behind: events after sequence number {cursor} are no longer retained. "
        "Retrieve the response without streaming to get its current state.",
    }
