"""One streamed completion over HTTP/1.1, read lean: the per-token hot path of every upstream engine.

Why not httpx here (it still makes every other upstream call): a streamed
completion is one small event per generated token, and each event went through
httpx, httpcore, h11 and anyio before Maya saw it, about 250 µs of Python per
token (profiled on the embedded engine, 4 streams); at GPU rates that alone
caps a process near 2,500 tokens/s. This client does only what the stream
needs:

- one connection per request (TCP, TLS or a Unix socket), the request written
  once, the status line and headers read once;
- the body read as it arrives (chunked, `Content-Length` or until close), each
  read handed on whole: every complete event of one read comes out together
  (`batches`), so tokens that arrived together are handled together;
- SSE lines split only where the protocol says lines end (`\\r\\n`, `\\n`,
  `\\r`): U+2028, U+2029 and U+0085 inside an event's JSON are text, whatever
  a text-mode line reader thinks;
- `data:` and llama-server's `error:` fields kept as bytes (orjson parses them
  as they are); comments, `event:` and `id:` fields skipped.

Closing the stream aborts the connection at once, which makes the upstream drop
the sequence. Every failure is an `UpstreamError` (`UpstreamUnavailable` for
connect failures and timeouts), raised here and nowhere else on this path.
"""

from __future__ import annotations

import asyncio
import ssl
from dataclasses import dataclass
from typing import AsyncIterator
from urllib.parse import urlsplit

from ...errors import UpstreamError, UpstreamUnavailable
from ..defaults import CONNECT_TIMEOUT_S, READ_TIMEOUT_S

HEAD_LIMIT = 65536
"""The status line and headers together may not exceed this."""
BUFFER_LIMIT = 1 << 20
"""Bytes that may wait unread (the client is slow, or events gather); past this the socket is not read."""
EVENT_LIMIT = 4 * 1024 * 1024
"""One streamed event may not exceed this: a runaway upstream cannot fill our memory line by line."""
DATA, ERROR = b"data", b"error"


@dataclass(frozen=True)
class Endpoint:
    """Where requests go: an http(s) base URL, or a Unix socket that answers for it."""

    url: str
    uds: str | None = None
    connect_timeout: float = CONNECT_TIMEOUT_S
    read_timeout: float = READ_TIMEOUT_S

    async def post(self, path: str, body: bytes, headers: dict[str, str], *,
                   live: "set[_Connection] | None" = None) -> "EventStream":
        """POST `body` (JSON) to `path`; the answer's status and headers are read, its body is not. `live`, when
        given, holds the connection while it is open (`Connections.fail_silent` can then end its wait)."""
        parts = urlsplit(self.url)
        host = parts.hostname or "localhost"
        port = parts.port or (443 if parts.scheme == "https" else 80)
        loop = asyncio.get_running_loop()
        connection = _Connection(loop, self.read_timeout, live)
        try:
            async with asyncio.timeout(self.connect_timeout):
                if self.uds is not None:
                    await loop.create_unix_connection(lambda: connection, self.uds)
                else:
                    tls = ssl.create_default_context() if parts.scheme == "https" else None
                    await loop.create_connection(lambda: connection, host, port, ssl=tls)
        except TimeoutError:
            connection.forget()
            raise UpstreamUnavailable(f"cannot connect to the upstream engine within {self.connect_timeout}s") from None
        except (OSError, ssl.SSLError):
            connection.forget()
            raise UpstreamUnavailable("cannot connect to the upstream engine") from None
        except BaseException:
            connection.forget()
            raise
        stream = EventStream(connection)
        try:
            target = (parts.path.rstrip("/") + path) if self.uds is None else path
            head = [f"POST {target} HTTP/1.1", f"Host: {parts.netloc or host}", "Accept: text/event-stream",
                    "Content-Type: application/json", f"Content-Length: {len(body)}", "Connection: close",
                    *(f"{name}: {value}" for name, value in headers.items())]
            await connection.send(("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body)
            await stream.read_head()
        except BaseException:
            stream.close()
            raise
        return stream


class EventStream:
    """An answer being read. Example::

        stream = await endpoint.post("/v1/completions", body, headers)
        if stream.status != 200:
            detail = await stream.read_body(65536)
        async for fields in stream.batches():       # [(b"data", b'{"choices": ...}'), ...]
            ...
        stream.close()
    """

    def __init__(self, connection: "_Connection") -> None:
        self.status = 0
        self.headers: dict[str, str] = {}
        self._connection = connection
        self._body: _Body | None = None
        self._lines = SseLines()

    async def read_head(self) -> None:
        head = b""
        while (end := head.find(b"\r\n\r\n")) < 0:
            if len(head) > HEAD_LIMIT:
                raise UpstreamError("the upstream engine sent oversized response headers")
            try:
                raw = await self._connection.receive()
            except OSError:
                raw = b""
            if not raw:
                raise UpstreamError("the upstream engine closed the connection before answering")
            head += raw
        if end > HEAD_LIMIT:
            raise UpstreamError("the upstream engine sent oversized response headers")
        self._connection.unread(head[end + 4:])
        lines = head[:end].decode("latin-1").split("\r\n")
        status = lines[0].split(" ", 2)
        if len(status) < 2 or not status[0].startswith("HTTP/1.") or not status[1].isdigit():
            raise UpstreamError("the upstream engine answered something other than HTTP/1.1")
        self.status = int(status[1])
        for line in lines[1:]:
            name, _, value = line.partition(":")
            if name:
                self.headers[name.strip().lower()] = value.strip()
        self._body = _Body.for_headers(self.headers)

    async def read_body(self, limit: int) -> bytes:
        """Up to `limit` bytes of the body (an error's detail)."""
        body = bytearray()
        while len(body) < limit:
            piece = await self._read()
            if piece is None:
                break
            body += piece
        return bytes(body[:limit])

    async def batches(self) -> AsyncIterator[list[tuple[bytes, bytes]]]:
        """The `data:` / `error:` fields of the event stream, the complete ones of each read together.

        It awaits the connection's future itself, with no coroutine of ours in between: every frame between the
        wait and the client's write is left and entered again for each event, so the chain is kept short."""
        while True:
            piece = self._next_piece()
            if piece is None:
                await self._connection.arrival()
                continue
            if not piece:
                return
            fields = self._lines.feed(piece)
            if fields:
                yield fields

    def gather(self, seconds: float) -> None:
        """Let the next `seconds` of the stream pile up in the socket: reading is paused meanwhile, so what arrives
        is then taken in one read and one wake-up, not one per event (the event loop would otherwise read each at
        once). Nothing is awaited here: the next `batches` step waits for the hold to end and the data together,
        so the task wakes once an event, not once for the pause and again for the data."""
        self._connection.hold_for(seconds)

    def close(self) -> None:
        """Drop the connection now (the upstream then stops generating for it)."""
        self._connection.abort()

    async def _read(self) -> bytes | None:
        """The next piece of the body, de-framed; None at its end."""
        while (piece := self._next_piece()) is None:
            await self._connection.arrival()
        return piece or None

    def _next_piece(self) -> bytes | None:
        """The next piece of the body already received, de-framed; b"" at the body's end; None while nothing
        waits to be read. A body cut short is an `UpstreamError`."""
        assert self._body is not None, "read_head first"
        while not self._body.done:
            try:
                raw = self._connection.take()
            except OSError:
                raise UpstreamError("the upstream engine broke off the generation (connection lost)") from None
            if raw is None:
                return None
            if not raw:
                if self._body.until_close:
                    return b""
                raise UpstreamError("the upstream engine broke off the generation (connection closed)")
            piece = self._body.feed(raw)
            if piece:
                return piece
        return b""


class _Connection(asyncio.Protocol):
    """The socket's side of one answer: what arrives waits here until the stream takes all of it at once.

    Leaner than asyncio's StreamReader for a stream of small events, and it keeps the read timeout without a
    timer per read: `asyncio.timeout` arms and cancels one for every event, a tenth of the relay's cost per
    token. Here a wait only notes when it began; one timer, armed while some wait is open, checks that the
    current wait is younger than `read_timeout` and fails it with `UpstreamUnavailable` otherwise.

    Reading is paused (the upstream then blocks in its own send) while more than `BUFFER_LIMIT` bytes wait
    unread, or while the stream gathers events on purpose (`hold_for`: a timer ends the hold, and only then is
    a waiter woken)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, read_timeout: float,
                 live: "set[_Connection] | None" = None) -> None:
        self._loop = loop
        self._live = live
        if live is not None:
            live.add(self)
        self._read_timeout = read_timeout
        self._transport: asyncio.Transport | None = None
        self._pieces: list[bytes] = []
        self._buffered = 0
        self._ended = False
        self._failure: OSError | None = None
        self._waiter: asyncio.Future | None = None
        self._wait_began = 0.0
        self._timer: asyncio.TimerHandle | None = None
        self._held = False
        self._hold_timer: asyncio.TimerHandle | None = None
        self._reading = True
        self._writable: asyncio.Future | None = None

    # asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self._pieces.append(data)
        self._buffered += len(data)
        if self._buffered > BUFFER_LIMIT:
            self._update_reading()
        if not self._held:  # what arrived in flight as the hold began waits for its end, with the rest
            self._wake()

    def eof_received(self) -> bool:
        self._ended = True
        self._end_hold()
        self._wake()
        return False  # close the transport

    def connection_lost(self, exc: Exception | None) -> None:
        self.forget()
        self._ended = True
        if exc is not None:
            self._failure = exc if isinstance(exc, OSError) else OSError(str(exc))
        self._end_hold()
        self._wake()
        if self._writable is not None and not self._writable.done():
            self._writable.set_result(None)
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def pause_writing(self) -> None:
        self._writable = self._loop.create_future()

    def resume_writing(self) -> None:
        if self._writable is not None and not self._writable.done():
            self._writable.set_result(None)
        self._writable = None

    # the stream's side
    async def send(self, data: bytes) -> None:
        """Write `data` and wait until the socket has taken it (a request with images can be tens of MB)."""
        assert self._transport is not None
        self._transport.write(data)
        if self._writable is not None:
            await self._writable
        if self._failure is not None:
            raise self._failure

    async def receive(self) -> bytes:
        """Everything that arrived since the last call (waiting for something); b"" once the peer has finished.
        A connection that broke is an `OSError`; silence past the read timeout is `UpstreamUnavailable`."""
        while (data := self.take()) is None:
            await self.arrival()
        return data

    def take(self) -> bytes | None:
        """Everything that arrived since the last call; b"" once the peer has finished; None while nothing has, or
        while a hold lasts. A connection that broke is an `OSError`."""
        if self._held:
            return None
        if self._pieces:
            data = self._pieces[0] if len(self._pieces) == 1 else b"".join(self._pieces)
            self._pieces.clear()
            was_over, self._buffered = self._buffered > BUFFER_LIMIT, 0
            if was_over:
                self._update_reading()
            return data
        if not self._ended:
            return None
        if self._failure is not None:
            raise self._failure
        return b""

    def arrival(self) -> asyncio.Future:
        """A future done once something arrives (data, the end, a failure), or failed with `UpstreamUnavailable`
        after `read_timeout` of silence. The caller awaits it directly: no coroutine frame per wait."""
        self._waiter = waiter = self._loop.create_future()
        self._wait_began = self._loop.time()
        if self._timer is None:
            self._timer = self._loop.call_at(self._wait_began + self._read_timeout, self._check_silence)
        return waiter

    def forget(self) -> None:
        """Leave the `live` set (the connection is closed, or never opened)."""
        if self._live is not None:
            self._live.discard(self)
            self._live = None

    def fail_if_silent_since(self, moment: float, failure: Exception) -> bool:
        """End the stream's wait with `failure` if it has been waiting since `moment` (loop time) or earlier, with
        nothing arrived since, or if its request is still being written: the engine was found unresponsive.
        Whether it did."""
        if self._writable is not None and not self._writable.done():
            self._writable.set_exception(failure)  # `send` raises it
            return True
        waiter = self._waiter
        if waiter is None or waiter.done() or self._wait_began > moment or self._held:
            return False
        waiter.set_exception(failure)
        return True

    def unread(self, data: bytes) -> None:
        """Put back what was read past the end of the head."""
        if data:
            self._pieces.insert(0, data)
            self._buffered += len(data)

    def hold_for(self, seconds: float) -> None:
        """Read nothing for `seconds`: the socket is not read and `take` gives nothing until the hold ends."""
        if self._held or self._ended:
            return
        self._held = True
        self._update_reading()
        self._hold_timer = self._loop.call_later(seconds, self._end_hold)

    def abort(self) -> None:
        self._end_hold()
        if self._transport is not None:
            self._transport.abort()

    def _end_hold(self) -> None:
        if not self._held:
            return
        self._held = False
        if self._hold_timer is not None:
            self._hold_timer.cancel()
            self._hold_timer = None
        self._update_reading()
        if self._pieces:  # what came in before the pause took effect
            self._wake()

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    def _update_reading(self) -> None:
        reading = not self._held and self._buffered <= BUFFER_LIMIT
        if reading != self._reading and self._transport is not None and not self._transport.is_closing():
            self._reading = reading
            if reading:
                self._transport.resume_reading()
            else:
                self._transport.pause_reading()

    def _check_silence(self) -> None:
        self._timer = None
        waiter = self._waiter
        if waiter is None or waiter.done():
            return  # no wait open: the next one arms the timer again
        due = self._wait_began + self._read_timeout
        if self._loop.time() >= due:
            waiter.set_exception(UpstreamUnavailable(
                f"the upstream engine sent nothing for {self._read_timeout}s"))
        else:
            self._timer = self._loop.call_at(due, self._check_silence)


class _Body:
    """HTTP/1.1 body framing: chunked, a `Content-Length`, or everything until the connection closes."""

    def __init__(self, *, chunked: bool, length: int | None) -> None:
        self.chunked = chunked
        self.until_close = not chunked and length is None
        self.done = length == 0 and not chunked
        self._remaining = length or 0
        self._pending = b""  # chunked: bytes of a size line or a chunk's closing CRLF not complete yet
        self._in_chunk = 0   # chunked: data bytes still due in the current chunk
        self._after_chunk = False

    @classmethod
    def for_headers(cls, headers: dict[str, str]) -> "_Body":
        if "chunked" in headers.get("transfer-encoding", "").lower():
            return cls(chunked=True, length=None)
        length = headers.get("content-length", "")
        if length.isdigit():
            return cls(chunked=False, length=int(length))
        if length:
            raise UpstreamError("the upstream engine sent a malformed Content-Length")
        return cls(chunked=False, length=None)

    def feed(self, raw: bytes) -> bytes:
        if not self.chunked:
            if not self.until_close:
                raw = raw[:self._remaining]
                self._remaining -= len(raw)
                self.done = self._remaining == 0
            return raw
        return self._dechunk(raw)

    def _dechunk(self, raw: bytes) -> bytes:
        if not self._pending and not self._in_chunk and not self._after_chunk:
            whole = _whole_chunks(raw)  # what a streaming server sends: a chunk per event, all complete
            if whole is not None:
                return whole
        out = []
        data = self._pending + raw if self._pending else raw
        self._pending = b""
        position = 0
        while position < len(data) and not self.done:
            if self._in_chunk:
                take = data[position:position + self._in_chunk]
                out.append(take)
                self._in_chunk -= len(take)
                position += len(take)
                self._after_chunk = self._in_chunk == 0
                continue
            end = data.find(b"\r\n", position)
            if end < 0:
                self._pending = data[position:]
                if len(self._pending) > HEAD_LIMIT:
                    raise UpstreamError("the upstream engine sent a malformed chunked body")
                break
            line = data[position:end]
            position = end + 2
            if self._after_chunk:  # the CRLF closing a chunk's data
                if line:
                    raise UpstreamError("the upstream engine sent a malformed chunked body")
                self._after_chunk = False
                continue
            try:
                size = int(line.split(b";", 1)[0].strip(), 16)
            except ValueError:
                raise UpstreamError("the upstream engine sent a malformed chunked body") from None
            if size == 0:
                self.done = True  # trailers, if any, are not read: the connection is closed after
            self._in_chunk = size
        return b"".join(out)


def _whole_chunks(raw: bytes) -> bytes | None:
    """The data of `raw` when it is only whole non-empty chunks (size line, data, CRLF, each), else None: the
    general path then takes it, with the framing's end and every malformation."""
    if not raw.endswith(b"\r\n"):
        return None
    pieces = []
    position, length = 0, len(raw)
    while position < length:
        end = raw.find(b"\r\n", position, position + 10)
        if end < 0:
            return None
        try:
            size = int(raw[position:end], 16)
        except ValueError:
            return None
        start, position = end + 2, end + 4 + size
        if not size or position > length or raw[position - 2:position] != b"\r\n":
            return None
        pieces.append(raw[start:position - 2])
    return pieces[0] if len(pieces) == 1 else b"".join(pieces)


class SseLines:
    """Server-sent event lines → `(field, value)` pairs for `data` and `error` fields.

    Lines end at `\\r\\n`, `\\n` or `\\r` and nowhere else. A `\\r\\n` cut between two reads reads as a line end
    and an empty line, which is harmless: empty lines only separate events, and every `data:` line is an event
    of its own for the upstreams Maya reads. A line longer than `EVENT_LIMIT` is an `UpstreamError`."""

    def __init__(self) -> None:
        self._partial = b""

    def feed(self, piece: bytes) -> list[tuple[bytes, bytes]]:
        if not self._partial and piece.startswith(b"data:") and piece.endswith(b"\n\n") \
                and piece.count(b"\n") == 2 and b"\r" not in piece:  # one whole event, as most reads bring
            return [(DATA, piece[5:-2].lstrip())]
        text = self._partial + piece if self._partial else piece
        if b"\r" in text:
            text = text.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        lines = text.split(b"\n")
        self._partial = lines.pop()
        if len(self._partial) > EVENT_LIMIT:
            raise UpstreamError("the upstream engine sent an oversized stream event")
        fields = []
        for line in lines:
            if line.startswith(b"data:"):
                fields.append((DATA, line[5:].lstrip()))
            elif line.startswith(b"error:"):  # llama-server's form for some failures
                fields.append((ERROR, line[6:].lstrip()))
        return fields
