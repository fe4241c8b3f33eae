"""The replay upstream: a fast stand-in for vLLM, SGLang or llama-server, answering Maya from recordings.

    with ReplayUpstream("vllm", rate=None, slots=64) as replay:   # or .start() -> url ... .stop()
        ... --engine upstream --upstream-url replay.url ...

`format` is "llama-server" (answers `/v1/completions` and `/completion`, and
`GET /props` as llama-server does), "vllm" or "sglang". `rate` is tokens per
second per stream (None or 0: as fast as the socket takes them). The server
is `replay_upstream.c`, compiled on first use into
`~/.cache/maya/replay-upstream-<hash of the source>/` (gcc -O2), fed a script
built here from `recordings/` (see README.md for what is recorded and how).

Run one by hand: `.venv/bin/python bench/relay/replay.py --format vllm [--rate 50] [--port 8000]`.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import select
import shutil
import subprocess
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
SOURCE = HERE / "replay_upstream.c"
RECORDINGS = HERE / "recordings"
FORMATS = ("llama-server", "vllm", "sglang")
CFLAGS = ("-O2", "-Wall", "-Wextra", "-std=gnu11")
DEFAULT_CONTEXT = 32768

_LLAMA_HEADERS = "Server: llama.cpp\r\nAccess-Control-Allow-Origin: \r\n"
_UVICORN_HEADERS = "date: Tue, 01 Dec 2026 00:00:00 GMT\r\nserver: uvicorn\r\n"
_UVICORN_STREAM_HEAD = ("HTTP/1.1 200 OK\r\n" + _UVICORN_HEADERS
                        + "content-type: text/event-stream; charset=utf-8\r\ntransfer-encoding: chunked\r\n\r\n")
_COUNTS = {  # the recorded numbers that depend on the request, as the C server's placeholders
    "completion_tokens": "C", "prompt_tokens": "P", "total_tokens": "T", "predicted_n": "C",
    "tokens_predicted": "C", "tokens_evaluated": "P", "tokens_cached": "K",
}
_COUNT_FIELDS = re.compile(rb'"(' + "|".join(_COUNTS).encode() + rb')":(\d+)')


def binary_path() -> Path:
    """The compiled server, built once per source (and flags) into the cache."""
    digest = hashlib.sha256(SOURCE.read_bytes() + " ".join(CFLAGS).encode()).hexdigest()[:16]
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "maya" / f"replay-upstream-{digest}"
    binary = cache / "replay-upstream"
    if binary.exists():
        return binary
    compiler = shutil.which(os.environ.get("CC", "gcc")) or shutil.which("cc")
    if compiler is None:
        raise RuntimeError("the replay upstream needs a C compiler (gcc)")
    cache.mkdir(parents=True, exist_ok=True)
    partial = cache / f"replay-upstream.{os.getpid()}.tmp"
    build = subprocess.run([compiler, *CFLAGS, "-o", str(partial), str(SOURCE)], capture_output=True, text=True)
    if build.returncode != 0:
        raise RuntimeError(f"compiling {SOURCE.name} failed:\n{build.stderr}")
    if build.stderr.strip():
        raise RuntimeError(f"compiling {SOURCE.name} warned:\n{build.stderr}")
    partial.replace(binary)  # atomic: a concurrent build finds either nothing or a whole binary
    return binary


def _events(path: Path) -> list[bytes]:
    return [event + b"\n\n" for event in path.read_bytes().split(b"\n\n") if event.strip()]


def _templated(event: bytes) -> bytes:
    return _COUNT_FIELDS.sub(lambda m: b'"' + m.group(1) + b'":\x01' + _COUNTS[m.group(1).decode()].encode(), event)


def _is_token_event(event: bytes) -> bool:
    """An event that carries a generated token (not usage, a final chunk or `[DONE]`)."""
    payload = event[6:].strip()
    if payload == b"[DONE]":
        return False
    body = json.loads(payload)
    if "choices" in body:
        choices = body["choices"]
        if not choices:
            return False
        choice = choices[0]
        # llama-server's finish chunk has empty text and no logprobs; a token chunk has both
        return choice.get("logprobs") is not None or bool(choice.get("text"))
    return body.get("stop") is False  # llama-server's native /completion


def _stream_records(path: str, events: list[bytes], head: bytes, limit_key: str, default_prompt: int) -> list[tuple]:
    """T / L / F records of one streaming path. A finish reason on the last recorded token's chunk
    (vLLM, SGLang) becomes that token's L variant; every token event gets one."""
    tokens = [event for event in events if _is_token_event(event)]
    finals = [_templated(event) for event in events if not _is_token_event(event)]
    records = [("H", path, head), ("M", path, f'"{limit_key}"'.encode()), ("N", path, str(default_prompt).encode())]
    finish_on_token = b'"finish_reason":"length"' in tokens[-1]
    for event in tokens:
        event = _templated(event)
        if finish_on_token:
            plain = event.replace(b'"finish_reason":"length"', b'"finish_reason":null', 1)
            records.append(("T", path, plain))
            records.append(("L", path, plain.replace(b'"finish_reason":null', b'"finish_reason":"length"', 1)))
        else:
            records.append(("T", path, event))
    records += [("F", path, event) for event in finals]
    return records


def _static(status: str, headers: str, body: bytes) -> bytes:
    return f"HTTP/1.1 {status}\r\n{headers}Content-Length: {len(body)}\r\n\r\n".encode() + body


def build_script(format: str, *, slots: int = 64, context: int = DEFAULT_CONTEXT, recordings: Path = RECORDINGS) -> bytes:
    """The C server's script for `format` from the recordings (the format is in replay_upstream.c)."""
    if format not in FORMATS:
        raise ValueError(f"unknown format {format!r} (one of {', '.join(FORMATS)})")
    meta = json.loads((recordings / "meta.json").read_text())
    prompt = len(meta["prompt_ids"])
    records: list[tuple] = []
    if format == "llama-server":
        json_headers = _LLAMA_HEADERS + "Content-Type: application/json; charset=utf-8\r\nKeep-Alive: timeout=5, max=100\r\n"
        models = json.loads((recordings / "llama-server.models.json").read_bytes())
        for card in models.get("data", []):
            card.setdefault("meta", {})["n_ctx"] = context
        props = json.loads((recordings / "llama-server.props.json").read_bytes())
        props["total_slots"] = slots
        props["default_generation_settings"]["n_ctx"] = context
        records += [
            ("S", "/v1/models", _static("200 OK", json_headers, _compact(models))),
            ("S", "/props", _static("200 OK", json_headers, _compact(props))),
            ("S", "/health", _static("200 OK", json_headers, b'{"status":"ok"}')),
            ("S", "*", _static("404 Not Found", json_headers,
                               b'{"error":{"code":404,"message":"File Not Found","type":"not_found_error"}}')),
        ]
        for path, name, key in (("/v1/completions", "v1-completions", "max_tokens"), ("/completion", "completion", "n_predict")):
            head = meta["heads"][f"llama-server {path}"].encode()
            records += _stream_records(path, _events(recordings / f"llama-server.{name}.sse"), head, key, prompt)
    else:
        json_headers = _UVICORN_HEADERS + "content-type: application/json\r\n"
        models = json.loads((recordings / f"{format}.models.json").read_bytes())
        for card in models.get("data", []):
            card["max_model_len"] = context
        records += [
            ("S", "/v1/models", _static("200 OK", json_headers, _compact(models))),
            ("S", "/health", _static("200 OK", json_headers, b"")),
            ("S", "*", _static("404 Not Found", json_headers, b'{"detail":"Not Found"}')),
        ]
        records += _stream_records("/v1/completions", _events(recordings / f"{format}.v1-completions.sse"),
                                   _UVICORN_STREAM_HEAD.encode(), "max_tokens", prompt)
    script = bytearray(b"REPLAY 1\n")
    for tag, path, data in records:
        script += f"{tag} {path} {len(data)}\n".encode() + data + b"\n"
    return bytes(script)


def _compact(value: object) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


class ReplayUpstream:
    def __init__(self, format: str, rate: float | None = None, slots: int = 64, *,
                 context: int = DEFAULT_CONTEXT, recordings: Path = RECORDINGS, port: int = 0) -> None:
        self.format = format
        self.rate = rate or 0
        self.script = build_script(format, slots=slots, context=context, recordings=recordings)
        self.port = port
        self.url: str | None = None
        self.process: subprocess.Popen | None = None
        self._script_dir: tempfile.TemporaryDirectory | None = None

    def start(self, timeout: float = 10) -> str:
        binary = binary_path()
        self._script_dir = tempfile.TemporaryDirectory(prefix="replay-upstream-")
        script = Path(self._script_dir.name) / "script"
        script.write_bytes(self.script)
        self.process = subprocess.Popen(
            [str(binary), "--script", str(script), "--port", str(self.port), "--rate", repr(float(self.rate))],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
        )
        ready, _, _ = select.select([self.process.stdout], [], [], timeout)
        line = self.process.stdout.readline().decode() if ready else ""  # "port N" once it listens
        if not line.startswith("port "):
            error = self.process.stderr.read().decode() if self.process.poll() is not None else "no answer in time"
            self.stop()
            raise RuntimeError(f"the replay upstream did not start: {error.strip()}")
        self.port = int(line.split()[1])
        self.url = f"http://127.0.0.1:{self.port}"
        return self.url

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process else None

    def stop(self) -> None:
        if self.process is not None:
            if self.process.poll() is None:
                self.process.terminate()
                try:
                    self.process.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    self.process.kill()
                    self.process.wait(timeout=5)
            for stream in (self.process.stdout, self.process.stderr):
                if stream:
                    stream.close()
            self.process = None
        if self._script_dir is not None:
            self._script_dir.cleanup()
            self._script_dir = None

    def __enter__(self) -> "ReplayUpstream":
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def main() -> None:
    args = argparse.ArgumentParser(description="Serve recorded upstream streams (a stand-in GPU engine).")
    args.add_argument("--format", choices=FORMATS, default="vllm")
    args.add_argument("--rate", type=float, default=0, help="tokens per second per stream (0: unlimited)")
    args.add_argument("--slots", type=int, default=64, help="llama-server's total_slots in /props")
    args.add_argument("--context", type=int, default=DEFAULT_CONTEXT)
    args.add_argument("--port", type=int, default=8000)
    opts = args.parse_args()
    replay = ReplayUpstream(opts.format, opts.rate, opts.slots, context=opts.context, port=opts.port)
    url = replay.start()
    print(f"{opts.format} replay at {url} ({'unlimited' if not opts.rate else f'{opts.rate:g} tok/s per stream'}); Ctrl-C stops it")
    try:
        replay.process.wait()
    except KeyboardInterrupt:
        pass
    finally:
        replay.stop()


if __name__ == "__main__":
    main()
