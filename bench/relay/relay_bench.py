"""Maya's own cost per relayed token, in front of a replayed GPU engine (issue 23).

For each upstream format (llama-server, vLLM, SGLang) a replay upstream
(`replay.py`, C) answers with recorded streams; a `maya --engine upstream`
process relays them; a light client (`load_client.py`, its own process) reads
Maya's streamed Chat Completions (`include_usage`) and Responses (`store:
false`) at 1, 16 and 64 concurrent streams. Reported per row:

- Maya tok/s: completion tokens of finished requests ÷ the client's wall time;
- direct tok/s: the same client, same concurrency, straight at the replay
  upstream with Maya's own `/v1/completions` body (what the engine delivers);
- ratio: Maya ÷ direct;
- tok/event: tokens per SSE event Maya sent; 1 means an event per token, more means Maya coalesced
  tokens that arrived together (unthrottled, or when it falls behind): a cheaper regime than a GPU
  engine's steady per-token stream, which --rate gives;
- Maya µs/tok: the CPU time of the Maya process's threads (their
  /proc/PID/task/TID/schedstat; with --processes N, of all N) over the window
  ÷ tokens relayed; Maya cores: the same CPU ÷ wall;
- cores to keep up: Maya µs/tok × direct tok/s, the CPU Maya would need to
  relay everything the engine produces;
- replay µs/tok, client µs/tok: the replay's and the load client's own CPU per token.

Then the replay's own ceiling: the plain client at 64 streams, unthrottled.

    .venv/bin/python bench/relay/relay_bench.py [--formats llama-server,vllm,sglang] [--streams 1,16,64]
        [--tokens 512] [--seconds 5] [--rate 0] [--apis chat,responses] [--processes 1] [--maya-src DIR]

With --processes N, N Maya processes relay side by side (each on its own port,
one load client each, the streams shared out): what N workers would give.

A measurement sends requests back to back on every stream until --seconds
pass, then lets each stream finish its answer; all three processes share the
machine's cores, so on a small machine the client and the replay take some of
Maya's CPU (their shares are printed).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import orjson

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
for path in (str(ROOT), str(ROOT / "bench")):
    if path not in sys.path:
        sys.path.insert(0, path)

from maya_process import start_maya  # noqa: E402

from bench.relay.replay import FORMATS, ReplayUpstream  # noqa: E402
from maya_server.config import default_model_path  # noqa: E402
from maya_server.engine.base import SamplingParams  # noqa: E402
from maya_server.engine.upstream.wire import completion_request  # noqa: E402
from maya_server.model.hf_tokenizer import HfTokenizer  # noqa: E402
from tests.gguf_model_dir import write_model_dir  # noqa: E402

CLIENT = HERE / "load_client.py"
APIS = {  # path, count key in the final usage
    "chat": ("/v1/chat/completions", "completion_tokens"),
    "responses": ("/v1/responses", "output_tokens"),
    "direct": ("/v1/completions", "completion_tokens"),
}


@dataclass
class Row:
    format: str
    streams: int
    api: str
    tok_s: float
    direct_tok_s: float
    maya_us: float
    maya_cores: float
    replay_us: float
    client_us: float
    tok_per_event: float
    errors: int


def cpu_seconds(pid: int) -> float:
    """The CPU time one process's threads have run, from each `/proc/PID/task/TID/schedstat` (the scheduler's own
    nanosecond count). utime + stime in `/proc/PID/stat` is the same quantity sampled: the process is charged a
    whole 4 ms tick when it happens to run as one fires, so a relay that wakes for a few hundred µs per token
    gets a few dozen samples in a run, and figures that wander by 20% between runs. (A thread that has exited
    is no longer counted; Maya's, the replay's and the client's live as long as the process.)"""
    total = 0
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            total += int(Path(f"/proc/{pid}/task/{task}/schedstat").read_text().split()[0])
        except (OSError, IndexError, ValueError):
            pass  # the thread ended meanwhile
    return total / 1e9


def maya_command(maya_src: Path | None, maya_args: list[str]) -> list[str] | None:
    """The command that runs another checkout's `maya_server` (a `git archive` of main, say) with this venv's
    packages; None for the installed one."""
    if maya_src is None:
        return None
    return [sys.executable, "-c", f"import sys, runpy; sys.path.insert(0, {str(maya_src)!r}); "
            "runpy.run_module('maya_server', run_name='__main__')", *maya_args]


def run_client(url: str | list[str], api: str, body: bytes, streams: int, seconds: float,
               watch: tuple[int, ...] = ()) -> tuple[dict, list[float]]:
    """The load client in its own process (one per URL, the streams shared out among them, all at once); returns
    their report together and the CPU seconds each of `watch` spent meanwhile."""
    path, key = APIS[api]
    urls = [url] if isinstance(url, str) else url
    shares = [streams // len(urls) + (i < streams % len(urls)) for i in range(len(urls))]
    with tempfile.NamedTemporaryFile(suffix=".json") as body_file:
        body_file.write(body)
        body_file.flush()
        before = [cpu_seconds(pid) for pid in watch]
        clients = [subprocess.Popen([sys.executable, str(CLIENT), "--url", one, "--path", path, "--body-file",
                                     body_file.name, "--streams", str(share), "--seconds", str(seconds),
                                     "--count-key", key], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                   for one, share in zip(urls, shares) if share]
        outputs = [client.communicate() for client in clients]
        after = [cpu_seconds(pid) for pid in watch]
    reports = []
    for client, (out, err) in zip(clients, outputs):
        if client.returncode != 0:
            raise RuntimeError(f"the load client failed: {err.strip()[-2000:]}")
        reports.append(json.loads(out))
    report = {name: sum(r[name] for r in reports) for name in ("tokens", "requests", "errors", "events", "cpu_s")}
    report["wall_s"] = max(r["wall_s"] for r in reports)
    report["tok_s"] = report["tokens"] / report["wall_s"] if report["wall_s"] > 0 else 0.0
    return report, [b - a for a, b in zip(before, after)]


def bodies(meta: dict, tokens: int, kind: str, stop_ids: set[int]) -> dict[str, bytes]:
    params = SamplingParams(max_tokens=tokens, temperature=0)
    return {
        "chat": orjson.dumps({"model": "m", "messages": [{"role": "user", "content": meta["prompt_text"]}],
                              "max_tokens": tokens, "temperature": 0, "stream": True,
                              "stream_options": {"include_usage": True}}),
        "responses": orjson.dumps({"model": "m", "input": meta["prompt_text"], "max_output_tokens": tokens,
                                   "temperature": 0, "stream": True, "store": False}),
        "direct": orjson.dumps(completion_request(kind, meta["model"], meta["prompt_ids"], params, stop_ids)),
    }


def measure_format(fmt: str, opts: argparse.Namespace, tokenizer_dir: str, meta: dict, stop_ids: set[int]) -> tuple[list[Row], dict]:
    rows: list[Row] = []
    replay = ReplayUpstream(fmt, opts.rate, slots=64)
    url = replay.start()
    mayas: list[subprocess.Popen] = []
    maya_urls: list[str] = []
    try:
        maya_args = ["--engine", "upstream", "--upstream-url", url, "--tokenizer", tokenizer_dir,
                     "--family", "chatml", "--upstream-slots", "64", "--max-queue", "256"]
        for _ in range(opts.processes):
            process, maya_url = start_maya(*maya_args, command=maya_command(opts.maya_src, maya_args))
            mayas.append(process)
            maya_urls.append(maya_url)
        payloads = bodies(meta, opts.tokens, fmt, stop_ids)
        for api in opts.apis:  # warm up each path once (imports, first-request caches)
            run_client(maya_urls, api, bodies(meta, 16, fmt, stop_ids)[api], len(maya_urls), 0)
        for streams in opts.streams:
            direct, (replay_cpu,) = run_client(url, "direct", payloads["direct"], streams, opts.seconds, (replay.pid,))
            for api in opts.apis:
                report, (replay_cpu, *maya_cpus) = run_client(maya_urls, api, payloads[api], streams, opts.seconds,
                                                              (replay.pid, *(maya.pid for maya in mayas)))
                maya_cpu = sum(maya_cpus)
                tokens = max(report["tokens"], 1)
                rows.append(Row(fmt, streams, api, report["tok_s"], direct["tok_s"], maya_cpu / tokens * 1e6,
                                maya_cpu / report["wall_s"], replay_cpu / tokens * 1e6,
                                report["cpu_s"] / tokens * 1e6, tokens / max(report["events"], 1), report["errors"]))
                print(_line(rows[-1]), flush=True)
    finally:
        for maya in mayas:
            maya.terminate()
        for maya in mayas:
            maya.wait(timeout=30)
        replay.stop()
    ceiling_replay = ReplayUpstream(fmt, None, slots=64)
    ceiling_url = ceiling_replay.start()
    try:
        report, (replay_cpu,) = run_client(ceiling_url, "direct", payloads["direct"], 64, opts.seconds,
                                           (ceiling_replay.pid,))
    finally:
        ceiling_replay.stop()
    tokens = max(report["tokens"], 1)
    ceiling = {"format": fmt, "tok_s": report["tok_s"], "replay_us": replay_cpu / tokens * 1e6,
               "client_us": report["cpu_s"] / tokens * 1e6}
    return rows, ceiling


HEADER = (f"{'format':13s}{'streams':>8s} {'API':10s}{'Maya tok/s':>11s}{'direct tok/s':>13s}{'ratio':>8s}"
          f"{'tok/event':>10s}{'Maya µs/tok':>12s}{'Maya cores':>11s}{'cores to keep up':>17s}{'replay µs/tok':>14s}{'client µs/tok':>14s}")


def _line(row: Row) -> str:
    keep_up = row.maya_us * row.direct_tok_s / 1e6
    errors = f"  ({row.errors} errors)" if row.errors else ""
    return (f"{row.format:13s}{row.streams:8d} {row.api:10s}{row.tok_s:11.0f}{row.direct_tok_s:13.0f}"
            f"{row.tok_s / row.direct_tok_s:8.4f}{row.tok_per_event:10.2f}{row.maya_us:12.0f}{row.maya_cores:11.2f}{keep_up:17.1f}"
            f"{row.replay_us:14.2f}{row.client_us:14.1f}{errors}")


def main() -> None:
    args = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    args.add_argument("--formats", default=",".join(FORMATS))
    args.add_argument("--streams", default="1,16,64")
    args.add_argument("--tokens", type=int, default=512, help="max_tokens of each request")
    args.add_argument("--seconds", type=float, default=5, help="how long each measurement keeps sending")
    args.add_argument("--rate", type=float, default=0, help="tokens per second per stream (0: unlimited)")
    args.add_argument("--apis", default="chat,responses")
    args.add_argument("--processes", type=int, default=1, help="Maya processes side by side, each on its own port; "
                      "the streams are shared out among them (what several workers would give)")
    args.add_argument("--maya-src", type=Path, help="run Maya from this directory's maya_server package "
                      "(e.g. `git archive HEAD maya_server | tar -x -C DIR`), not the installed one")
    opts = args.parse_args()
    opts.formats = [f for f in opts.formats.split(",") if f]
    opts.streams = [int(n) for n in opts.streams.split(",") if n]
    opts.apis = [a for a in opts.apis.split(",") if a]
    for fmt in opts.formats:
        if fmt not in FORMATS:
            raise SystemExit(f"unknown format {fmt!r}")
    for api in opts.apis:
        if api not in ("chat", "responses"):
            raise SystemExit(f"unknown API {api!r}")
    meta = json.loads((HERE / "recordings" / "meta.json").read_text())
    rate = "unlimited" if not opts.rate else f"{opts.rate:g} tok/s per stream"
    if opts.maya_src:
        print(f"Maya from {opts.maya_src / 'maya_server'}")
    print(f"{os.cpu_count()} CPUs (shared by Maya, the replay and the client), {opts.processes} Maya process(es), "
          f"{opts.tokens} tokens per request, "
          f"{opts.seconds:g} s per measurement, replay rate {rate}, "
          f"load average {os.getloadavg()[0]:.2f}", flush=True)
    print(HEADER, flush=True)
    with tempfile.TemporaryDirectory() as work:
        tokenizer_dir = str(write_model_dir(default_model_path(), Path(work) / "smollm2"))
        tokenizer = HfTokenizer.from_model_dir(tokenizer_dir)
        stop_ids = {i for text in ("<|im_end|>", "<|endoftext|>") for i in tokenizer.encode(text, special=True)}
        rows, ceilings = [], []
        for fmt in opts.formats:
            format_rows, ceiling = measure_format(fmt, opts, tokenizer_dir, meta, stop_ids)
            rows += format_rows
            ceilings.append(ceiling)
    print()
    print(HEADER)
    for row in rows:
        print(_line(row))
    print()
    for ceiling in ceilings:
        print(f"replay ceiling, {ceiling['format']}: {ceiling['tok_s']:,.0f} tok/s (plain client, 64 streams, "
              f"unthrottled; replay {ceiling['replay_us']:.2f} µs/tok, client {ceiling['client_us']:.2f} µs/tok)")


if __name__ == "__main__":
    main()
