"""An agent trace: more concurrent sessions than slots, long shared instructions, several short turns.

Each of `sessions` conversations opens with the same ~1.2k-token instructions
(a system message) and takes `turns` turns: a ~30-token user message, a
`answer_tokens`-token answer. All sessions run at once (one thread each, the
real OpenAI SDK, streaming), so with 8 sessions on 4 slots every session's
slot is taken by another session between its turns. A continuation (turn 2
onward) then gets from cache only what the engine kept of its own history:
its figure is `cached_tokens / prompt_tokens` over all continuations (from each
response's usage) and their median time to first token (the first text delta).

Measured against llama-server alone (the same binary Maya builds, on the same
model with the same slots, context per slot, RAM prompt cache and attention
kernel, driven on its own `/v1/chat/completions`; `--alone-flash-attn auto`
runs it as llama-server starts when not told) and against Maya (`python -m
maya_server`, its embedded engine) for three ways of continuing: Chat Completions with the
whole history, Responses with the whole history (`store: false`), Responses
with `previous_response_id` (Maya holds the history). Printed: each one's
continuation cached ratio (target ≥ 0.95), its median continuation TTFT ÷
llama-server alone's (target ≤ 0.8), and its opening turns' mean TTFT (an order
of service that favours continuations moves their wait there).
`--prefill-concurrency 0,1` runs Maya both with its prompts sent at once
(the default) and one at a time; `--rounds N` repeats
alone and every Maya run in turn, since runs minutes apart on a shared machine
differ by more than the effects measured.

    .venv/bin/python bench/agent_trace.py [--sessions 8] [--turns 4] [--slots 4] [--apis chat,responses,stored]
        [--prefill-concurrency 0,1] [--rounds N]

Importable: `run_trace(base_url, api)` runs one trace against any server (a
Maya with replicas, llama-server itself for `chat`) and returns a `TraceResult`.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from openai import OpenAI

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from maya_process import start_maya  # noqa: E402
from streamed_chat import stream_chat  # noqa: E402

from maya_server.config import default_model_path  # noqa: E402
from maya_server.engine.llama_server.child import FLASH_ATTENTION  # noqa: E402
from tests.gguf_model_dir import smollm2_tokenizer  # noqa: E402
from tests.llama_server import LlamaServer  # noqa: E402

APIS = ("chat", "responses", "stored")
WORDS = (
    "harbor lantern river meadow quarry copper violin orchard tunnel glacier ledger compass falcon "
    "ember canyon thistle beacon granite willow saddle marble cobalt anchor prairie sparrow cedar "
    "thunder velvet ribbon citadel"
).split()
RULES = (
    "Read the files the user names before changing them.", "Prefer small, reviewable changes.",
    "Explain each change in one sentence.", "Never invent an API; say when you are unsure.",
    "Keep tests honest: a test must be able to fail.", "Answer in plain English, briefly.",
)


@dataclass(frozen=True)
class Turn:
    session: int
    index: int
    """0 for a session's opening turn, 1.. for its continuations."""
    ttft: float
    prompt_tokens: int
    cached_tokens: int


@dataclass
class TraceResult:
    api: str
    turns: list[Turn] = field(default_factory=list)
    wall: float = 0.0

    @property
    def continuations(self) -> list[Turn]:
        return [t for t in self.turns if t.index > 0]

    @property
    def cached_ratio(self) -> float:
        """Continuations' cached prompt tokens ÷ their prompt tokens, summed over all of them."""
        turns = self.continuations
        return sum(t.cached_tokens for t in turns) / max(1, sum(t.prompt_tokens for t in turns))

    @property
    def median_ttft(self) -> float:
        return statistics.median(t.ttft for t in self.continuations)

    @property
    def opening_ttft(self) -> float:
        """The mean opening turn's TTFT: what an order of service that favours continuations costs the others."""
        return statistics.mean(t.ttft for t in self.turns if t.index == 0)

    @property
    def reprocessed(self) -> float:
        """The median continuation's prompt tokens evaluated again (not from cache)."""
        return statistics.median(t.prompt_tokens - t.cached_tokens for t in self.continuations)


def instructions(tokens: int, count_tokens) -> str:
    """The shared system text: the same for every session (and every run), about `tokens` tokens."""
    rng = random.Random(7)
    lines = ["You are a coding agent working in a repository."]
    while count_tokens("\n".join(lines)) < tokens:
        lines.append(f"Rule {len(lines)}: {rng.choice(RULES)} "
                     + " ".join(rng.choice(WORDS) for _ in range(rng.randrange(8, 16))) + ".")
    return "\n".join(lines)


def user_message(session: int, turn: int, tokens: int, count_tokens) -> str:
    """A session's own message for one turn, about `tokens` tokens, different for every session and turn."""
    rng = random.Random(1000 * session + turn)
    words = [f"Session {session}, step {turn}: look at"]
    while count_tokens(" ".join(words)) < tokens - 4:
        words.append(rng.choice(WORDS))
    return " ".join(words) + " and report."


class Session:
    """One conversation continued by `api`; `say` returns the turn's TTFT and usage."""

    def __init__(self, client: OpenAI, api: str, system: str, answer_tokens: int, model: str) -> None:
        self.client, self.api, self.answer_tokens, self.model = client, api, answer_tokens, model
        self.history: list[dict] = [{"role": "system", "content": system}]
        self.system = system
        self.previous: str | None = None

    def say(self, text: str) -> tuple[float, int, int]:
        if self.api == "chat":
            ttft, answer, usage = self._chat(text)
            return ttft, usage.prompt_tokens, usage.prompt_tokens_details.cached_tokens
        ttft, answer, usage = self._responses(text, time.perf_counter())
        return ttft, usage.input_tokens, usage.input_tokens_details.cached_tokens

    def _chat(self, text: str):
        self.history.append({"role": "user", "content": text})
        ttft, answer, usage = stream_chat(self.client, self.model, self.history, self.answer_tokens)
        self.history.append({"role": "assistant", "content": answer})
        return ttft, answer, usage

    def _responses(self, text: str, started: float):
        stored = self.api == "stored"
        if stored:  # instructions never carry over from the previous response: sent every turn
            extra = {"instructions": self.system, **({"previous_response_id": self.previous} if self.previous else {})}
            request_input: object = text
        else:
            self.history.append({"role": "user", "content": text})
            extra, request_input = {}, self.history
        ttft, pieces, final = None, [], None
        for event in self.client.responses.create(
            model=self.model, input=request_input, temperature=0, max_output_tokens=self.answer_tokens,
            store=stored, stream=True, **extra,
        ):
            if event.type == "response.output_text.delta":
                ttft = ttft if ttft is not None else time.perf_counter() - started
                pieces.append(event.delta)
            elif event.type in ("response.completed", "response.incomplete"):
                final = event.response
        answer = "".join(pieces)
        if stored:
            self.previous = final.id
        else:
            self.history.append({"role": "assistant", "content": answer})
        return ttft if ttft is not None else time.perf_counter() - started, answer, final.usage


@dataclass(frozen=True)
class TraceShape:
    sessions: int = 8
    turns: int = 4
    instruction_tokens: int = 1200
    user_tokens: int = 30
    answer_tokens: int = 24


def run_trace(base_url: str, api: str, shape: TraceShape = TraceShape(), *, model: str = "m",
              count_tokens=None, api_key: str = "bench") -> TraceResult:
    """Run the trace's sessions at once against `base_url` (a server root, `/v1` is added) with `api`
    (`chat`, `responses` with the whole history, `stored` with `previous_response_id`); every session's turns
    in order, each after the previous answer. `count_tokens` sizes the texts (default: SmolLM2's tokenizer)."""
    if count_tokens is None:
        tokenizer = smollm2_tokenizer(default_model_path())
        count_tokens = lambda text: len(tokenizer.encode(text, special=False))  # noqa: E731
    system = instructions(shape.instruction_tokens, count_tokens)
    messages = [[user_message(s, t, shape.user_tokens, count_tokens) for t in range(shape.turns)]
                for s in range(shape.sessions)]
    result, lock, failures = TraceResult(api), threading.Lock(), []

    def session(index: int) -> None:
        client = OpenAI(base_url=base_url + "/v1", api_key=api_key, timeout=900, max_retries=0)
        conversation = Session(client, api, system, shape.answer_tokens, model)
        try:
            for turn, text in enumerate(messages[index]):
                ttft, prompt, cached = conversation.say(text)
                with lock:
                    result.turns.append(Turn(index, turn, ttft, prompt, cached))
        except Exception as exc:  # reported after the others finish
            failures.append(exc)

    started = time.perf_counter()
    threads = [threading.Thread(target=session, args=(i,)) for i in range(shape.sessions)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    result.wall = time.perf_counter() - started
    if failures:
        raise failures[0]
    return result


def llama_server_alone(model: str, slots: int, ctx: int, threads: int, cache_ram_mib: int,
                       log_path: Path | None = None, flash_attn: str = FLASH_ATTENTION) -> LlamaServer:
    """llama-server as Maya's embedded engine starts it (slots × ctx, separate KV per slot, the same RAM prompt
    cache and attention kernel), listening on 127.0.0.1 with its own OpenAI API."""
    return LlamaServer(model, ctx=slots * ctx, parallel=slots, threads=threads, log_path=log_path,
                       extra_args=("--no-kv-unified", "--cache-ram", str(cache_ram_mib), "--flash-attn", flash_attn))


def describe(name: str, result: TraceResult, baseline: TraceResult | None) -> str:
    line = (f"{name:46s} cached ratio {result.cached_ratio:.3f}  re-evaluated {result.reprocessed:5.0f} tok"
            f"  TTFT {result.median_ttft * 1000:8.0f} ms  openings' mean TTFT {result.opening_ttft:5.1f} s"
            f"  wall {result.wall:6.1f} s")
    if baseline is not None:
        line += f"  TTFT ratio {result.median_ttft / baseline.median_ttft:.3f}"
    return line


def maya_name(api: str, prefill: str, prefills: list[str]) -> str:
    name = {"chat": "Maya chat", "responses": "Maya responses (full history)",
            "stored": "Maya responses (previous_response_id)"}[api]
    return name if len(prefills) == 1 else f"{name}, prefill {prefill}"


def main() -> None:
    args = argparse.ArgumentParser()
    args.add_argument("--sessions", type=int, default=8)
    args.add_argument("--turns", type=int, default=4)
    args.add_argument("--slots", type=int, default=4)
    args.add_argument("--ctx", type=int, default=2048, help="context per slot")
    args.add_argument("--threads", type=int, default=1,
                      help="llama-server threads (both sides); on a shared two-core machine 2 threads oversubscribe it")
    args.add_argument("--cache-ram-mib", type=int, default=2048)
    args.add_argument("--apis", default=",".join(APIS))
    args.add_argument("--prefill-concurrency", default="0",
                      help="Maya's --prefill-concurrency, a comma-separated list: each value is run (e.g. 0,1)")
    args.add_argument("--rounds", type=int, default=1,
                      help="alone and every Maya run, in turn, this many times: each round's ratios are to its own "
                           "alone run, and with several rounds their medians are printed too")
    args.add_argument("--llama-log", type=Path, help="keep the baseline llama-server's log here")
    args.add_argument("--alone-flash-attn", default=FLASH_ATTENTION, choices=("on", "off", "auto"),
                      help="the baseline's --flash-attn: Maya's child's by default (the same kernel on both sides); "
                           "auto is what llama-server does when not told")
    opts = args.parse_args()
    model = default_model_path()
    shape = TraceShape(sessions=opts.sessions, turns=opts.turns)
    prefills = [p for p in opts.prefill_concurrency.split(",") if p]
    ratios: dict[str, list[float]] = {}
    print(f"sessions={shape.sessions} turns={shape.turns} slots={opts.slots}x{opts.ctx} threads={opts.threads} "
          f"cache-ram={opts.cache_ram_mib} MiB alone's flash-attn={opts.alone_flash_attn} "
          "(ratio target >= 0.95, TTFT ratio target <= 0.8)", flush=True)
    for round_ in range(opts.rounds):
        if opts.rounds > 1:
            print(f"round {round_ + 1}", flush=True)
        llama = llama_server_alone(model, opts.slots, opts.ctx, opts.threads, opts.cache_ram_mib, opts.llama_log,
                                   opts.alone_flash_attn)
        try:
            baseline = run_trace(llama.url, "chat", shape)
        finally:
            llama.stop()
        print(describe("llama-server alone (chat)", baseline, None), flush=True)
        for prefill in prefills:
            for api in filter(None, opts.apis.split(",")):
                process, url = start_maya("--model", model, "--ctx", str(opts.ctx), "--slots", str(opts.slots),
                                          "--threads", str(opts.threads), "--cache-ram-mib", str(opts.cache_ram_mib),
                                          "--prefill-concurrency", prefill)
                try:
                    result = run_trace(url, api, shape)
                finally:
                    process.terminate()
                    process.wait(timeout=30)
                name = maya_name(api, prefill, prefills)
                ratios.setdefault(name, []).append(result.median_ttft / baseline.median_ttft)
                print(describe(name, result, baseline), flush=True)
    if opts.rounds > 1:
        for name, values in ratios.items():
            print(f"{name:46s} median TTFT ratio over {len(values)} rounds {statistics.median(values):.3f} "
                  f"({', '.join(f'{v:.3f}' for v in values)})")


if __name__ == "__main__":
    main()
