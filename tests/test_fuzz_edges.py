"""The hostile run's edges beyond request bodies: any text a model writes through an upstream engine's stream,
senders that stop mid-request, and SIGTERM with a mix of requests in flight.

Each run counts what it sent and asserts the same totals as tests/test_fuzz.py: no 5xx but a shutdown's
503 `server_shutdown`, every stream ending with its terminal event, every error in OpenAI's shape.
Seeded, so `make test` runs the same cases every time.
"""

from __future__ import annotations

import asyncio
import collections
import json
import random
import signal
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from maya_server.config import ServerConfig, default_model_path
from maya_server.engine_setup import create_engine
from maya_server.http.shutdown import SHUTDOWN_CODE

from tests.fake_upstream import FakeUpstream
from tests.gguf_model_dir import smollm2_tokenizer, write_model_dir
from tests.http.test_shutdown import start_maya
from tests.responses.api.sse import ERROR_KEYS
from tests.server import RunningServer, wait_for
from tests.test_fuzz import EXAMPLES, report_totals

LINE_LIKE = "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"
model_text = st.text(alphabet=st.one_of(st.sampled_from(LINE_LIKE + "\x00\t\"\\😀🐉日本\u200b\ufeff"),
                                        st.characters(codec="utf-8")), min_size=1, max_size=40)


def sse_payloads(body: bytes) -> list[str]:
    """The `data:` payloads of one SSE answer, split at SSE's own line ends only."""
    lines = body.decode().replace("\r\n", "\n").split("\n")
    assert all(not line or line.startswith(("data: ", "event: ", ":")) for line in lines), body[:300]
    return [line[6:] for line in lines if line.startswith("data: ")]


def answers(http: httpx.Client) -> dict[str, str]:
    """The text of one answer in each API, streamed and not, checking each stream ends with its terminal event."""
    ask = {"messages": [{"role": "user", "content": "hi"}]}
    texts = {"chat": http.post("/v1/chat/completions", json=ask).json()["choices"][0]["message"]["content"]}
    payloads = sse_payloads(http.post("/v1/chat/completions", json={**ask, "stream": True}).content)
    assert payloads[-1] == "[DONE]"
    chunks = [json.loads(p) for p in payloads[:-1]]
    texts["chat stream"] = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    response = http.post("/v1/responses", json={"input": "hi"}).json()
    assert response["status"] == "completed", response
    messages = [item for item in response["output"] if item["type"] == "message"]
    texts["responses"] = messages[0]["content"][0]["text"] if messages else ""  # whitespace only: no message
    events = [json.loads(p) for p in sse_payloads(http.post("/v1/responses", json={"input": "hi", "stream": True}).content)]
    assert events[-1]["type"] == "response.completed"
    texts["responses stream"] = "".join(e["delta"] for e in events if e["type"] == "response.output_text.delta")
    return texts


@pytest.fixture(scope="module", params=["sglang", "llama-server"])
def upstream_maya(request, tmp_path_factory):
    tokenizer_dir = str(write_model_dir(default_model_path(), tmp_path_factory.mktemp("smollm2")))
    upstream = FakeUpstream(request.param, smollm2_tokenizer(), chunk_bytes=3)
    config = ServerConfig(engine="upstream", family="chatml", upstream_url=upstream.url, tokenizer=tokenizer_dir,
                          upstream_read_timeout=30.0)
    server = RunningServer(config, create_engine(config))
    with server.http() as http:
        yield server, upstream, http
        report_totals(f"generated text through a fake {request.param}", http)
    server.stop()
    upstream.stop()


@settings(EXAMPLES, max_examples=150)  # four answers an example, through an HTTP engine
@given(text=model_text)
def test_any_generated_text_arrives_whole_through_an_upstream(upstream_maya, text):
    server, upstream, http = upstream_maya
    tokenizer = upstream.tokenizer
    upstream.answer = text
    expected = text if upstream.kind == "sglang" else tokenizer.decode(tokenizer.encode(text, special=False))
    expected = expected.strip()  # an answer's edge whitespace is dropped, as the templates strip it (trimmed_section)
    if "<|im_end|>" in expected or "<|endoftext|>" in expected:
        return  # a stop token's text ends the turn, as it should
    if upstream.kind != "sglang" and "\ufffd" in expected:
        return  # the test tokenizer cannot spell this text, so the fake engine's ids would not either
    for api, got in answers(http).items():
        assert got == expected, api


REQUESTS = [
    ("POST", "/v1/responses", {"input": "hi"}), ("POST", "/v1/responses", {"input": "hi", "stream": True}),
    ("POST", "/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}]}),
    ("POST", "/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}], "stream": True}),
    ("GET", "/v1/models", None),
]


def raw(method: str, path: str, body: dict | None) -> bytes:
    content = json.dumps(body).encode() if body is not None else b""
    head = f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
    if body is not None:
        head += f"Content-Type: application/json\r\nContent-Length: {len(content)}\r\n"
    return head.encode() + b"\r\n" + content


async def send_then_stop(server, data: bytes) -> bytes:
    host, port = server.url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write(data)
    try:
        return await asyncio.wait_for(reader.read(1 << 20), 60)
    finally:
        writer.close()


def test_senders_that_stop_anywhere_mid_request_get_a_408_in_openai_shape(start_server):
    server = start_server(request_header_timeout=1.0, request_body_timeout=1.0)
    rng = random.Random(21)
    cases = []
    for _ in range(240):
        data = raw(*rng.choice(REQUESTS))
        cases.append(data[:rng.randrange(1, len(data))])  # never the whole request
    async def all_of() -> list[bytes]:
        return await asyncio.gather(*(send_then_stop(server, c) for c in cases))

    replies = asyncio.run(all_of())
    print(f"\nslow senders: {len(replies)} connections, {sum(r.startswith(b'HTTP/1.1 408') for r in replies)} 408s")
    for reply in replies:
        assert reply.startswith(b"HTTP/1.1 408"), reply[:200]
        assert set(json.loads(reply.split(b"\r\n\r\n", 1)[1])["error"]) == ERROR_KEYS
    assert server.engine.calls == 0


def answered(url: str, method: str, path: str, body: dict | None) -> tuple[int, bytes]:
    with httpx.Client(base_url=url, timeout=60) as http, http.stream(method, path, json=body) as answer:
        return answer.status_code, answer.read()


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_sigterm_with_a_mix_in_flight_answers_every_request_in_shape(tmp_path, seed):
    process, url = start_maya(tmp_path, "--max-queue", "64")
    rng = random.Random(seed)
    mix = [rng.choice(REQUESTS) for _ in range(24)]
    try:
        with ThreadPoolExecutor(len(mix)) as pool:
            futures = [pool.submit(answered, url, *request) for request in mix]
            generating = sum(1 for method, _, _ in mix if method == "POST")

            def all_in_flight() -> bool:  # every generation holds or awaits the one slot; the quick GETs are done
                queue = httpx.get(url + "/v1/status", timeout=10).json()["queue"]
                quick_done = all(f.done() for f, (method, _, _) in zip(futures, mix) if method == "GET")
                return queue["busy"] + queue["waiting"] == generating and quick_done

            assert wait_for(all_in_flight, 60)
            process.send_signal(signal.SIGTERM)
            results = [f.result(timeout=60) for f in futures]
        assert process.wait(timeout=30) == 0
    finally:
        process.kill()
    print(f"\nSIGTERM mix {seed}: {len(results)} requests; by status "
          f"{sorted(collections.Counter(status for status, _ in results).items())}")
    for (method, path, body), (status, content) in zip(mix, results):
        if status == 503:
            error = json.loads(content)["error"]
            assert set(error) == ERROR_KEYS and error["code"] == SHUTDOWN_CODE
        elif body and body.get("stream"):
            assert status == 200
            last = json.loads(sse_payloads(content)[-1])
            assert last.get("type") in ("response.completed", "error") or "error" in last, last
        else:
            assert status == 200, content[:300]
