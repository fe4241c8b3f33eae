"""The upstream SSE reader splits only at CR, LF and CRLF, whatever the characters inside an event."""

from __future__ import annotations

import orjson
import pytest

from maya_server.engine.sse_reader import SseEvent, SseReader
from maya_server.errors import LineTooLong

LINE_LIKE = "\u2028\u2029\u0085\x0b\x0c\x1c\x1d\x1e"
"""Every character `str.splitlines` breaks at besides CR and LF."""
ODD_TEXT = "a" + LINE_LIKE + "\x00 😀 日本 é \ufffd \u200b \U0010ffff z"


def read(chunks: list[bytes]) -> list[SseEvent]:
    reader = SseReader(max_line=1 << 20)
    events = [event for chunk in chunks for event in reader.feed(chunk)]
    return events + reader.close()


def frame(text: str) -> bytes:
    """An engine's event as llama-server writes it: the JSON raw, only control characters escaped."""
    return b"data: " + orjson.dumps({"content": text}) + b"\n\n"


def test_line_like_characters_stay_inside_the_event_at_every_chunk_boundary():
    stream = frame(ODD_TEXT) + frame("second") + b"data: [DONE]\n\n"
    assert "\u2028".encode() in stream and "\x85".encode() in stream  # raw, as engines send them
    for cut in range(1, len(stream)):
        events = read([stream[:cut], stream[cut:]])
        assert [e.data for e in events][-1] == "[DONE]", cut
        assert [orjson.loads(e.data)["content"] for e in events[:2]] == [ODD_TEXT, "second"], cut


def test_one_byte_at_a_time():
    stream = frame(ODD_TEXT) + b"data: [DONE]\n\n"
    events = read([stream[i:i + 1] for i in range(len(stream))])
    assert orjson.loads(events[0].data)["content"] == ODD_TEXT and events[1].data == "[DONE]"


@pytest.mark.parametrize("end", [b"\n", b"\r\n", b"\r"])
def test_each_line_end_the_format_has(end):
    stream = b"event: x" + end + b"data: one" + end + b"data: two" + end + end + b": comment" + end + b"data: 3" + end + end
    for cut in range(1, len(stream)):
        events = read([stream[:cut], stream[cut:]])
        assert events == [SseEvent("one\ntwo", "x"), SseEvent("3")], (end, cut)


def test_a_lone_cr_then_lf_in_the_next_chunk_is_one_line_end():
    assert read([b"data: a\r", b"\ndata: b\r\n\r\n"]) == [SseEvent("a\nb")]


def test_llama_servers_error_line_is_reported():
    events = read([b'error: {"code": 500, "message": "boom"}\n\n'])
    assert events == [SseEvent("", error='{"code": 500, "message": "boom"}')]


def test_an_event_cut_off_by_the_end_of_the_stream_is_still_delivered():
    assert read([b"data: last"]) == [SseEvent("last")]
    assert read([b"data: last\n"]) == [SseEvent("last")]
    assert read([b"event: ping\n\n"]) == []


def test_an_endless_line_is_refused_before_it_fills_memory():
    reader = SseReader(max_line=64)
    reader.feed(b"data: " + b"x" * 50)
    with pytest.raises(LineTooLong):
        reader.feed(b"x" * 50)


def test_invalid_utf8_is_replaced_not_fatal():
    assert read([b"data: a\xffb\n\n"]) == [SseEvent("a\ufffdb")]
