"""Tokens/s through Maya in front of a real vLLM, against vLLM read directly, at 1 and 4 streams.

The direct client sends vLLM Maya's own `/v1/completions` body (the ChatML token ids, `logprobs: 1`,
`return_tokens_as_token_ids`, greedy); Maya (`--engine upstream`, its own process) gets the same prompt as a
streamed chat completion. N streams run at once; a round's tok/s is the completion tokens of all N answers (each
answer's final usage) ÷ the round's wall time. Direct and Maya rounds take turns, never at once; the medians are
compared (ratio = Maya ÷ direct). On the two-core dev machine vLLM, Maya and the client share the cores.

    .venv/bin/python bench/relay/vllm_ratio.py --vllm-url URL [--streams 1,4] [--tokens 128] [--rounds 3]
    .venv/bin/python bench/relay/vllm_ratio.py --vllm          # starts vLLM itself (tests/vllm_server.py)
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import orjson
from openai import OpenAI

ROOT = Path(__file__).resolve().parents[2]
for path in (ROOT, ROOT / "bench"):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

from maya_process import start_maya  # noqa: E402

from bench.relay.record import PROMPT, prompt_ids, stop_ids  # noqa: E402
from maya_server.config import default_model_path  # noqa: E402
from maya_server.engine.base import SamplingParams  # noqa: E402
from maya_server.engine.upstream.wire import completion_request  # noqa: E402
from tests.gguf_model_dir import smollm2_tokenizer, write_model_dir  # noqa: E402


def direct_answer(url: str, body: bytes) -> int:
    count = 0
    with httpx.stream("POST", url + "/v1/completions", content=body, timeout=300,
                      headers={"content-type": "application/json"}) as response:
        for line in response.iter_lines():
            if line.startswith("data: {") and '"usage"' in line:
                usage = orjson.loads(line[6:]).get("usage")
                count = usage["completion_tokens"] if usage else count
    return count


def maya_answer(url: str, tokens: int) -> int:
    client = OpenAI(base_url=url + "/v1", api_key="bench", timeout=300)
    usage = None
    for chunk in client.chat.completions.create(
        model="m", messages=[{"role": "user", "content": PROMPT}], temperature=0, max_tokens=tokens,
        stream=True, stream_options={"include_usage": True},
    ):
        usage = chunk.usage or usage
    return usage.completion_tokens


def round_rate(answer, streams: int) -> float:
    started = time.perf_counter()
    with ThreadPoolExecutor(streams) as pool:
        counts = list(pool.map(lambda _: answer(), range(streams)))
    return sum(counts) / (time.perf_counter() - started)


def measure(vllm_url: str, opts: argparse.Namespace) -> None:
    tokenizer = smollm2_tokenizer()
    ids = prompt_ids(tokenizer)
    model = httpx.get(vllm_url + "/v1/models", timeout=10).json()["data"][0]["id"]
    body = orjson.dumps(completion_request("vllm", model, ids, SamplingParams(max_tokens=opts.tokens, temperature=0),
                                           stop_ids(tokenizer)))
    with tempfile.TemporaryDirectory() as work:
        tokenizer_dir = str(write_model_dir(default_model_path(), Path(work) / "smollm2"))
        process, maya_url = start_maya("--engine", "upstream", "--upstream-url", vllm_url, "--tokenizer",
                                       tokenizer_dir, "--family", "chatml")
        try:
            direct_answer(vllm_url, body)  # warm up both paths once
            maya_answer(maya_url, 8)
            print(f"tokens={opts.tokens} rounds={opts.rounds} (medians; Maya: streamed chat completions)")
            for streams in opts.streams:
                direct, maya = [], []
                for _ in range(opts.rounds):
                    direct.append(round_rate(lambda: direct_answer(vllm_url, body), streams))
                    maya.append(round_rate(lambda: maya_answer(maya_url, opts.tokens), streams))
                d, m = statistics.median(direct), statistics.median(maya)
                print(f"{streams} stream(s): vLLM direct {d:7.1f} tok/s  Maya {m:7.1f} tok/s  ratio {m / d:.2f}",
                      flush=True)
        finally:
            process.terminate()
            process.wait(timeout=30)


def main() -> None:
    args = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    args.add_argument("--vllm-url")
    args.add_argument("--vllm", action="store_true", help="start vLLM here (tests/vllm_server.py), stop it after")
    args.add_argument("--streams", type=lambda s: [int(n) for n in s.split(",")], default=[1, 4])
    args.add_argument("--tokens", type=int, default=128)
    args.add_argument("--rounds", type=int, default=3)
    opts = args.parse_args()
    if opts.vllm_url:
        measure(opts.vllm_url.rstrip("/"), opts)
        return
    if not opts.vllm:
        args.error("give --vllm-url URL or --vllm")
    from tests.vllm_server import VllmServer, cache_root, ensure_model, ensure_venv

    bin_dir = ensure_venv()
    server = VllmServer(bin_dir, ensure_model(bin_dir), log_path=cache_root() / "vllm-serve.log")
    try:
        measure(server.url, opts)
    finally:
        server.stop()


if __name__ == "__main__":
    main()
