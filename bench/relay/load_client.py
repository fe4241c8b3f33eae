"""A light streaming load client: N keep-alive connections, each sending the same request back to back.

It never parses the event stream: it reads in large blocks, keeps the last
64 KiB of each answer and, once the chunked answer ends, takes the token count
from the final usage it carries (`"completion_tokens":N` for Chat and
completions, `"output_tokens":N` for Responses). One process, one selector
loop, raw sockets. Prints one JSON line:

    {"tokens", "requests", "errors", "events", "wall_s", "cpu_s", "tok_s"}

(`events`: SSE events read, counted as blank lines, to show whether the server sent one
event per token or coalesced many tokens into one.)

`wall_s` runs from the first request sent to the last answer read; a stream
that is mid-answer at the deadline finishes that answer (so every token
counted is a whole request's). `cpu_s` is this process's own user+system time.

    python bench/relay/load_client.py --url http://127.0.0.1:8000 --path /v1/chat/completions \\
        --body-file body.json --streams 16 --seconds 5 [--count-key completion_tokens]
"""

from __future__ import annotations

import argparse
import json
import re
import resource
import selectors
import socket
import time
from urllib.parse import urlsplit

TAIL = 65536
READ = 1 << 18
END = b"\r\n0\r\n\r\n"  # the last chunk of a chunked answer (SSE data never holds \r)


class Stream:
    def __init__(self, address: tuple[str, int], request: bytes) -> None:
        self.address = address
        self.request = request
        self.sock: socket.socket | None = None
        self.head = b""
        self.tail = b""
        self.in_body = False
        self.events = 0

    def connect(self) -> None:
        self.sock = socket.create_connection(self.address)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def send(self) -> None:
        self.head, self.tail, self.in_body = b"", b"", False
        self.sock.sendall(self.request)

    def feed(self, data: bytes) -> bytes | None:
        """The answer's tail once it is complete, else None; raises on a non-200 answer."""
        if not self.in_body:
            self.head += data
            end = self.head.find(b"\r\n\r\n")
            if end < 0:
                return None
            status = self.head[: self.head.find(b"\r\n")]
            if b" 200 " not in status + b" ":
                raise RuntimeError(status.decode(errors="replace"))
            data, self.head, self.in_body = self.head[end + 4:], b"", True
        self.events += data.count(b"\n\n")  # SSE event ends; one split across two reads is missed
        self.tail = data[-TAIL:] if len(data) >= TAIL else self.tail[-(TAIL - len(data)):] + data
        return self.tail if self.tail.endswith(END) else None


def run(url: str, path: str, body: bytes, streams: int, seconds: float, count_key: str) -> dict:
    parts = urlsplit(url)
    address = (parts.hostname, parts.port)
    request = (f"POST {path} HTTP/1.1\r\nHost: {parts.hostname}:{parts.port}\r\nContent-Type: application/json\r\n"
               f"Accept: text/event-stream\r\nContent-Length: {len(body)}\r\n\r\n").encode() + body
    count = re.compile(rb'"' + count_key.encode() + rb'":\s*(\d+)')
    selector = selectors.DefaultSelector()
    cpu0 = resource.getrusage(resource.RUSAGE_SELF)
    started = time.perf_counter()
    deadline = started + seconds
    tokens = requests = errors = 0
    all_streams = []
    for _ in range(streams):
        stream = Stream(address, request)
        all_streams.append(stream)
        stream.connect()
        stream.send()
        selector.register(stream.sock, selectors.EVENT_READ, stream)
    open_streams = streams
    while open_streams:
        for key, _ in selector.select(timeout=60):
            stream: Stream = key.data
            try:
                data = stream.sock.recv(READ)
                if not data:
                    raise RuntimeError("the server closed the connection")
                tail = stream.feed(data)
            except (OSError, RuntimeError):
                errors += 1
                selector.unregister(stream.sock)
                stream.sock.close()
                if time.perf_counter() < deadline:
                    stream.connect()
                    stream.send()
                    selector.register(stream.sock, selectors.EVENT_READ, stream)
                else:
                    open_streams -= 1
                continue
            if tail is None:
                continue
            matches = count.findall(tail)
            if matches:
                tokens += int(matches[-1])
                requests += 1
            else:
                errors += 1
            if time.perf_counter() < deadline:
                stream.send()
            else:
                selector.unregister(stream.sock)
                stream.sock.close()
                open_streams -= 1
    wall = time.perf_counter() - started
    cpu1 = resource.getrusage(resource.RUSAGE_SELF)
    cpu = (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime)
    return {"tokens": tokens, "requests": requests, "errors": errors, "events": sum(s.events for s in all_streams),
            "wall_s": wall, "cpu_s": cpu,
            "tok_s": tokens / wall if wall > 0 else 0.0}


def main() -> None:
    args = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    args.add_argument("--url", required=True)
    args.add_argument("--path", required=True)
    args.add_argument("--body-file", required=True)
    args.add_argument("--streams", type=int, default=1)
    args.add_argument("--seconds", type=float, default=5)
    args.add_argument("--count-key", default="completion_tokens")
    opts = args.parse_args()
    with open(opts.body_file, "rb") as f:
        body = f.read()
    print(json.dumps(run(opts.url, opts.path, body, opts.streams, opts.seconds, opts.count_key)))


if __name__ == "__main__":
    main()
