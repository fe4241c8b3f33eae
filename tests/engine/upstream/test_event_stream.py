"""The lean stream reader against real sockets on 127.0.0.1: framing, SSE lines, and every way a stream can fail.

Each test serves one scripted answer (raw bytes, in pieces) from an asyncio server and reads it with `Endpoint`,
as the upstream engine does."""

from __future__ import annotations

import asyncio
import socket

import pytest

from maya_server.engine.upstream.event_stream import DATA, ERROR, EVENT_LIMIT, Endpoint, SseLines
from maya_server.errors import UpstreamError, UpstreamUnavailable

LINE_LIKE = "\u2028\u2029\u0085\u000b\u000c\u001c\u001d\u001e"
"""Characters Python's str.splitlines() breaks at besides \\r and \\n; SSE does not."""


def serve(pieces: list[bytes], *, pause: float = 0.0, hold_open: bool = False):
    """Run `reader(url)` against a server that answers any request with `pieces`, one write each."""
    requests: list[bytes] = []

    async def run(reader_coroutine):
        async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            requests.append(await reader.readuntil(b"\r\n\r\n"))
            for piece in pieces:
                writer.write(piece)
                await writer.drain()
                if pause:
                    await asyncio.sleep(pause)
            if hold_open:
                await asyncio.sleep(10)
            writer.close()

        server = await asyncio.start_server(answer, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        async with server:
            return await reader_coroutine(f"http://127.0.0.1:{port}")

    return run, requests


async def read_all(url: str, **endpoint) -> list[list[tuple[bytes, bytes]]]:
    stream = await Endpoint(url, **endpoint).post("/v1/completions", b'{"prompt": [1]}', {"Authorization": "Bearer k"})
    try:
        assert stream.status == 200
        return [batch async for batch in stream.batches()]
    finally:
        stream.close()


def chunked(*events: bytes) -> list[bytes]:
    head = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
    return [head] + [b"%x\r\n%s\r\n" % (len(e), e) for e in events] + [b"0\r\n\r\n"]


def test_events_and_the_request_as_sent():
    run, requests = serve(chunked(b'data: {"a": 1}\n\n', b'data: {"a": 2}\n\ndata: [DONE]\n\n'), pause=0.05)
    batches = asyncio.run(run(read_all))
    assert batches == [[(DATA, b'{"a": 1}')], [(DATA, b'{"a": 2}'), (DATA, b"[DONE]")]]
    request = requests[0].decode()
    assert request.startswith("POST /v1/completions HTTP/1.1\r\n") and "Authorization: Bearer k\r\n" in request
    assert "Content-Length: 15\r\n" in request


def test_unicode_line_characters_stay_inside_their_event():
    text = f'data: {{"text": "a{LINE_LIKE}b"}}\n\n'.encode()
    run, _ = serve(chunked(text))
    (batch,) = asyncio.run(run(read_all))
    assert batch == [(DATA, f'{{"text": "a{LINE_LIKE}b"}}'.encode())]


@pytest.mark.parametrize("ending", [b"\n", b"\r\n", b"\r"])
def test_every_sse_line_ending_ends_a_line(ending):
    body = b"data: 1" + ending + b": comment" + ending + b"event: x" + ending + b"error: {\"e\": 1}" + ending + ending
    run, _ = serve([b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body), body])
    assert asyncio.run(run(read_all)) == [[(DATA, b"1"), (ERROR, b'{"e": 1}')]]


def test_events_cut_anywhere_come_out_whole():
    """Split at every byte, CR LF and multi-byte characters included, framed as one chunk per byte."""
    events = "data: {\"t\": \"🎉日\u2028\"}\r\ndata: 2\r\n\r\n".encode()
    run, _ = serve(chunked(*[events[i:i + 1] for i in range(len(events))]))
    fields = [f for batch in asyncio.run(run(read_all)) for f in batch]
    assert fields == [(DATA, "{\"t\": \"🎉日\u2028\"}".encode()), (DATA, b"2")]


def test_a_body_until_close_is_read_to_its_end():
    run, _ = serve([b"HTTP/1.1 200 OK\r\n\r\n", b"data: 1\n\n", b"data: 2\n\n"], pause=0.02)
    assert [f for b in asyncio.run(run(read_all)) for f in b] == [(DATA, b"1"), (DATA, b"2")]


def test_an_error_status_gives_its_body():
    async def read_error(url):
        stream = await Endpoint(url).post("/v1/completions", b"{}", {})
        try:
            return stream.status, await stream.read_body(100)
        finally:
            stream.close()

    run, _ = serve([b"HTTP/1.1 400 Bad Request\r\nContent-Length: 11\r\n\r\n", b'{"error":1}'])
    assert asyncio.run(run(read_error)) == (400, b'{"error":1}')


@pytest.mark.parametrize("pieces, message", [
    ([b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", b"5\r\ndata:"], "broke off"),       # cut mid-chunk
    ([b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n", b"data: 1\n"], "broke off"),              # short body
    ([b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", b"zz\r\n"], "malformed chunked"),
    ([b"HTTP/1.1 200 OK\r\nContent-Length: ten\r\n\r\n"], "malformed Content-Length"),
    ([b"SSH-2.0-OpenSSH\r\n\r\n"], "other than HTTP"),
    ([b"HTTP/1.1 200 OK\r\nX: " + b"y" * 70000], "oversized response headers"),
    ([b"HTTP/1.1 200"], "closed the connection before answering"),
])
def test_a_broken_answer_is_an_upstream_error(pieces, message):
    run, _ = serve(pieces)
    with pytest.raises(UpstreamError, match=message):
        asyncio.run(run(read_all))


def test_an_endless_event_is_refused_not_buffered():
    run, _ = serve([b"HTTP/1.1 200 OK\r\n\r\n"] + [b"x" * (1 << 20)] * 5)
    with pytest.raises(UpstreamError, match="oversized stream event"):
        asyncio.run(run(read_all))
    assert EVENT_LIMIT == 4 << 20


def test_silence_past_the_read_timeout_is_unavailable():
    run, _ = serve([b"HTTP/1.1 200 OK\r\n\r\n"], hold_open=True)
    with pytest.raises(UpstreamUnavailable, match="sent nothing for 0.2s"):
        asyncio.run(run(lambda url: read_all(url, read_timeout=0.2)))


def test_nobody_listening_is_unavailable():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(UpstreamUnavailable, match="cannot connect"):
        asyncio.run(read_all(f"http://127.0.0.1:{port}"))


def test_lines_split_only_at_cr_and_lf():
    lines = SseLines()
    assert lines.feed(b"data: a\r") == [(DATA, b"a")]
    assert lines.feed(b"\ndata: b\xe2\x80") == []
    assert lines.feed(b"\xa8c\n") == [(DATA, "b\u2028c".encode())]


async def read_holding(url: str, hold: float) -> list[tuple[float, list[tuple[bytes, bytes]]]]:
    """Every batch with the time it came, the stream held for `hold` seconds after each (`gather`)."""
    loop = asyncio.get_running_loop()
    stream = await Endpoint(url).post("/v1/completions", b"{}", {})
    began, batches = loop.time(), []
    try:
        async for batch in stream.batches():
            batches.append((loop.time() - began, batch))
            stream.gather(hold)
    finally:
        stream.close()
    return batches


def test_events_sent_during_a_hold_come_out_together_once_it_ends():
    """Three events 20 ms apart after the first: a 150 ms hold after the first batch gathers them into one, which
    comes no sooner than the hold ends."""
    run, _ = serve(chunked(b"data: 1\n\n", b"data: 2\n\n", b"data: 3\n\n", b"data: 4\n\n"), pause=0.02)
    (first_at, first), (second_at, second) = asyncio.run(run(lambda url: asyncio.wait_for(read_holding(url, 0.15), 2.0)))
    assert first == [(DATA, b"1")] and second == [(DATA, b"2"), (DATA, b"3"), (DATA, b"4")]
    assert second_at - first_at >= 0.14


@pytest.mark.parametrize("pieces, outcome", [
    (chunked(b"data: 1\n\n", b"data: 2\n\n"), None),                                              # a clean end
    ([b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", b"9\r\ndata: 1\n\n\r\n", b"5\r\ndat"], "broke off"),
])
def test_an_end_during_a_hold_is_read_when_it_ends(pieces, outcome):
    """The socket is not read during a hold, its end included: a stream that ends (or breaks) meanwhile is
    reported once the hold is over, with what came before the end, and not held up to the read timeout."""
    async def read(url):
        return await asyncio.wait_for(read_holding(url, 0.3), 2.0)

    run, _ = serve(pieces, pause=0.02)
    if outcome is None:
        (_, first), (second_at, second) = asyncio.run(run(read))
        assert first == [(DATA, b"1")] and second == [(DATA, b"2")] and second_at >= 0.29
    else:
        with pytest.raises(UpstreamError, match=outcome):
            asyncio.run(run(read))


def test_a_stream_silent_since_a_failed_check_is_ended_and_one_heard_from_since_is_not():
    """`fail_if_silent_since`: the engine was found unresponsive at a moment; a request waiting since then or
    earlier ends with `UpstreamUnavailable` (before its head, or mid-stream), one that heard something after
    that moment waits on, and a closed one leaves the `live` set."""
    run, _ = serve([b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n", b'data: {"a": 1}\n\n'],
                   pause=0.3, hold_open=True)

    async def reader(url: str) -> tuple[list, list, int]:
        loop = asyncio.get_running_loop()
        live: set = set()
        endpoint = Endpoint(url, read_timeout=60)
        stream = await endpoint.post("/v1/completions", b"{}", {}, live=live)
        (connection,) = live
        before_the_event = loop.time()
        batches = stream.batches()
        first = await batches.__anext__()  # it arrived after `before_the_event`
        following = asyncio.ensure_future(batches.__anext__())  # the wait for the next one, which never comes
        await asyncio.sleep(0.05)
        spared = connection.fail_if_silent_since(before_the_event, UpstreamUnavailable("wedged"))
        ended = connection.fail_if_silent_since(loop.time(), UpstreamUnavailable("wedged"))
        outcome = []
        try:
            await following
        except UpstreamUnavailable as exc:
            outcome.append(exc.message)
        stream.close()
        await asyncio.sleep(0.05)
        return [first, spared, ended], outcome, len(live)

    (first, spared, ended), outcome, left = asyncio.run(run(reader))
    assert first == [(DATA, b'{"a": 1}')] and spared is False and ended is True
    assert outcome == ["wedged"] and left == 0


def test_a_request_waiting_for_its_head_is_ended_when_its_engine_is_found_unresponsive():
    async def reader(url: str) -> str:
        loop = asyncio.get_running_loop()
        live: set = set()
        posting = asyncio.ensure_future(Endpoint(url, read_timeout=60).post("/v1/completions", b"{}", {}, live=live))
        await asyncio.sleep(0.3)  # connected and sent; the head never comes
        assert len(live) == 1 and not posting.done()
        assert next(iter(live)).fail_if_silent_since(loop.time(), UpstreamUnavailable("wedged"))
        with pytest.raises(UpstreamUnavailable) as caught:
            await posting
        await asyncio.sleep(0.05)
        assert not live
        return caught.value.message

    run, _ = serve([], hold_open=True)  # accepts, reads the request, answers nothing
    assert asyncio.run(run(reader)) == "wedged"
