"""Server-sent events read from bytes, with only the line ends the SSE format has.

An upstream engine's stream is split into lines at `\\r\\n`, `\\n` or `\\r` and nowhere
else (the WHATWG event-stream grammar). Text decoders' line splitters (`str.splitlines`,
httpx's `aiter_lines`) also break at U+2028, U+2029, U+0085, and the ASCII separators
0x0B, 0x0C, 0x1C-0x1E; engines write the first three raw inside their JSON strings
(JSON needs no escape for them), so a model that generates one of them would cut an
event in two and fail the request. Splitting bytes, before decoding, cannot do that:
every byte of a multi-byte character is 0x80 or above, so no character but CR and LF
contains a line-end byte.

`SseReader` is pure (bytes in, events out) and bounded: a line longer than `max_line`
bytes raises, so a runaway upstream cannot fill memory one endless line at a time.

    >>> reader = SseReader(max_line=1024)
    >>> [e.data for e in reader.feed(b'data: {"text": "a\\xe2\\x80\\xa8b"}\\n\\ndata: [DO')]
    ['{"text": "a\\u2028b"}']
    >>> [e.data for e in reader.feed(b'NE]\\n\\n')]
    ['[DONE]']
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import LineTooLong


@dataclass(frozen=True)
class SseEvent:
    """One dispatched event: its `event:` name ("message" when none was given) and its `data:` lines joined
    with newlines. `error` holds the payload of llama-server's non-standard `error:` line, if it sent one."""

    data: str
    event: str = "message"
    error: str | None = None


class SseReader:
    def __init__(self, max_line: int) -> None:
        self._max_line = max_line
        self._pending = bytearray()
        self._after_cr = False
        self._data: list[str] = []
        self._event = ""
        self._error: str | None = None

    def feed(self, chunk: bytes) -> list[SseEvent]:
        """The events completed by `chunk`; the rest is kept for the next one."""
        events: list[SseEvent] = []
        for line in self._lines(chunk):
            event = self._field(line)
            if event is not None:
                events.append(event)
        return events

    def close(self) -> list[SseEvent]:
        """At the end of the stream: an event whose closing blank line never came is still delivered (an
        engine that closes the connection right after its last `data:` line has said all it meant to)."""
        events = self.feed(b"\n") if self._pending or self._after_cr else []
        if self._data or self._error is not None:
            events.append(self._dispatch())
        return events

    def _lines(self, chunk: bytes) -> list[bytes]:
        lines = []
        start = 0
        if self._after_cr and chunk[:1] == b"\n":
            start = 1  # the LF of a CRLF split across two chunks
        self._after_cr = False
        size = len(chunk)
        while start < size:
            cr, lf = chunk.find(b"\r", start), chunk.find(b"\n", start)
            end = min(i for i in (cr, lf, size) if i >= 0)
            self._pending += chunk[start:end]
            if len(self._pending) > self._max_line:
                raise LineTooLong(f"a stream line is longer than {self._max_line} bytes")
            if end == size:
                break
            lines.append(bytes(self._pending))
            self._pending.clear()
            if end == cr and end + 1 < size and chunk[end + 1:end + 2] == b"\n":
                start = end + 2
            else:
                self._after_cr = end == cr and end + 1 == size
                start = end + 1
        return lines

    def _field(self, raw: bytes) -> SseEvent | None:
        """One line: a blank one dispatches the event gathered so far; a comment is skipped."""
        if not raw:
            if self._data or self._error is not None:
                return self._dispatch()
            self._event = ""  # an event with no data is not dispatched, and its name does not carry over
            return None
        line = raw.decode("utf-8", errors="replace")
        if line.startswith(":"):
            return None
        name, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event = value
        elif name == "error":  # llama-server's own form for some failures
            self._error = value
        return None

    def _dispatch(self) -> SseEvent:
        event = SseEvent("\n".join(self._data), self._event or "message", self._error)
        self._data, self._event, self._error = [], "", None
        return event
