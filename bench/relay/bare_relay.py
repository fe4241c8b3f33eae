"""The least a Python relay can do per token: the floor under Maya's own cost, on the same event loop.

An asyncio server (uvloop, as Maya's uvicorn uses) that answers every HTTP
request on its keep-alive connections with one completion from a llama-server
`/completion` upstream (the replay, or a real llama-server over TCP): for each
upstream read it takes the whole chunks, parses each event's JSON once
(orjson), writes each token's text as a Chat-like chunk (one `orjson.dumps`)
in one chunked write to the client, and ends with the usage the load client
counts and `[DONE]`. No validation, no tokenizer, no template, no parser, no
framework, no error handling: every step Maya takes beyond these is its own
cost, so `floor_bench.py` reports Maya's CPU per token against this one's.

    python bench/relay/bare_relay.py --upstream-port N [--port M]  # prints "port M" once it listens
"""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path

import orjson
import uvloop

RECORDINGS = Path(__file__).resolve().parent / "recordings"  # replay.py's own; this script runs without the repo on its path
HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"


def chunk(payload: bytes) -> bytes:
    return b"%x\r\n%b\r\n" % (len(payload), payload)


def upstream_request(max_tokens: int) -> bytes:
    meta = json.loads((RECORDINGS / "meta.json").read_text())
    body = orjson.dumps({"prompt": meta["prompt_ids"], "n_predict": max_tokens, "stream": True,
                         "cache_prompt": True})
    return (b"POST /completion HTTP/1.1\r\nHost: upstream\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\nConnection: close\r\n\r\n%b" % (len(body), body))


class Upstream(asyncio.Protocol):
    """One completion: each read's events become the client's chunks, in one write."""

    def __init__(self, client: asyncio.Transport, request: bytes) -> None:
        self.client, self.request = client, request
        self.head_done, self.pending, self.tokens = False, b"", 0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport
        transport.write(self.request)  # type: ignore[attr-defined]

    def data_received(self, data: bytes) -> None:
        if not self.head_done:
            end = data.find(b"\r\n\r\n")
            if end < 0:
                return  # the replay and llama-server send their head in one write
            data, self.head_done = data[end + 4:], True
        self.pending += data
        out = []
        while (line_end := self.pending.find(b"\r\n")) >= 0:
            size = int(self.pending[:line_end], 16)
            if len(self.pending) < line_end + 4 + size:
                break
            body = self.pending[line_end + 2:line_end + 2 + size]
            self.pending = self.pending[line_end + 4 + size:]
            for line in body.split(b"\n"):
                if not line.startswith(b"data: "):
                    continue
                event = orjson.loads(line[6:])
                if event.get("stop"):  # the final event: no token, the usage
                    usage = orjson.dumps({"usage": {"completion_tokens": self.tokens}})
                    out.append(chunk(b"data: " + usage + b"\n\ndata: [DONE]\n\n") + b"0\r\n\r\n")
                    self.transport.close()  # type: ignore[attr-defined]
                    continue
                self.tokens += 1
                delta = {"choices": [{"index": 0, "delta": {"content": event["content"]}}]}
                out.append(chunk(b"data: " + orjson.dumps(delta) + b"\n\n"))
        if out:
            self.client.write(b"".join(out))


class Client(asyncio.Protocol):
    """A client connection: each request (its body is not read for meaning) starts one completion."""

    def __init__(self, upstream_port: int, request: bytes) -> None:
        self.upstream_port, self.request, self.received = upstream_port, request, b""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.received += data
        end = self.received.find(b"\r\n\r\n")
        if end < 0:
            return
        head = self.received[:end].lower()
        length = int(head.split(b"content-length:", 1)[1].split(b"\r\n", 1)[0]) if b"content-length:" in head else 0
        if len(self.received) < end + 4 + length:
            return
        self.received = self.received[end + 4 + length:]
        self.transport.write(HEAD)  # type: ignore[attr-defined]
        loop = asyncio.get_running_loop()
        loop.create_task(loop.create_connection(lambda: Upstream(self.transport, self.request),  # type: ignore[arg-type]
                                                "127.0.0.1", self.upstream_port))


async def serve(upstream_port: int, port: int, max_tokens: int) -> None:
    request = upstream_request(max_tokens)
    server = await asyncio.get_running_loop().create_server(lambda: Client(upstream_port, request), "127.0.0.1", port)
    print(f"port {server.sockets[0].getsockname()[1]}", flush=True)
    await server.serve_forever()


def main() -> None:
    args = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    args.add_argument("--upstream-port", type=int, required=True)
    args.add_argument("--port", type=int, default=0)
    args.add_argument("--tokens", type=int, default=256, help="n_predict of each completion")
    opts = args.parse_args()
    uvloop.run(serve(opts.upstream_port, opts.port, opts.tokens))


if __name__ == "__main__":
    main()
