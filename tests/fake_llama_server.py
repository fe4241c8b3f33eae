"""A stand-in llama-server that lacks what a test says it lacks: flags in its `--help`, fields in its answers.

Run as `python tests/fake_llama_server.py [--omit-flags A,B] [--omit-fields X,Y] ARGS…` (`fake_binary` writes the
executable wrapper). ARGS are what Maya gives llama-server: `--help` prints a usage text with every flag Maya uses
but the omitted ones; `--list-devices` lists none; otherwise it answers HTTP on the `--host` Unix socket like the
pinned llama-server, each omitted field left out (`return_tokens`: no `tokens` in events; `return_progress`: no
`prompt_progress` event; `id_slot`: the final event names slot 0 whatever was asked; `parse_special`: special
text always parsed).
"""

from __future__ import annotations

import json
import os
import socketserver
import sys
from http.server import BaseHTTPRequestHandler
from pathlib import Path

from maya_server.engine.llama_server.check import MMPROJ_FLAG, REQUIRED_FLAGS

SPECIAL = 0
"""The special token the checks use (SmolLM2's `<|endoftext|>`, its first multi-character special token)."""


def fake_binary(path: Path, *, omit_flags: tuple[str, ...] = (), omit_fields: tuple[str, ...] = ()) -> Path:
    """An executable at `path` that runs this fake with those omissions (`-P`: this folder, whose `http` package
    would hide the standard library's, stays off the import path)."""
    path.write_text(f"#!/bin/sh\nexec {sys.executable} -P {Path(__file__).resolve()} --omit-flags '{','.join(omit_flags)}' "
                    f"--omit-fields '{','.join(omit_fields)}' \"$@\"\n")
    path.chmod(0o755)
    return path


def help_text(omit: set[str]) -> str:
    lines = ["usage: llama-server [options]", ""]
    for flag in [*REQUIRED_FLAGS, MMPROJ_FLAG[0]]:
        if flag in omit:
            continue
        about = "IP addresses to listen on, or UNIX socket paths ending in .sock" if flag == "--host" else "an option"
        lines.append(f"{flag:<32} {about}")
    return "\n".join(lines)


class Handler(BaseHTTPRequestHandler):
    omit: set[str] = set()

    def log_message(self, *args) -> None:
        pass

    def _json(self, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        if self.path == "/health":
            self._json({"status": "ok"})
        elif self.path == "/v1/models":
            self._json({"object": "list", "data": [{"id": "fake", "object": "model", "owned_by": "llamacpp"}]})
        elif self.path == "/props":
            self._json({"total_slots": 2, "default_generation_settings": {"n_ctx": 512}})
        else:
            self.send_error(404)

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
        if self.path == "/tokenize":
            parse = body.get("parse_special", True) or "parse_special" in self.omit
            self._json({"tokens": [SPECIAL] if parse else [27, 91, 437, 1406]})
        elif self.path == "/detokenize":
            self._json({"content": "<|endoftext|>"})
        elif self.path == "/completion":
            self._stream(body)
        else:
            self.send_error(404)

    def _stream(self, body: dict) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        events: list[dict] = []
        if body.get("return_progress") and "return_progress" not in self.omit:
            events.append({"stop": False, "content": "", "prompt_progress": {"total": 1, "cache": 0, "processed": 1}})
        for token in (42, 43):
            event = {"stop": False, "content": "x"}
            if body.get("return_tokens") and "return_tokens" not in self.omit:
                event["tokens"] = [token]
            events.append(event)
        slot = 0 if "id_slot" in self.omit else body.get("id_slot", 0)
        events.append({"stop": True, "content": "", "id_slot": slot, "tokens_evaluated": 1, "tokens_predicted": 2,
                       "stop_type": "limit", "timings": {"cache_n": 0}})
        for event in events:
            self.wfile.write(f"data: {json.dumps(event)}\n\n".encode())
        self.wfile.flush()


class UnixServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True


def main(argv: list[str]) -> int:
    omit_flags = set(filter(None, argv[argv.index("--omit-flags") + 1].split(",")))
    omit_fields = set(filter(None, argv[argv.index("--omit-fields") + 1].split(",")))
    args = argv[argv.index("--omit-fields") + 2:]
    if "--help" in args:
        print(help_text(omit_flags))
        return 0
    if "--list-devices" in args:
        print("Available devices:\n  (none)")
        return 0
    socket_path = args[args.index("--host") + 1]
    if os.path.exists(socket_path):
        os.unlink(socket_path)
    Handler.omit = omit_fields
    print("main: fake llama-server listening", flush=True)
    with UnixServer(socket_path, Handler) as server:
        server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
