"""Maya's own CPU per token on the laptop path: the embedded engine (its llama-server child) at N streams.

Issue 23's third target: at 4 streams from the embedded child, Maya spends at
most 100 µs of its own CPU per relayed token. Here the engine is slow (tens of
tokens per second in all on a laptop's CPU), so every token is an event of its
own, and what is measured is Maya's fixed cost per event: reading the child's
event, decoding, parsing, assembling and writing the client's event.

A `maya` process serves the model (`--model`, default the shipped SmolLM2)
with `--slots N`; the light load client (`load_client.py`, its own process)
keeps N streamed requests going for `--seconds` per API. Reported per API:

- tok/s: completion tokens of the finished requests ÷ the client's wall time;
- tok/event: tokens per SSE event Maya sent (1 here: the child makes one at a time);
- Maya µs/tok: the CPU time of the Maya process alone (all its threads, not the child; `relay_bench.cpu_seconds`);
- engine µs/tok: the same for the llama-server child, for scale (it does the real work);
- Maya share: Maya's CPU ÷ (Maya's + the child's).

    .venv/bin/python bench/relay/laptop_relay.py [--streams 4] [--seconds 20] [--tokens 256]
        [--apis chat,responses] [--model GGUF] [--maya-src DIR]
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import orjson

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
for path in (str(ROOT), str(ROOT / "bench")):
    if path not in sys.path:
        sys.path.insert(0, path)

from maya_process import children, start_maya  # noqa: E402

from bench.relay.relay_bench import cpu_seconds, maya_command, run_client  # noqa: E402
from maya_server.config import default_model_path  # noqa: E402

PROMPT = "Write a long story about a lighthouse keeper who finds a map in a bottle. Take your time."


def bodies(tokens: int) -> dict[str, bytes]:
    return {
        "chat": orjson.dumps({"model": "m", "messages": [{"role": "user", "content": PROMPT}], "max_tokens": tokens,
                              "temperature": 0, "stream": True, "stream_options": {"include_usage": True}}),
        "responses": orjson.dumps({"model": "m", "input": PROMPT, "max_output_tokens": tokens, "temperature": 0,
                                   "stream": True, "store": False}),
    }


def main() -> None:
    args = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    args.add_argument("--streams", type=int, default=4)
    args.add_argument("--seconds", type=float, default=20)
    args.add_argument("--tokens", type=int, default=256, help="max_tokens of each request")
    args.add_argument("--apis", default="chat,responses")
    args.add_argument("--model", default=default_model_path())
    args.add_argument("--maya-src", type=Path, help="run Maya from this directory's maya_server package")
    opts = args.parse_args()
    maya_args = ["--model", opts.model, "--slots", str(opts.streams), "--ctx", "2048", "--cache-ram-mib", "0"]
    maya, url = start_maya(*maya_args, command=maya_command(opts.maya_src, maya_args), timeout=300)
    try:
        (engine,) = children(maya.pid)  # the embedded llama-server
        payloads = bodies(opts.tokens)
        print(f"{os.cpu_count()} CPUs (shared by Maya, its engine and the client), {Path(opts.model).name}, "
              f"{opts.streams} streams, {opts.tokens} tokens per request, {opts.seconds:g} s per API, "
              f"load average {os.getloadavg()[0]:.2f}" + (f", Maya from {opts.maya_src}" if opts.maya_src else ""))
        print(f"{'API':10s}{'tok/s':>8s}{'tok/event':>10s}{'Maya µs/tok':>12s}{'engine µs/tok':>14s}{'Maya share':>11s}")
        for api in [a for a in opts.apis.split(",") if a]:
            run_client(url, api, bodies(8)[api], 1, 0)  # warm the path up
            report, (maya_cpu, engine_cpu) = run_client(url, api, payloads[api], opts.streams, opts.seconds,
                                                        (maya.pid, engine))
            tokens = max(report["tokens"], 1)
            print(f"{api:10s}{report['tok_s']:8.1f}{tokens / max(report['events'], 1):10.2f}"
                  f"{maya_cpu / tokens * 1e6:12.0f}{engine_cpu / tokens * 1e6:14.0f}"
                  f"{maya_cpu / max(maya_cpu + engine_cpu, 1e-9):11.3f}", flush=True)
    finally:
        maya.terminate()
        maya.wait(timeout=60)


if __name__ == "__main__":
    main()
