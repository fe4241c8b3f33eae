"""Maya's CPU per relayed token against the floor of any Python relay and of its framework, at a slow engine's rate.

Issue 23's laptop target asks for at most 100 µs of Maya's CPU per token at 4
streams from the embedded child, where every token is an event of its own
(`laptop_relay.py` measures that with the real child). This bench asks what
part of such a figure any Python relay pays on this machine: the replay
upstream (llama-server's `/completion` format) streams at `--rate` tokens per
second per stream, and the same light load client keeps `--streams` streamed
Chat requests going through, in turn:

- **bare**: `bare_relay.py`, the least a relay does per token on the same
  event loop (one read, one JSON parse, one JSON dump, one write);
- **framework**: `framework_relay.py`, the same work inside Maya's framework
  (uvicorn, a Starlette streaming response, a task per answer, Maya's lean
  upstream reader), none of Maya's pipeline: what the framework costs;
- **maya**: Maya's upstream engine (`--engine upstream`, ChatML, SmolLM2's
  tokenizer), the whole pipeline.

`--busy N` runs N busy-loop processes meanwhile, as the embedded engine's
threads keep the cores busy on a laptop (the relay then never finds an idle
core, which changes what each wake-up costs). Reported per relay: tok/s,
tokens per event, CPU µs per token (the relay process's threads,
`relay_bench.cpu_seconds`), and each ÷ bare.

    .venv/bin/python bench/relay/floor_bench.py [--rate 20] [--streams 4] [--seconds 15] [--busy 0,2]
        [--maya-src DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
for path in (str(ROOT), str(ROOT / "bench")):
    if path not in sys.path:
        sys.path.insert(0, path)

from maya_process import start_maya  # noqa: E402

from bench.relay.relay_bench import bodies, cpu_seconds, maya_command, run_client  # noqa: E402
from bench.relay.replay import ReplayUpstream  # noqa: E402
from maya_server.config import default_model_path  # noqa: E402
from tests.gguf_model_dir import write_model_dir  # noqa: E402


def start_bare(upstream_port: int, tokens: int) -> tuple[subprocess.Popen, str]:
    process = subprocess.Popen([sys.executable, str(HERE / "bare_relay.py"), "--upstream-port", str(upstream_port),
                                "--tokens", str(tokens)], stdout=subprocess.PIPE, text=True)
    line = process.stdout.readline()  # type: ignore[union-attr]
    if not line.startswith("port "):
        process.kill()
        raise RuntimeError("the bare relay did not start")
    return process, f"http://127.0.0.1:{int(line.split()[1])}"


def start_framework(upstream_port: int, tokens: int) -> tuple[subprocess.Popen, str]:
    return start_maya(command=[sys.executable, str(HERE / "framework_relay.py"), "--upstream-port", str(upstream_port),
                               "--tokens", str(tokens)])


def measure(url: str, pid: int, body: bytes, opts: argparse.Namespace, busy: int) -> dict:
    run_client(url, "chat", body, 1, 0)  # warm the path up
    loops = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(busy)]
    try:
        report, (cpu,) = run_client(url, "chat", body, opts.streams, opts.seconds, (pid,))
    finally:
        for loop in loops:
            loop.kill()
            loop.wait()
    tokens = max(report["tokens"], 1)
    return {"tok_s": report["tok_s"], "tok_event": tokens / max(report["events"], 1), "errors": report["errors"],
            "cpu": cpu / tokens * 1e6}


def main() -> None:
    args = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    args.add_argument("--rate", type=float, default=20, help="tokens per second per stream")
    args.add_argument("--streams", type=int, default=4)
    args.add_argument("--seconds", type=float, default=15)
    args.add_argument("--tokens", type=int, default=256, help="max_tokens of each request")
    args.add_argument("--busy", default="0,2", help="busy-loop processes meanwhile, one run per value")
    args.add_argument("--maya-src", type=Path, help="run Maya from this directory's maya_server package")
    opts = args.parse_args()
    meta = json.loads((HERE / "recordings" / "meta.json").read_text())
    body = bodies(meta, opts.tokens, "llama-server", set())["chat"]
    print(f"{os.cpu_count()} CPUs, replay at {opts.rate:g} tok/s per stream, {opts.streams} streams, "
          f"{opts.seconds:g} s each, load average {os.getloadavg()[0]:.2f}", flush=True)
    print(f"{'busy':>4s} {'relay':10s}{'tok/s':>8s}{'tok/event':>10s}{'CPU µs/tok':>11s}{'÷ bare':>8s}", flush=True)
    replay = ReplayUpstream("llama-server", opts.rate, slots=64)
    replay.start()
    processes: list[subprocess.Popen] = []
    try:
        with tempfile.TemporaryDirectory() as work:
            tokenizer_dir = str(write_model_dir(default_model_path(), Path(work) / "smollm2"))
            bare, bare_url = start_bare(replay.port, opts.tokens)
            processes.append(bare)
            framework, framework_url = start_framework(replay.port, opts.tokens)
            processes.append(framework)
            maya_args = ["--engine", "upstream", "--upstream-url", replay.url or "", "--tokenizer", tokenizer_dir,
                         "--family", "chatml", "--upstream-slots", "64"]
            maya, maya_url = start_maya(*maya_args, command=maya_command(opts.maya_src, maya_args))
            processes.append(maya)
            for busy in [int(n) for n in opts.busy.split(",") if n]:
                floor = None
                relays = (("bare", bare_url, bare.pid), ("framework", framework_url, framework.pid),
                          ("maya", maya_url, maya.pid))
                for name, url, pid in relays:
                    row = measure(url, pid, body, opts, busy)
                    floor = floor or row["cpu"]
                    errors = f"  ({row['errors']} errors)" if row["errors"] else ""
                    print(f"{busy:4d} {name:10s}{row['tok_s']:8.1f}{row['tok_event']:10.2f}{row['cpu']:11.0f}"
                          f"{row['cpu'] / floor:8.2f}{errors}", flush=True)
    finally:
        for process in processes:
            process.terminate()
            process.wait(timeout=30)
        replay.stop()


if __name__ == "__main__":
    main()
