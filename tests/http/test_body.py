"""`read_json`: a request body bounded in size and depth, parsed in a worker thread only when large.

The request is a Starlette `Request` over a scripted ASGI `receive`, so the tests can see how much of
the body was read before a refusal: a declared `Content-Length` over the limit is refused before any
byte is read, a streamed body as soon as it passes the limit, and a client that leaves mid-upload is
`ClientGone` (answered 499), not an error.
"""

from __future__ import annotations

import asyncio
import threading

import pytest
from starlette.requests import Request

from maya_server.errors import ClientGone, InvalidRequestError, PayloadTooLargeError
from maya_server.http.body import OFF_LOOP_BYTES, BodyLimits, off_loop, read_json

LIMITS = BodyLimits(max_bytes=1000, max_depth=4)


class Upload:
    """A scripted `receive`: the body in chunks, then (optionally) a disconnect; counts what was read."""

    def __init__(self, *chunks: bytes, disconnect: bool = False) -> None:
        messages = [{"type": "http.request", "body": c, "more_body": True} for c in chunks]
        if disconnect:
            messages.append({"type": "http.disconnect"})
        else:
            messages.append({"type": "http.request", "body": b"", "more_body": False})
        self.messages, self.read = messages, 0

    async def __call__(self):
        self.read += 1
        return self.messages.pop(0)


def request(upload: Upload, content_length: int | None = None) -> Request:
    headers = [(b"content-type", b"application/json")]
    if content_length is not None:
        headers.append((b"content-length", str(content_length).encode()))
    scope = {"type": "http", "method": "POST", "path": "/v1/responses", "headers": headers, "query_string": b""}
    return Request(scope, upload)


def read(upload: Upload, limits=LIMITS, content_length=None, validate=lambda body: body):
    return asyncio.run(read_json(request(upload, content_length), limits, validate))


def test_a_small_body_is_parsed_and_validated_inline():
    threads = []
    body, large = read(Upload(b'{"model": ', b'"m", "x": "\xc3\xa9"}'),
                       validate=lambda data: threads.append(threading.current_thread()) or data)
    assert body == {"model": "m", "x": "é"} and large is False
    assert threads == [threading.main_thread()]


def test_a_large_body_is_parsed_and_validated_in_a_worker_thread():
    threads = []
    payload = b'{"text": "' + b"a" * OFF_LOOP_BYTES + b'"}'
    body, large = read(Upload(payload), BodyLimits(2 * OFF_LOOP_BYTES, 4),
                       validate=lambda data: threads.append(threading.current_thread()) or len(data["text"]))
    assert body == OFF_LOOP_BYTES and large is True
    assert threads and threads[0] is not threading.main_thread()


def test_a_declared_length_over_the_limit_is_a_413_before_reading():
    upload = Upload(b"{}")
    with pytest.raises(PayloadTooLargeError) as caught:
        read(upload, content_length=1001)
    assert upload.read == 0
    assert caught.value.status == 413 and caught.value.code == "request_too_large"
    assert "limit of 1000 bytes (--max-body-bytes)" in caught.value.message


def test_a_streamed_body_is_refused_as_soon_as_it_passes_the_limit():
    upload = Upload(b" " * 600, b" " * 600, b" " * 600, b"{}")
    with pytest.raises(PayloadTooLargeError):
        read(upload)  # no Content-Length: chunked
    assert upload.read == 2


def test_a_body_exactly_at_the_limit_is_read():
    assert read(Upload(b"{}" + b" " * 998), content_length=1000) == ({}, False)


def test_a_client_that_leaves_mid_upload_is_client_gone():
    with pytest.raises(ClientGone):
        read(Upload(b'{"model": ', disconnect=True))


@pytest.mark.parametrize("payload, code", [(b"{oops", None), (b"[]", None), (b'{"a": [[[[1]]]]}', "json_too_deep")])
def test_bad_json_is_the_parsers_400(payload, code):
    with pytest.raises(InvalidRequestError) as caught:
        read(Upload(payload))
    assert caught.value.code == code


def test_off_loop_runs_inline_unless_large():
    async def where(large):
        return await off_loop(large, threading.current_thread)
    assert asyncio.run(where(False)) is threading.main_thread()
    assert asyncio.run(where(True)) is not threading.main_thread()


def test_a_large_body_is_parsed_in_the_large_preparation_lane():
    """Huge bodies arriving at once take the large lane's few threads, not the default pool's every one."""
    from maya_server.pipeline.prepare_lanes import PrepareLanes

    lanes = PrepareLanes(threads=1, max_waiting=1)

    async def where(large):
        return await off_loop(large, lambda: threading.current_thread().name, lanes)
    try:
        assert asyncio.run(where(True)).startswith("maya-prepare-large")
        assert asyncio.run(where(False)) == threading.main_thread().name
    finally:
        lanes.close()
