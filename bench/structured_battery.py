"""Strict structured output on the shipped model: how many answers are valid, with and without the constraint.

A battery of strict schemas (objects, arrays with bounds, enums, nested, nullable, numbers with bounds), each
asked with two prompts, through both APIs with the official `openai` SDK (no retries), on the shipped
SmolLM2-135M at temperature 0.7 (Chat requests with a fixed seed each; Responses has no `seed`). Each answer is sorted into:

- `valid`: published, and valid for the schema by the client's own `jsonschema` check;
- `failed`: Maya refused it (Responses `failed` / Chat's 500 `invalid_structured_output`): nothing published;
- `incomplete`: the output limit was reached first (Responses `incomplete` / Chat `finish_reason: length`);
- `invalid_published`: published and not valid for the schema: must be 0 in every mode.

The modes are Maya's own switch: `on` (the default: the engine is held to the schema) and `off`
(`--no-constrained-decoding`: validate-before-publish alone, as before), run one after the other in one run.

The grammar's cost per token is measured on llama-server itself (`--grammar-cost`, on by default with the
embedded engine): the battery's prompts, rendered as Maya renders them, sent to one llama-server with and without
Maya's grammar for the schema, taking turns, same seeds; the ratio is the median of llama-server's own
`timings.predicted_per_token_ms` with the grammar ÷ without (reported, not asserted).

    .venv/bin/python bench/structured_battery.py [--modes on,off] [--max-tokens 200] [--api both]
    .venv/bin/python bench/structured_battery.py --upstream http://127.0.0.1:8000   # an engine already running
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import jsonschema
import openai

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from maya_process import start_maya  # noqa: E402


def _object(properties: dict, **extra) -> dict:
    return {"type": "object", "properties": properties, "required": list(properties),
            "additionalProperties": False, **extra}


BATTERY: tuple[tuple[str, dict, tuple[str, str]], ...] = (
    ("count", _object({"count": {"type": "integer"}}),
     ("How many legs does a spider have?", "Count the vowels in the word 'banana'.")),
    ("place", _object({"city": {"type": "string"}, "country": {"type": "string"}}),
     ("Name the capital of France and its country.", "Where is the Eiffel Tower?")),
    ("colors", _object({"colors": {"type": "array", "items": {"type": "string"}, "minItems": 2, "maxItems": 4}}),
     ("List some colors of the rainbow.", "What colors is a zebra?")),
    ("verdict", _object({"ok": {"type": "boolean"}, "reason": {"type": "string", "maxLength": 80}}),
     ("Is the sky green? Answer with a reason.", "Is water wet?")),
    ("rating", _object({"sentiment": {"type": "string", "enum": ["positive", "negative", "neutral"]},
                        "score": {"type": "number", "minimum": 0, "maximum": 1}}),
     ("Rate the sentiment of: 'I love this phone'.", "Rate the sentiment of: 'The food was cold.'")),
    ("person", _object({"name": {"type": "string"}, "age": {"type": ["integer", "null"]},
                        "email": {"type": ["string", "null"]}}),
     ("Extract the person: 'Alice is 30 years old.'", "Extract the person: 'Bob wrote to bob@example.com.'")),
    ("address", _object({"person": _object({"first": {"type": "string"}, "last": {"type": "string"}}),
                         "address": _object({"street": {"type": "string"}, "zip": {"type": "string"}})}),
     ("Extract: 'John Smith lives at 12 Oak Street, 90210.'", "Make up a person and their address.")),
    ("steps", _object({"steps": {"type": "array", "minItems": 1, "maxItems": 5,
                                 "items": _object({"n": {"type": "integer", "minimum": 1},
                                                   "text": {"type": "string"}})}}),
     ("Give the steps to make tea.", "How do I plant a tree?")),
    ("todo", _object({"title": {"type": "string", "minLength": 1},
                      "priority": {"type": "integer", "enum": [1, 2, 3]},
                      "done": {"type": "boolean"},
                      "due": {"anyOf": [{"type": "string"}, {"type": "null"}]}}),
     ("Make a todo item to buy milk.", "Create a task: call the dentist, urgent.")),
    ("measure", _object({"value": {"type": "number", "exclusiveMinimum": 0},
                         "unit": {"type": "string", "const": "kg"}}),
     ("How heavy is a cat in kilograms?", "What does a bag of flour weigh?")),
)
SYSTEM = "Answer with JSON only."
SEED_BASE = 1234


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--modes", default="on,off",
                        help="comma-separated: on (constrained), off (validate only), plain (no switch given: "
                             "a Maya older than the switch)")
    parser.add_argument("--api", choices=("both", "responses", "chat"), default="both")
    parser.add_argument("--max-tokens", type=int, default=200)
    parser.add_argument("--temperature", type=float, default=0.7)
    parser.add_argument("--upstream", help="drive this engine over HTTP instead of the embedded one")
    parser.add_argument("--maya-arg", action="append", default=[], help="another argument for Maya (repeatable)")
    parser.add_argument("--no-grammar-cost", dest="grammar_cost", action="store_false",
                        help="skip the per-token cost of the grammar on llama-server")
    args = parser.parse_args()
    if args.grammar_cost and not args.upstream:
        grammar_cost(args)
    apis = ("responses", "chat") if args.api == "both" else (args.api,)
    results: dict[str, dict] = {}
    for mode in args.modes.split(","):
        extra = list(args.maya_arg) + (["--no-constrained-decoding"] if mode == "off" else [])
        if args.upstream:
            extra += ["--engine", "upstream", "--upstream-url", args.upstream]
        process, url = start_maya(*extra, "--threads", "2", timeout=180)
        try:
            client = openai.OpenAI(base_url=url + "/v1", api_key="unused", max_retries=0, timeout=300)
            results[mode] = run_battery(client, apis, args)
        finally:
            process.terminate()
            process.wait(30)
    report(results)


def run_battery(client: openai.OpenAI, apis: tuple[str, ...], args) -> dict:
    tally = {api: {"valid": 0, "failed": 0, "incomplete": 0, "invalid_published": 0, "other": 0} for api in apis}
    per_token: list[float] = []
    seed = SEED_BASE
    for name, schema, prompts in BATTERY:
        for prompt in prompts:
            for api in apis:
                seed += 1
                started = time.perf_counter()
                outcome, text, tokens = ask(client, api, name, schema, prompt, seed, args)
                elapsed = time.perf_counter() - started
                if outcome == "published":
                    outcome = "valid" if is_valid(text, schema) else "invalid_published"
                tally[api][outcome] += 1
                if tokens:
                    per_token.append(elapsed / tokens)
                print(f"  {api:9} {name:8} {outcome:17} {text[:70]!r}", flush=True)
    return {"tally": tally, "per_token_s": statistics.median(per_token) if per_token else float("nan")}


def ask(client: openai.OpenAI, api: str, name: str, schema: dict, prompt: str, seed: int, args) -> tuple[str, str, int]:
    """(published | failed | incomplete | other, the text published, output tokens)."""
    try:
        if api == "responses":
            response = client.responses.create(
                model="maya", instructions=SYSTEM, input=prompt, temperature=args.temperature,
                max_output_tokens=args.max_tokens,
                text={"format": {"type": "json_schema", "name": name, "schema": schema, "strict": True}})
            tokens = response.usage.output_tokens if response.usage else 0
            if response.status == "failed":
                return "failed", "", tokens
            if response.status == "incomplete":
                return "incomplete", response.output_text, tokens
            return "published", response.output_text, tokens
        completion = client.chat.completions.create(
            model="maya", messages=[{"role": "system", "content": SYSTEM}, {"role": "user", "content": prompt}],
            temperature=args.temperature, max_tokens=args.max_tokens, seed=seed,
            response_format={"type": "json_schema", "json_schema": {"name": name, "schema": schema, "strict": True}})
        choice = completion.choices[0]
        tokens = completion.usage.completion_tokens if completion.usage else 0
        if choice.finish_reason == "length":
            return "incomplete", choice.message.content or "", tokens
        return "published", choice.message.content or "", tokens
    except openai.InternalServerError as error:
        body = getattr(error, "body", None) or {}
        code = body.get("code") if isinstance(body, dict) else None
        return ("failed" if code == "invalid_structured_output" else "other"), "", 0


def is_valid(text: str, schema: dict) -> bool:
    import json
    try:
        jsonschema.validate(json.loads(text), schema, cls=jsonschema.Draft202012Validator)
        return True
    except (ValueError, jsonschema.ValidationError):
        return False


def grammar_cost(args) -> None:
    """Per-token decode time on llama-server with Maya's grammar for each schema ÷ without, median of the pairs."""
    import httpx

    from maya_server.config import default_model_path
    from maya_server.families import get_family
    from maya_server.neutral.conversation import Conversation, Message, OutputSchema, TextPart
    from maya_server.pipeline.constraint import turn_grammar
    from tests.llama_server import LlamaServer

    family = get_family("chatml")
    server = LlamaServer(default_model_path(), threads=2, parallel=1)
    ratios, held, free = [], [], []
    try:
        seed = SEED_BASE
        for _, schema, prompts in BATTERY:
            for prompt in prompts:
                seed += 1
                conversation = Conversation(turns=(Message("system", (TextPart(SYSTEM),)),
                                                   Message("user", (TextPart(prompt),))), output=OutputSchema(schema))
                text = family.render(conversation).text
                per_token = {}
                for grammar in (turn_grammar(conversation, family, lambda text: False), None):  # SmolLM2: no <think>
                    body = {"prompt": text, "n_predict": args.max_tokens, "temperature": args.temperature,
                            "seed": seed, "cache_prompt": False, **({"grammar": grammar} if grammar else {})}
                    timings = httpx.post(server.url + "/completion", json=body, timeout=300).json()["timings"]
                    per_token[grammar is None] = timings["predicted_per_token_ms"]
                held.append(per_token[False])
                free.append(per_token[True])
                ratios.append(per_token[False] / per_token[True])
    finally:
        server.stop()
    print(f"grammar cost on llama-server: median {statistics.median(held):.2f} ms/token with the grammar, "
          f"{statistics.median(free):.2f} without; median ratio {statistics.median(ratios):.3f} "
          f"(range {min(ratios):.3f}-{max(ratios):.3f}, {len(ratios)} pairs)", flush=True)


def report(results: dict[str, dict]) -> None:
    print()
    for mode, result in results.items():
        for api, tally in result["tally"].items():
            total = sum(tally.values())
            print(f"{mode:3} {api:9} valid {tally['valid']}/{total}  failed {tally['failed']}  "
                  f"incomplete {tally['incomplete']}  invalid_published {tally['invalid_published']}  "
                  f"other {tally['other']}")
        print(f"{mode:3} median seconds per output token {result['per_token_s'] * 1000:.2f} ms")
    if "on" in results and "off" in results:
        print(f"per-token time, constrained ÷ validate-only: "
              f"{results['on']['per_token_s'] / results['off']['per_token_s']:.3f}")


if __name__ == "__main__":
    main()
