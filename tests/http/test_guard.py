"""Keyless safety (Content-Type, Origin, Host), the body limit and abandoned uploads."""

from __future__ import annotations

import socket
import threading
import time

import httpx
import pytest

from maya_server.http import body
from maya_server.util.validation import parse_json_object

from tests.responses.api.sse import ERROR_KEYS
from tests.server import prometheus_values, wait_for

EVIL = "https://evil.example"


def raw_request(url: str, head: str, body: bytes = b"", *, close_early: bool = False) -> bytes:
    """Send `head` (request line and headers) and `body` over a plain socket; the reply's bytes."""
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(head.replace("\n", "\r\n").encode() + b"\r\n" + body)
        if close_early:
            return b""
        reply = b""
        while b"\r\n\r\n" not in reply or not reply.rstrip().endswith(b"}"):
            chunk = sock.recv(65536)
            if not chunk:
                break
            reply += chunk
        return reply


def assert_refused(answer: httpx.Response, status: int, code: str) -> None:
    assert answer.status_code == status, answer.text
    error = answer.json()["error"]
    assert set(error) == ERROR_KEYS and error["code"] == code


def test_a_cross_site_text_plain_post_runs_nothing_and_stores_nothing(start_server):
    server = start_server(["ok"])
    with server.http() as http:
        forged = http.post("/v1/responses", content=b'{"input": "hi", "store": true}',
                           headers={"Content-Type": "text/plain", "Origin": EVIL})
        no_origin = http.post("/v1/responses", content=b'{"input": "hi", "store": true}',
                              headers={"Content-Type": "text/plain"})
        json_from_evil = http.post("/v1/chat/completions", json={"messages": [{"role": "user", "content": "x"}]},
                                   headers={"Origin": EVIL})
    assert_refused(forged, 403, "origin_not_allowed")
    assert_refused(no_origin, 415, "unsupported_media_type")
    assert_refused(json_from_evil, 403, "origin_not_allowed")
    assert server.engine.calls == 0 and server.app.state.store.stats()["entries"] == 0


def test_a_cross_site_cancel_leaves_the_job_running(start_server):
    server = start_server(["tick " * 200], delay=0.01)
    client = server.client()  # the official SDK: application/json, no Origin
    job = client.responses.create(model="m", input="hi", background=True, store=True)
    with server.http() as http:
        forged = http.post(f"/v1/responses/{job.id}/cancel", headers={"Origin": EVIL})
    assert_refused(forged, 403, "origin_not_allowed")
    assert client.responses.retrieve(job.id).status in ("queued", "in_progress")
    assert client.responses.cancel(job.id).status == "cancelled"


def test_the_host_must_name_this_server(start_server):
    server = start_server(["ok"])
    port = server.url.rsplit(":", 1)[1]
    with server.http() as http:
        rebound = http.get("/v1/models", headers={"Host": f"attacker.example:{port}"})
        by_name = http.get("/v1/models", headers={"Host": f"localhost:{port}"})
        by_v6 = http.get("/v1/models", headers={"Host": f"[::1]:{port}"})
        probe = http.get("/health", headers={"Host": "10.0.0.7:8080"})  # an orchestrator's, by address
    assert_refused(rebound, 403, "host_not_allowed")
    assert by_name.status_code == 200 and by_v6.status_code == 200 and probe.status_code == 200
    assert b"403" in raw_request(server.url, "GET /v1/models HTTP/1.0\n")  # no Host at all


def test_allowed_host_names_another_host_and_star_turns_the_check_off(start_server):
    named = start_server(["ok"], allowed_hosts=("maya.internal",))
    anything = start_server(["ok"], allowed_hosts=("*",))
    with named.http() as http:
        assert http.get("/v1/models", headers={"Host": "maya.internal:80"}).status_code == 200
        assert http.get("/v1/models", headers={"Host": "other.internal"}).status_code == 403
    with anything.http() as http:
        assert http.get("/v1/models", headers={"Host": "other.internal"}).status_code == 200


def test_an_allowed_cors_origin_passes_with_its_headers(start_server):
    server = start_server(["ok"], cors_origins=("https://app.example",))
    with server.http() as http:
        answer = http.post("/v1/chat/completions", json={"messages": [{"role": "user", "content": "x"}]},
                           headers={"Origin": "https://app.example"})
    assert answer.status_code == 200
    assert answer.headers["access-control-allow-origin"] == "https://app.example"


def test_a_body_over_the_limit_is_a_413_before_the_rest_is_read(start_server):
    server = start_server(["ok"], max_body_bytes=10_000)
    reply = raw_request(server.url, "POST /v1/responses HTTP/1.1\nHost: 127.0.0.1\n"
                        "Content-Type: application/json\nContent-Length: 1000000000\n")  # no body sent at all
    assert reply.startswith(b"HTTP/1.1 413") and b'"request_too_large"' in reply

    def chunks():
        yield b'{"input": "'
        for _ in range(20):
            yield b"x" * 1000
        yield b'"}'

    with server.http() as http:
        streamed = http.post("/v1/responses", content=chunks(), headers={"Content-Type": "application/json"})
        fits = http.post("/v1/responses", json={"input": "x" * 9000})
    assert_refused(streamed, 413, "request_too_large")
    assert fits.status_code == 200 and server.engine.calls == 1


def test_a_megabyte_body_is_parsed_off_the_loop_and_answered(start_server, monkeypatch):
    """The body parser is watched (the real one still parses): a megabyte is parsed in a worker thread, never on
    the server's event loop, while a small body is parsed inline (a thread hop costs more than a few KB)."""
    parsed_on: list[threading.Thread] = []

    def watched(*args, **kwargs):
        parsed_on.append(threading.current_thread())
        return parse_json_object(*args, **kwargs)

    monkeypatch.setattr(body, "parse_json_object", watched)
    server = start_server(["ok"])
    loop_thread = server.on_loop(threading.current_thread)
    messages = [{"role": "user", "content": "word " * 200_000}]
    answer = server.http().post("/v1/chat/completions", json={"messages": messages, "max_tokens": 16})
    assert answer.status_code in (200, 400), answer.text  # the context check may refuse
    small = server.http().post("/v1/chat/completions", json={"messages": [{"role": "user", "content": "hi"}]})
    assert small.status_code == 200
    assert len(parsed_on) == 2 and parsed_on[0] is not loop_thread and parsed_on[1] is loop_thread


def test_an_abandoned_upload_is_not_an_error(start_server, caplog):
    server = start_server(["ok"])
    raw_request(server.url, "POST /v1/responses HTTP/1.1\nHost: 127.0.0.1\nContent-Type: application/json\n"
                "Content-Length: 100000\n", b'{"input": "', close_early=True)

    def counted() -> dict[str, float]:
        return prometheus_values(server.http().get("/metrics/prometheus").text, "maya:http_requests_total")

    assert wait_for(lambda: any('status="499"' in k for k in counted()))
    assert not any('status="500"' in k for k in counted())
    assert "unhandled error" not in caplog.text


@pytest.mark.parametrize("host", ["[::1]evil.com", "localhost:evil", "127.0.0.1:8080/x", "localhost:99999",
                                  "[::1", "local host", "127.0.0.1:80:80"])
def test_a_host_header_that_is_not_exactly_host_and_port_is_a_400(start_server, host):
    server = start_server(["ok"])
    reply = raw_request(server.url, f"GET /v1/models HTTP/1.1\nHost: {host}\n")
    assert reply.startswith(b"HTTP/1.1 400") and b'"invalid_host_header"' in reply
    assert server.engine.calls == 0


def test_two_host_headers_are_a_400_whichever_comes_first(start_server):
    server = start_server(["ok"], allowed_hosts=("*",))
    for first, second in (("127.0.0.1", "evil.example"), ("evil.example", "127.0.0.1")):
        reply = raw_request(server.url, f"POST /v1/responses HTTP/1.1\nHost: {first}\nHost: {second}\n"
                            "Content-Type: application/json\nContent-Length: 15\n", b'{"input": "hi"}')
        assert reply.startswith(b"HTTP/1.1 400") and b'"invalid_host_header"' in reply
    assert server.engine.calls == 0


def test_the_origins_scheme_must_be_this_servers_too(start_server):
    server = start_server(["ok", "ok"])
    port = server.url.rsplit(":", 1)[1]
    with server.http() as http:
        same = http.post("/v1/responses", json={"input": "hi"}, headers={"Origin": f"http://127.0.0.1:{port}"})
        https = http.post("/v1/responses", json={"input": "hi"}, headers={"Origin": f"https://127.0.0.1:{port}"})
        other_scheme = http.post("/v1/responses", json={"input": "hi"}, headers={"Origin": f"ftp://127.0.0.1:{port}"})
    assert same.status_code == 200
    assert_refused(https, 403, "origin_not_allowed")
    assert_refused(other_scheme, 403, "origin_not_allowed")
