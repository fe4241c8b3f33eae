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

from ..errors import UpstreamError, UpstreamUnavailable

READ_SIZE = 65536
HEAD_LIMIT = 65536
"""The status line and headers together may not exceed this."""
EVENT_LIMIT = 4 * 1024 * 1024
"""One streamed event may not exceed this: a runaway upstream cannot fill our memory line by line."""
DATA, ERROR = b"data", b"error"


@dataclass(frozen=True)
class Endpoint:
    """Where requests go: an http(s) base URL, or a Unix socket that answers for it."""

    url: str
    uds: str | None = None
    connect_timeout: float = 5.0
    read_timeout: float = 600.0

    async def post(self, path: str, body: bytes, headers: dict[str, str]) -> "EventStream":
        """POST `body` (JSON) to `path`; the answer's status and headers are read, its body is not."""
        parts = urlsplit(self.url)
        host = parts.hostname or "localhost"
        port = parts.port or (443 if parts.scheme == "https" else 80)
        try:
            async with asyncio.timeout(self.connect_timeout):
                if self.uds is not None:
                    reader, writer = await asyncio.open_unix_connection(self.uds, limit=HEAD_LIMIT)
                else:
                    tls = ssl.create_default_context() if parts.scheme == "https" else None
                    reader, writer = await asyncio.open_connection(host, port, ssl=tls, limit=HEAD_LIMIT)
        except TimeoutError:
            raise UpstreamUnavailable(f"cannot connect to the upstream engine within {self.connect_timeout}s") from None
        except (OSError, ssl.SSLError):
            raise UpstreamUnavailable("cannot connect to the upstream engine") from None
        stream = EventStream(reader, writer, self.read_timeout)
        try:
            target = (parts.path.rstrip("/") + path) if self.uds is None else path
            head = [f"POST {target} HTTP/1.1", f"Host: {parts.netloc or host}", "Accept: text/event-stream",
                    "Content-Type: application/json", f"Content-Length: {len(body)}", "Connection: close",
                    *(f"{name}: {value}" for name, value in headers.items())]
            writer.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body)
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

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, read_timeout: float) -> None:
        self.status = 0
        self.headers: dict[str, str] = {}
        self._reader = reader
        self._writer = writer
        self._read_timeout = read_timeout
        self._body: _Body | None = None
        self._lines = SseLines()

    async def read_head(self) -> None:
        try:
            async with asyncio.timeout(self._read_timeout):
                await self._writer.drain()
                head = await self._reader.readuntil(b"\r\n\r\n")
        except TimeoutError:
            raise UpstreamUnavailable(f"the upstream engine sent nothing for {self._read_timeout}s") from None
        except asyncio.LimitOverrunError:
            raise UpstreamError("the upstream engine sent oversized response headers") from None
        except (OSError, asyncio.IncompleteReadError):
            raise UpstreamError("the upstream engine closed the connection before answering") from None
        lines = head.decode("latin-1").split("\r\n")
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
        """The `data:` / `error:` fields of the event stream, the complete ones of each read together."""
        while True:
            piece = await self._read()
            if piece is None:
                return
            fields = self._lines.feed(piece)
            if fields:
                yield fields

    async def gather(self, seconds: float) -> None:
        """Let `seconds` of the stream pile up in the socket: reading is paused meanwhile, so what arrives is then
        taken in one read and one wake-up, not one per event (the event loop would otherwise read each at once)."""
        transport = self._writer.transport
        transport.pause_reading()
        try:
            await asyncio.sleep(seconds)
        finally:
            if not transport.is_closing():
                transport.resume_reading()

    def close(self) -> None:
        """Drop the connection now (the upstream then stops generating for it)."""
        self._writer.transport.abort()

    async def _read(self) -> bytes | None:
        """The next piece of the body, de-framed; None at its end. A body cut short is an `UpstreamError`."""
        assert self._body is not None, "read_head first"
        while not self._body.done:
            try:
                async with asyncio.timeout(self._read_timeout):
                    raw = await self._reader.read(READ_SIZE)
            except TimeoutError:
                raise UpstreamUnavailable(f"the upstream engine sent nothing for {self._read_timeout}s") from None
            except OSError:
                raise UpstreamError("the upstream engine broke off the generation (connection lost)") from None
            if not raw:
                if self._body.until_close:
                    return None
                raise UpstreamError("the upstream engine broke off the generation (connection closed)")
            piece = self._body.feed(raw)
            if piece:
                return piece
        return None


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


class SseLines:
    """Server-sent event lines → `(field, value)` pairs for `data` and `error` fields.

    Lines end at `\\r\\n`, `\\n` or `\\r` and nowhere else. A `\\r\\n` cut between two reads reads as a line end
    and an empty line, which is harmless: empty lines only separate events, and every `data:` line is an event
    of its own for the upstreams Maya reads. A line longer than `EVENT_LIMIT` is an `UpstreamError`."""

    def __init__(self) -> None:
        self._partial = b""

    def feed(self, piece: bytes) -> list[tuple[bytes, bytes]]:
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
