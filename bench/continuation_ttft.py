"""Time to first token of a continuation, with two conversations interleaved.

Two conversations, A and B, each open with ~1500 tokens of history (a long
user message and the model's answer to it). Then A continues after B has run,
and B after A. On the default embedded engine (llama-server with 4 slots and
its RAM prompt cache) each continuation resumes from its own prefix; on one
with a single slot and no prompt cache (`--slots 1 --cache-ram-mib 0`) B's
turn overwrote A's KV, so each continuation is evaluated cold. The figure is
the median continuation TTFT of the first ÷ the second, same prompts, same
model (SmolLM2-135M), same context (2048 tokens a sequence); target ≤ 0.2.
Every round uses fresh conversations, so nothing carries over between rounds.
Servers run in their own processes, one at a time, read with the OpenAI SDK,
streaming; the first text delta marks the first token.

    .venv/bin/python bench/continuation_ttft.py [--rounds 3] [--history-tokens 1500] [--api stored|chat|responses]

`stored` (the default) continues each conversation with `store: true` and
`previous_response_id`, sending only the new message: the server rebuilds the
history from its response store. `chat` and `responses` send the full history
every turn (`store: false`).
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from openai import OpenAI

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from maya_process import start_maya  # noqa: E402
from streamed_chat import stream_chat  # noqa: E402

from maya_server.config import default_model_path  # noqa: E402
from tests.gguf_model_dir import smollm2_tokenizer  # noqa: E402

WORDS = (
    "harbor lantern river meadow quarry copper violin orchard tunnel glacier ledger compass falcon "
    "ember canyon thistle beacon granite willow saddle marble cobalt anchor prairie sparrow cedar "
    "thunder velvet ribbon citadel"
).split()
QUESTION = "Summarize the notes above in two sentences."
FOLLOW_UP = "Which place in the notes is mentioned first? Answer briefly."


@dataclass(frozen=True)
class TurnResult:
    ttft: float
    text: str
    prompt_tokens: int
    cached_tokens: int


class ChatConversation:
    """/v1/chat/completions with the full message history each turn."""

    def __init__(self, client: OpenAI) -> None:
        self.client = client
        self.messages: list[dict] = []

    def say(self, text: str, max_tokens: int) -> TurnResult:
        self.messages.append({"role": "user", "content": text})
        ttft, answer, usage = stream_chat(self.client, "m", self.messages, max_tokens)
        self.messages.append({"role": "assistant", "content": answer})
        return TurnResult(ttft, answer, usage.prompt_tokens, usage.prompt_tokens_details.cached_tokens)


class ResponsesConversation:
    """/v1/responses with the full history as `input` items and `store: false`."""

    def __init__(self, client: OpenAI) -> None:
        self.client = client
        self.items: list[dict] = []

    def say(self, text: str, max_tokens: int) -> TurnResult:
        self.items.append({"role": "user", "content": text})
        started = time.perf_counter()
        ttft, pieces, usage = None, [], None
        for event in self.client.responses.create(
            model="m", input=self.items, temperature=0, max_output_tokens=max_tokens, store=False, stream=True
        ):
            if event.type == "response.output_text.delta":
                ttft = ttft if ttft is not None else time.perf_counter() - started
                pieces.append(event.delta)
            elif event.type in ("response.completed", "response.incomplete"):
                usage = event.response.usage
        answer = "".join(pieces)
        self.items.append({"role": "assistant", "content": answer})
        return TurnResult(ttft, answer, usage.input_tokens, usage.input_tokens_details.cached_tokens)


class StoredConversation:
    """/v1/responses with `store: true`, each turn continuing the last by `previous_response_id`."""

    def __init__(self, client: OpenAI) -> None:
        self.client = client
        self.previous: str | None = None

    def say(self, text: str, max_tokens: int) -> TurnResult:
        started = time.perf_counter()
        ttft, pieces, final = None, [], None
        for event in self.client.responses.create(
            model="m", input=text, temperature=0, max_output_tokens=max_tokens, store=True, stream=True,
            **({"previous_response_id": self.previous} if self.previous else {}),
        ):
            if event.type == "response.output_text.delta":
                ttft = ttft if ttft is not None else time.perf_counter() - started
                pieces.append(event.delta)
            elif event.type in ("response.completed", "response.incomplete"):
                final = event.response
        self.previous = final.id
        usage = final.usage
        return TurnResult(ttft, "".join(pieces), usage.input_tokens, usage.input_tokens_details.cached_tokens)


CONVERSATIONS = {"stored": StoredConversation, "chat": ChatConversation, "responses": ResponsesConversation}


def notes(seed: int, tokens: int, count_tokens) -> str:
    """Deterministic filler text of about `tokens` tokens, different for every seed from its first word."""
    rng = random.Random(seed)
    sentences = [f"Notes {seed}."]
    while count_tokens(" ".join(sentences)) < tokens:
        sentences.append(" ".join(rng.choice(WORDS) for _ in range(rng.randrange(6, 14))).capitalize() + ".")
    return " ".join(sentences)


def interleaved_round(url: str, api: str, documents: tuple[str, str]) -> list[TurnResult]:
    """A1, B1 (warm both), then A2 after B ran and B2 after A ran; returns [A2, B2]."""
    client = OpenAI(base_url=url + "/v1", api_key="bench", timeout=600)
    a, b = CONVERSATIONS[api](client), CONVERSATIONS[api](client)
    a.say(documents[0] + "\n\n" + QUESTION, max_tokens=48)
    b.say(documents[1] + "\n\n" + QUESTION, max_tokens=48)
    return [a.say(FOLLOW_UP, max_tokens=16), b.say(FOLLOW_UP, max_tokens=16)]  # 16: the Responses API minimum


WARM_FLAGS = ()
COLD_FLAGS = ("--slots", "1", "--cache-ram-mib", "0")


def measure(model: str, opts, flags: tuple[str, ...], rounds: list[tuple[str, str]]) -> list[TurnResult]:
    """The continuations' results on a Maya started with `flags`."""
    process, url = start_maya("--model", model, "--ctx", "2048", "--threads", str(opts.threads), *flags)
    try:
        results: list[TurnResult] = []
        for documents in rounds:
            results.extend(interleaved_round(url, opts.api, documents))
        return results
    finally:
        process.terminate()
        process.wait(timeout=30)


def make_rounds(model: str, count: int, history_tokens: int) -> list[tuple[str, str]]:
    tokenizer = smollm2_tokenizer(model)
    tokens = lambda text: len(tokenizer.encode(text, special=False))  # noqa: E731
    return [(notes(2 * r, history_tokens, tokens), notes(2 * r + 1, history_tokens, tokens)) for r in range(count)]


def report(warm: list[TurnResult], cold: list[TurnResult]) -> float:
    warm_ttft, cold_ttft = statistics.median(t.ttft for t in warm), statistics.median(t.ttft for t in cold)
    print(f"continuation prompt tokens:          {statistics.median(t.prompt_tokens for t in warm):7.0f}")
    print(f"cached, 4 slots + prompt cache:      {statistics.median(t.cached_tokens for t in warm):7.0f} tokens"
          f"   TTFT {warm_ttft * 1000:8.1f} ms")
    print(f"cached, 1 slot, no prompt cache:     {statistics.median(t.cached_tokens for t in cold):7.0f} tokens"
          f"   TTFT {cold_ttft * 1000:8.1f} ms")
    print(f"continuation TTFT ratio: {warm_ttft / cold_ttft:.3f} (target <= 0.2)")
    return warm_ttft / cold_ttft


def main() -> None:
    args = argparse.ArgumentParser()
    args.add_argument("--rounds", type=int, default=3)
    args.add_argument("--history-tokens", type=int, default=1500, help="tokens of each conversation's opening notes")
    args.add_argument("--threads", type=int, default=2)
    args.add_argument("--api", choices=tuple(CONVERSATIONS), default="stored")
    opts = args.parse_args()
    model = default_model_path()
    rounds = make_rounds(model, opts.rounds, opts.history_tokens)
    warm = measure(model, opts, WARM_FLAGS, rounds)
    cold = measure(model, opts, COLD_FLAGS, rounds)
    print(f"api={opts.api} threads={opts.threads} rounds={opts.rounds} continuations={len(warm)} (medians)")
    report(warm, cold)


if __name__ == "__main__":
    main()
