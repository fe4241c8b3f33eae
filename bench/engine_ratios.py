"""The embedded engine against llama-server alone: four ratios, measured in one run.

1. one streamed request through Maya ÷ the same request to llama-server alone
   (target ≥ 0.97);
2. aggregate streamed tokens/s of 4 concurrent requests through Maya ÷ the
   same 4 to `llama-server -np 4` alone (target ≥ 0.90);
3. continuation TTFT (~1500-token history, two conversations interleaved) ÷
   cold (`bench/continuation_ttft.py`; target ≤ 0.2);
4. time to first token of the 4th of 4 simultaneous requests ÷ the 1st (reported).

Same GGUF (SmolLM2-135M), same threads, same slots (4 × 2048 tokens), same
token-id prompts (Maya's ChatML rendering), greedy. Maya is `python -m
maya_server` in its own process (its child is the llama-server it runs); the
baseline is a second llama-server process with the same settings. Both are read
by the same light client (httpx, counting the final usage), so the client's own
parsing weighs the same on both sides; rounds take turns, medians compared.

    .venv/bin/python bench/engine_ratios.py [--tokens 128] [--rounds 3] [--threads 1]
    .venv/bin/python bench/engine_ratios.py --model ~/.cache/maya/test-models/glm-5.1-*.gguf

With `--model` (e.g. the GLM-5.1 test model of `tests/family_models.py`) ratios 1, 2 and 4 are measured on that
GGUF: its family's rendering, ids from llama-server's own tokenizer (the baseline's `/tokenize`), the same
random-weight model on both sides; the continuation ratio is SmolLM2's alone.

With `--gpu-layers N` both sides offload N layers (`-ngl N`, flash attention as Maya's child runs it on a GPU),
ratios 1, 2 and 4 are measured, and Maya's `/v1/status` placement (devices, layers offloaded) is printed:
`bench/gpu_check.sh` runs it on a machine with an NVIDIA GPU.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
from pathlib import Path

import httpx
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from continuation_ttft import COLD_FLAGS, WARM_FLAGS, make_rounds, measure  # noqa: E402
from continuation_ttft import report as report_continuation  # noqa: E402
from maya_process import start_maya  # noqa: E402

from maya_server.config import default_model_path  # noqa: E402
from maya_server.neutral.conversation import Conversation, Message, TextPart  # noqa: E402
from maya_server.families import get_family  # noqa: E402
from maya_server.engine.llama_server.child import FLASH_ATTENTION, GPU_FLASH_ATTENTION  # noqa: E402
from maya_server.engine.llama_server.tokenizer import LlamaServerTokenizer, TokenCache  # noqa: E402
from maya_server.families.detection import family_from_template  # noqa: E402
from maya_server.model.gguf_metadata import read_gguf_metadata  # noqa: E402
from maya_server.model.gguf_vocabulary import GgufVocabulary  # noqa: E402
from tests.gguf_model_dir import smollm2_tokenizer  # noqa: E402
from tests.llama_server import LlamaServer  # noqa: E402

SLOTS, CTX = 4, 2048
PROMPTS = tuple(f"Write a long story about a lighthouse keeper, a storm and {thing}."
                for thing in ("a cat", "a lost ship", "an old map", "a broken lamp"))


class Stream:
    """One streamed request, read line by line: its token count, time to first token and end."""

    def __init__(self, url: str, path: str, body: dict) -> None:
        self.url, self.path, self.body = url, path, body
        self.tokens = 0
        self.first: float | None = None
        self.ended = 0.0

    def run(self, started: float) -> None:
        with httpx.stream("POST", self.url + self.path, json=self.body, timeout=300) as response:
            for line in response.iter_lines():
                if not line.startswith("data: {"):
                    continue
                if self.first is None:
                    chunk = orjson.loads(line[6:])
                    deltas = [c.get("text") or c.get("delta") or {} for c in chunk.get("choices", [])]
                    if any(isinstance(d, str) or d.get("content") or d.get("reasoning_content") for d in deltas):
                        self.first = time.perf_counter() - started
                if '"usage":{' in line:
                    self.tokens = orjson.loads(line[6:])["usage"]["completion_tokens"] or self.tokens
        self.ended = time.perf_counter() - started


def maya_stream(url: str, prompt: str, tokens: int) -> Stream:
    return Stream(url, "/v1/chat/completions", {
        "model": "m", "messages": [{"role": "user", "content": prompt}], "temperature": 0, "max_tokens": tokens,
        "stream": True, "stream_options": {"include_usage": True}})


def direct_stream(url: str, prompt_ids: list[int], tokens: int) -> Stream:
    return Stream(url, "/v1/completions", {
        # the sampling Maya asks for (upstream/wire.py's _sampling): top_p 1 matters, llama-server's default 0.95 sorts
        # the whole vocabulary every token (a 150k GLM vocabulary then decodes at a third of the speed)
        "prompt": prompt_ids, "max_tokens": tokens, "temperature": 0, "top_k": 0, "min_p": 0, "top_p": 1.0,
        "stream": True, "stream_options": {"include_usage": True}})


def run_together(streams: list[Stream]) -> tuple[float, list[float]]:
    """Aggregate tokens/s of streams started at once, and their times to first token (by request)."""
    started = time.perf_counter()
    threads = [threading.Thread(target=s.run, args=(started,)) for s in streams]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return sum(s.tokens for s in streams) / max(s.ended for s in streams), [s.first or 0.0 for s in streams]


def prompt_ids(model: str, llama_url: str, prompt: str) -> list[int]:
    """The ids Maya sends for one user message: the model's family's rendering, tokenized as the embedded engine
    tokenizes (SmolLM2: its rebuilt tokenizer, proven equal; any other GGUF: the baseline llama-server's own)."""
    metadata = read_gguf_metadata(model)
    family = get_family(family_from_template(metadata.get("tokenizer.chat_template")) or "glm")
    prompt_text = family.render(Conversation(turns=(Message("user", (TextPart(prompt),)),)))
    if model == default_model_path():
        return prompt_text.token_ids(smollm2_tokenizer(model))
    tokenizer = LlamaServerTokenizer(GgufVocabulary(metadata), httpx.Client(base_url=llama_url), TokenCache(1 << 20))
    return prompt_text.token_ids(tokenizer)


def main() -> None:
    args = argparse.ArgumentParser()
    args.add_argument("--tokens", type=int, default=128)
    args.add_argument("--rounds", type=int, default=3)
    args.add_argument("--threads", type=int, default=1,
                      help="llama-server decode threads (both sides); on 2 cores, 2 decode threads plus Maya plus the "
                           "client oversubscribe the machine and the ratios then measure CPU contention as well")
    args.add_argument("--continuation-rounds", type=int, default=2)
    args.add_argument("--model", help="another GGUF (default: the shipped SmolLM2)")
    args.add_argument("--gpu-layers", type=int, help="layers both sides offload to a GPU (default: the CPU only)")
    opts = args.parse_args()
    model = opts.model or default_model_path()
    on_gpu = bool(opts.gpu_layers)
    offload = ("--n-gpu-layers", str(opts.gpu_layers)) if opts.gpu_layers is not None else ()
    llama = LlamaServer(model, ctx=SLOTS * CTX, parallel=SLOTS, threads=opts.threads,  # the kernels Maya's child runs
                        extra_args=("--flash-attn", GPU_FLASH_ATTENTION if on_gpu else FLASH_ATTENTION, *offload))
    ids = [prompt_ids(model, llama.url, p) for p in PROMPTS]
    process, url = start_maya("--model", model, "--ctx", str(CTX), "--slots", str(SLOTS), "--threads", str(opts.threads),
                              *(["--gpu-layers", str(opts.gpu_layers)] if opts.gpu_layers is not None else []),
                              timeout=600 if on_gpu else 60)
    one, four, ttft_ratio = {"maya": [], "direct": []}, {"maya": [], "direct": []}, []
    try:
        run_together([maya_stream(url, PROMPTS[0], 8), direct_stream(llama.url, ids[0], 8)])  # warm up both
        for _ in range(opts.rounds):
            one["direct"].append(run_together([direct_stream(llama.url, ids[0], opts.tokens)])[0])
            one["maya"].append(run_together([maya_stream(url, PROMPTS[0], opts.tokens)])[0])
            four["direct"].append(run_together([direct_stream(llama.url, i, opts.tokens) for i in ids])[0])
            rate, ttfts = run_together([maya_stream(url, p, opts.tokens) for p in PROMPTS])
            four["maya"].append(rate)
            ttft_ratio.append(max(ttfts) / min(ttfts))
        if on_gpu:
            print("maya's placement:", orjson.dumps(httpx.get(url + "/v1/status").json()["engine"]["llama_server"]).decode())
    finally:
        process.terminate()
        process.wait(timeout=30)
        llama.stop()
    print(f"threads={opts.threads} tokens={opts.tokens} rounds={opts.rounds} slots={SLOTS}x{CTX} (medians)")
    for name, rates, target in (("1 stream", one, 0.97), ("4 concurrent streams", four, 0.90)):
        maya, direct = statistics.median(rates["maya"]), statistics.median(rates["direct"])
        print(f"{name + ':':24s} maya {maya:7.1f} tok/s  llama-server alone {direct:7.1f} tok/s  "
              f"ratio {maya / direct:.3f} (target >= {target})")
    print(f"TTFT of the 4th of 4 simultaneous requests / the 1st: {statistics.median(ttft_ratio):.2f}")
    if opts.model or on_gpu:
        return
    rounds = make_rounds(model, opts.continuation_rounds, 1500)
    opts.api = "stored"
    warm = measure(model, opts, WARM_FLAGS, rounds)
    cold = measure(model, opts, COLD_FLAGS, rounds)
    report_continuation(warm, cold)


if __name__ == "__main__":
    main()
