"""Streaming overhead of Maya's upstream engine over the upstream itself.

Prints tokens/s of (a) llama-server's own `/v1/completions` stream, read with
httpx, and (b) a streamed chat completion and (c) a streamed response from a
`maya --engine upstream` process in front of that same llama-server, read with
the OpenAI SDK: the same token-id prompt (Maya's ChatML rendering of one user
message), the same max_tokens, greedy. The rounds take turns (never two at
once) and the medians are compared; (b)/(a) and (c)/(a) are the figures
(target >= 0.95). llama-server and both servers run in their own processes.

    .venv/bin/python bench/upstream_overhead.py [--tokens 200] [--rounds 5] [--threads 1]

llama-server comes from the cache `make llama-server` fills (maya_server/engine/llama_server/build.py).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx
import orjson
from openai import OpenAI

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from maya_process import start_maya  # noqa: E402

from maya_server.config import default_model_path  # noqa: E402
from maya_server.neutral.conversation import Conversation, Message, TextPart  # noqa: E402
from maya_server.families import get_family  # noqa: E402
from maya_server.engine.base import SamplingParams  # noqa: E402
from maya_server.engine.upstream.wire import NATIVE_PATH, native_completion_request  # noqa: E402
from maya_server.model.hf_tokenizer import HfTokenizer  # noqa: E402
from tests.gguf_model_dir import write_model_dir  # noqa: E402
from tests.llama_server import LlamaServer  # noqa: E402

PROMPT = "Write a long story about a lighthouse keeper and a storm."


def direct_rate(upstream_url: str, prompt_ids: list[int], tokens: int, *, as_maya: bool = False) -> tuple[float, int]:
    """llama-server's own stream; `as_maya` sends the very request Maya's engine sends (its own `/completion`,
    the generated ids in `tokens`)."""
    path = "/v1/completions"
    body = {"prompt": prompt_ids, "max_tokens": tokens, "temperature": 0, "top_k": 0, "min_p": 0, "top_p": 1.0,
            "stream": True, "stream_options": {"include_usage": True}}
    if as_maya:
        path = NATIVE_PATH
        body = native_completion_request(prompt_ids, SamplingParams(max_tokens=tokens, temperature=0))
    started = time.perf_counter()
    count = 0
    with httpx.stream("POST", upstream_url + path, json=body, timeout=120) as response:
        for line in response.iter_lines():
            if line.startswith("data: {"):
                event = orjson.loads(line[6:])
                usage = event.get("usage")
                count = usage["completion_tokens"] if usage else event.get("tokens_predicted") or count
    return count / (time.perf_counter() - started), count


def chat_rate(url: str, tokens: int) -> tuple[float, int]:
    client = OpenAI(base_url=url + "/v1", api_key="bench")
    started = time.perf_counter()
    usage = None
    for chunk in client.chat.completions.create(
        model="m", messages=[{"role": "user", "content": PROMPT}], temperature=0, max_tokens=tokens,
        stream=True, stream_options={"include_usage": True},
    ):
        usage = chunk.usage or usage
    return usage.completion_tokens / (time.perf_counter() - started), usage.completion_tokens


def responses_rate(url: str, tokens: int) -> tuple[float, int]:
    client = OpenAI(base_url=url + "/v1", api_key="bench")
    started = time.perf_counter()
    usage = None
    for event in client.responses.create(model="m", input=PROMPT, temperature=0, max_output_tokens=tokens, stream=True):
        if event.type in ("response.completed", "response.incomplete"):
            usage = event.response.usage
    return usage.output_tokens / (time.perf_counter() - started), usage.output_tokens


def main() -> None:
    args = argparse.ArgumentParser()
    args.add_argument("--tokens", type=int, default=200)
    args.add_argument("--rounds", type=int, default=5)
    args.add_argument("--threads", type=int, default=1,
                      help="llama-server decode threads; on 2 cores, 2 decode threads plus Maya plus the client "
                           "oversubscribe the machine and the ratio then measures CPU contention as well")
    opts = args.parse_args()
    model = default_model_path()
    with tempfile.TemporaryDirectory() as work:
        tokenizer_dir = str(write_model_dir(model, Path(work) / "smollm2"))
        conversation = Conversation(turns=(Message("user", (TextPart(PROMPT),)),))
        prompt_ids = get_family("chatml").render(conversation).token_ids(HfTokenizer.from_model_dir(tokenizer_dir))
        llama = LlamaServer(model, ctx=2048, parallel=1, threads=opts.threads)
        process = None
        try:
            process, url = start_maya("--engine", "upstream", "--upstream-url", llama.url, "--tokenizer", tokenizer_dir,
                                      "--family", "chatml")
            direct_rate(llama.url, prompt_ids, 8)  # warm up every path once
            chat_rate(url, 8)
            responses_rate(url, 16)
            results: dict[str, list[tuple[float, int]]] = {"direct": [], "direct_ids": [], "chat": [], "responses": []}
            for _ in range(opts.rounds):
                results["direct"].append(direct_rate(llama.url, prompt_ids, opts.tokens))
                results["direct_ids"].append(direct_rate(llama.url, prompt_ids, opts.tokens, as_maya=True))
                results["chat"].append(chat_rate(url, opts.tokens))
                results["responses"].append(responses_rate(url, opts.tokens))
        finally:
            if process is not None:
                process.terminate()
                process.wait(timeout=30)
            llama.stop()
    report(results, opts)


def report(results: dict[str, list[tuple[float, int]]], opts: argparse.Namespace) -> None:
    direct = statistics.median(rate for rate, _ in results["direct"])
    print(f"threads={opts.threads} tokens={opts.tokens} rounds={opts.rounds} (medians)")
    print(f"{'llama-server /v1/completions:':40s}{direct:7.1f} tok/s  ({results['direct'][0][1]} tokens)")
    with_ids = statistics.median(rate for rate, _ in results["direct_ids"])
    print(f"{'llama-server, Maya request (/completion):':40s}{with_ids:7.1f} tok/s  ratio to plain {with_ids / direct:.3f}")
    for name, label in (("chat", "maya upstream /v1/chat/completions:"), ("responses", "maya upstream /v1/responses:")):
        rate = statistics.median(r for r, _ in results[name])
        print(f"{label:40s}{rate:7.1f} tok/s  ({results[name][0][1]} tokens)  ratio {rate / direct:.3f} (target >= 0.95), "
              f"{rate / with_ids:.3f} to the same request sent directly")


if __name__ == "__main__":
    main()
