"""Maya's own DeepSeek code against DeepSeek's toolkit (deepseek-recipe) at run time: what each costs, in one run.

The decision this informs (issue 53): render and parse with Maya's own code, checked byte for byte against the
toolkit in the tests, or call the toolkit at run time. Measured, each in the same process and rounds interleaved:

1. render + token ids per prompt, at 1, 40 and 200 turns (a tool loop: user, assistant with reasoning and a call,
   result): Maya's `family.render(conversation).token_ids(tokenizer)` from the neutral conversation, against the
   toolkit's work from the same point: building its conversation from the neutral one (what Maya would do at run
   time), `render_conversation` and `encode` with the same tokenizer.json;
2. parse cost per generated token: Maya's family parser fed one token's text at a time, against the toolkit's
   `StreamProcessor` pushed the same pieces (its Chat Completions chunk generator, the cheapest it offers).

    .venv/bin/python bench/deepseek_runtime.py [--family deepseek-v4.1] [--rounds 5]

Prints medians and ratios (toolkit ÷ Maya: above 1, Maya's own code is faster).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import deepseek_recipe as recipe  # noqa: E402

from maya_server.families import get_family  # noqa: E402
from maya_server.model.hf_tokenizer import HfTokenizer  # noqa: E402
from maya_server.neutral.conversation import Conversation, Message, TextPart, ToolCall, ToolResult  # noqa: E402
from tests.families import deepseek_recipe_oracle as oracle  # noqa: E402
from tests.families.conversations import TOOLS  # noqa: E402
from tests.families.official import extract_tokenizer, v41_tokenizer_file  # noqa: E402


def loop_conversation(turns: int) -> Conversation:
    history: list = []
    for n in range(turns):
        history.append(Message("user", (TextPart(f"Step {n}: what is the weather in city number {n} today?"),)))
        call = ToolCall(f"call_{n}", "get_weather", json.dumps({"city": f"City {n}", "days": n % 7}))
        history.append(Message("assistant", (TextPart(f"Checking city {n}."),), f"I should look up city {n}.", (call,)))
        history.append(ToolResult(f"call_{n}", (TextPart(f"Sunny, {n % 30} degrees"),)))
    return Conversation(tuple(history), tools=TOOLS)


def toolkit_conversation(conversation: Conversation, family: str):
    """What Maya would build at run time to hand the toolkit a conversation (no request conversion)."""
    messages = []
    for body in oracle.chat_body(conversation)["messages"]:
        role = body["role"]
        if role == "user":
            messages.append(recipe.UserMessage(body["content"]))
        elif role == "tool":
            messages.append(recipe.ToolMessage(body["content"], tool_call_id=body["tool_call_id"]))
        elif role == "system":
            messages.append(recipe.SystemMessage(body["content"]))
        else:
            calls = [recipe.ToolCall(c["id"], c["function"]["name"], c["function"]["arguments"])
                     for c in body.get("tool_calls", [])]
            messages.append(recipe.AssistantMessage(body["content"], body.get("reasoning_content"), calls or None))
    tools = [recipe.ToolDefinition(t.name, t.description, t.parameters) for t in conversation.tools]
    return recipe.Conversation(messages, tools=tools)


def timed(action, repeat: int) -> float:
    start = time.perf_counter()
    for _ in range(repeat):
        action()
    return (time.perf_counter() - start) / repeat


def render_figures(family: str, tokenizer_file: Path, rounds: int) -> None:
    ours_tokenizer = HfTokenizer.from_file(tokenizer_file)
    encoder = oracle.encoding(family, str(tokenizer_file))
    maya_family = get_family(family)
    for turns in (1, 40, 200):
        conversation = loop_conversation(turns)
        repeat = max(1, 200 // turns)
        ours_ids = maya_family.render(conversation).token_ids(ours_tokenizer)
        theirs_ids = encoder.encode(toolkit_conversation(conversation, family))
        same = "same ids" if ours_ids == theirs_ids else "IDS DIFFER"
        maya, toolkit = [], []
        for _ in range(rounds):
            maya.append(timed(lambda: maya_family.render(conversation).token_ids(ours_tokenizer), repeat))
            toolkit.append(timed(lambda: encoder.encode(toolkit_conversation(conversation, family)), repeat))
        m, t = statistics.median(maya), statistics.median(toolkit)
        print(f"render+ids {turns:>3} turns ({len(ours_ids):>6} tokens, {same}): Maya {m * 1e3:8.3f} ms, "
              f"toolkit {t * 1e3:8.3f} ms, toolkit/Maya {t / m:5.2f}")


def parse_figures(family: str, tokenizer_file: Path, rounds: int) -> None:
    tokenizer = HfTokenizer.from_file(tokenizer_file)
    reasoning = "Let me think about the weather in several cities and compare them carefully. " * 20
    tags = get_family(family).dialect.tags
    answer = ("Here is what I found. " * 20 + f"\n\n{tags.block_open}\n{tags.invoke_open}get_weather\">\n"
              f'{tags.param_open}city" string="true">Zürich{tags.param_close}\n{tags.invoke_close}\n{tags.block_close}')
    output = reasoning + "</think>" + answer
    pieces = [tokenizer.decode([i]) for i in tokenizer.encode(output, special=True)]
    conversation = Conversation((Message("user", (TextPart("Hi"),)),), tools=TOOLS)
    maya_family = get_family(family)

    def maya() -> None:
        parser = maya_family.parser(conversation, lambda: "call")
        for piece in pieces:
            parser.feed(piece)
        parser.finish("stop")

    def toolkit() -> None:
        request = recipe.ChatCompletionRequest({"model": oracle.MODELS[family],
                                                "messages": [{"role": "user", "content": "Hi"}]})
        generator = recipe.ChatCompletionRequest.chunk_generator(request.convert(recipe.ConversionOptions()),
                                                                 "id", "m")
        options = recipe.ParsingOptions(thinking_initial_stage=recipe.ThinkingInitialStage.ReasoningStart)
        processor = recipe.StreamProcessor(generator, options)
        for piece in pieces:
            processor.push(recipe.InferenceChunk.text(piece, 1))
        processor.push(recipe.InferenceChunk.finish(recipe.InferenceFinishReason.Stop))
        processor.finish()

    ours, theirs = [], []
    for _ in range(rounds):
        ours.append(timed(maya, 5) / len(pieces))
        theirs.append(timed(toolkit, 5) / len(pieces))
    m, t = statistics.median(ours), statistics.median(theirs)
    print(f"parse per token ({len(pieces)} tokens): Maya {m * 1e6:7.2f} µs, toolkit {t * 1e6:7.2f} µs, "
          f"toolkit/Maya {t / m:5.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--family", default="deepseek-v4.1", choices=("deepseek-v4.1", "deepseek-v4"))
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        folder = Path(directory)
        tokenizer_file = v41_tokenizer_file(folder) if args.family == "deepseek-v4.1" \
            else extract_tokenizer("deepseek-v4", folder)
        print(f"{args.family}, deepseek-recipe {recipe.__version__}, medians of {args.rounds} rounds")
        render_figures(args.family, tokenizer_file, args.rounds)
        parse_figures(args.family, tokenizer_file, args.rounds)


if __name__ == "__main__":
    main()
