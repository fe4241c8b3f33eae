"""Preparing an agent's prompt on the embedded engine: render + tokenize a ~14k-token history, cold and on the
next turn, beside the time llama-server takes to prefill that prompt.

Agent clients (Codex, openai-agents) resend their whole history every turn, and the embedded engine asks
llama-server for the token ids of each text run (`engine/llama_server/tokenizer.py`). This prints, from one run:

- render: the family's render of the conversation (Python, no I/O);
- tokenize cold: every run asked of llama-server (an empty token cache);
- next turn: render + tokenize after one more exchange (only the new runs are asked);
- prefill: llama-server's own `timings.prompt_ms` for the whole prompt, no prompt cache;

and each preparation time ÷ the prefill time.

    .venv/bin/python bench/prepare_time.py [--tokens 14000] [--threads 2] [--model X.gguf --family glm-5.1]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from maya_server.neutral.conversation import Conversation, Message, TextPart, ToolCall, ToolResult, ToolSpec  # noqa: E402
from maya_server.families import get_family  # noqa: E402
from maya_server.engine.llama_server.tokenizer import TokenCache  # noqa: E402
from maya_server.engine_setup import create_engine, template_family  # noqa: E402
from tests.embedded import child_http, embedded_config  # noqa: E402

INSTRUCTIONS = " ".join(
    f"Rule {i}: when you edit a file, read it first, keep the style of the code around it, run the tests that "
    f"cover it and report what changed in one short paragraph." for i in range(60))
TOOLS = tuple(
    ToolSpec(name, f"{name.replace('_', ' ').capitalize()} in the workspace.",
             {"type": "object", "properties": {"path": {"type": "string"}, "text": {"type": "string"}},
              "required": ["path"]})
    for name in ("read_file", "write_file", "run_tests", "search_code"))


def file_listing(turn: int) -> str:
    return "\n".join(f"{n:4d}  def handler_{turn}_{n}(request):  # returns the {n}th answer for turn {turn}"
                     for n in range(20))


def exchange(turn: int) -> tuple:
    """One agent step: the user's ask, a tool call, its result, the assistant's answer."""
    call = ToolCall(f"call_{turn}", "read_file", json.dumps({"path": f"src/module_{turn}.py"}))
    return (
        Message("user", (TextPart(f"Step {turn}: look at src/module_{turn}.py and tell me what it does."),)),
        Message("assistant", (), f"I should read module {turn} first.", (call,)),
        ToolResult(f"call_{turn}", (TextPart(file_listing(turn)),), "read_file"),
        Message("assistant", (TextPart(f"Module {turn} defines twenty request handlers, one per answer."),)),
    )


def history(turns: int) -> Conversation:
    body = tuple(m for t in range(turns) for m in exchange(t))
    return Conversation((Message("system", (TextPart(INSTRUCTIONS),)), *body), tools=TOOLS)


def timed(work) -> tuple[float, object]:
    started = time.perf_counter()
    result = work()
    return (time.perf_counter() - started) * 1000, result


def main() -> None:
    args = argparse.ArgumentParser()
    args.add_argument("--tokens", type=int, default=14000, help="the history's size in prompt tokens (at least)")
    args.add_argument("--threads", type=int, default=2)
    args.add_argument("--rounds", type=int, default=5)
    args.add_argument("--model", help="a GGUF (default: the shipped SmolLM2)")
    args.add_argument("--family", default=None, help="the family to render with (default: the model's template's)")
    opts = args.parse_args()
    # SmolLM2 was trained on 8192 tokens and llama-server caps a slot there; the override lifts the cap (its
    # answers past 8k are nonsense, its prefill time is what a model trained that long would take)
    overrides = {"ctx": opts.tokens + 4096, "slots": 1, "threads": opts.threads, "cache_ram_mib": 0,
                 "engine_args": ("--override-kv", f"llama.context_length=int:{opts.tokens + 4096}")}
    if opts.model:
        overrides["model"] = opts.model
    engine = create_engine(embedded_config(**overrides))
    try:
        family = get_family(opts.family or template_family(engine) or "glm")
        turns = 1
        while len(family.render(history(turns)).token_ids(engine.tokenizer)) < opts.tokens:
            turns += 1
        conversation, later = history(turns), history(turns + 1)
        rows: dict[str, list[float]] = {"render": [], "tokenize cold": [], "next turn": []}
        for _ in range(opts.rounds):
            engine.tokenizer.cache = TokenCache(engine.tokenizer.cache.limit_bytes)  # cold: nothing kept
            render_ms, prompt = timed(lambda: family.render(conversation))
            tokenize_ms, ids = timed(lambda: prompt.token_ids(engine.tokenizer))
            next_ms, next_ids = timed(lambda: family.render(later).token_ids(engine.tokenizer))
            rows["render"].append(render_ms)
            rows["tokenize cold"].append(tokenize_ms)
            rows["next turn"].append(next_ms)
        with child_http(engine) as child:  # once: on a CPU a 14k prefill takes minutes
            reply = child.post("/completion", json={"prompt": ids, "n_predict": 1, "cache_prompt": False},
                               timeout=3600).json()
        if "timings" not in reply:
            raise SystemExit(f"llama-server did not prefill: {reply}")
        rows["prefill"] = [reply["timings"]["prompt_ms"]]
        prefill = statistics.median(rows["prefill"])
        print(f"model {Path(engine.model_path).name}, family {family.name}, {len(ids)} prompt tokens "
              f"({turns} agent steps), next turn {len(next_ids)} tokens; preparation: medians of {opts.rounds} rounds")
        for name, values in rows.items():
            ms = statistics.median(values)
            print(f"{name:14s} {ms:10.1f} ms   ÷ prefill {ms / prefill:7.4f}")
        cold = statistics.median(rows["render"]) + statistics.median(rows["tokenize cold"])
        print(f"cold preparation (render + tokenize) ÷ prefill: {cold / prefill:.4f}")
    finally:
        engine.shutdown()


if __name__ == "__main__":
    main()
