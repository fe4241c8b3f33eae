"""On the real embedded llama-server and the shipped SmolLM2: the grammar makes strict structured output valid
where the model alone does not write it, and llama-server reads every grammar Maya writes.

The same Chat requests (fixed seeds, temperature 0.7) go to a Maya that holds the model to the schema and to one
started with `--no-constrained-decoding`: the first's answers are valid JSON for the schema, the second's are
refused by validation (nothing invalid is published either way). Then every kind of grammar (the battery's
schemas, each family's reasoning lead and call syntax) is sent to llama-server itself, which must read it (a
grammar it cannot parse is a 400 there).
"""

from __future__ import annotations

import json

import jsonschema

from bench.structured_battery import BATTERY
from maya_server.families import get_family
from maya_server.neutral.conversation import Conversation, Message, OutputSchema, TextPart, ToolSpec
from maya_server.pipeline.constraint import turn_grammar
from tests.embedded import child_http, embedded_server

SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}, "country": {"type": "string"}},
          "required": ["city", "country"], "additionalProperties": False}
SEEDS = (1, 2, 3)


def _answers(server) -> list[tuple[int, str | None]]:
    """(HTTP status, the content published) of each seed's request."""
    client = server.client()
    found = []
    for seed in SEEDS:
        try:
            completion = client.chat.completions.create(
                model="m", seed=seed, temperature=0.7, max_tokens=120,
                messages=[{"role": "system", "content": "Answer with JSON only."},
                          {"role": "user", "content": "Where is the Eiffel Tower?"}],
                response_format={"type": "json_schema", "json_schema": {"name": "place", "schema": SCHEMA,
                                                                        "strict": True}})
            found.append((200, completion.choices[0].message.content))
        except Exception as error:  # the SDK raises the 500 `invalid_structured_output`
            found.append((getattr(error, "status_code", 0), getattr(error, "code", None)))
    return found


def _valid(text: str | None) -> bool:
    try:
        jsonschema.validate(json.loads(text or ""), SCHEMA)
        return True
    except (ValueError, jsonschema.ValidationError):
        return False


def test_the_constrained_model_answers_valid_json_where_the_model_alone_fails_validation():
    with embedded_server(threads=2) as server:
        constrained = _answers(server)
    with embedded_server(threads=2, constrained_decoding=False) as server:
        alone = _answers(server)
    assert all(status == 200 and _valid(text) for status, text in constrained), constrained
    assert sum(status == 500 and code == "invalid_structured_output" for status, code in alone) >= 2, alone
    assert not any(status == 200 and text and not _valid(text) for status, text in alone)  # never published


def _grammars() -> list[tuple[str, str]]:
    question = (Message("user", (TextPart("Hi"),)),)
    def every_lead(text: str) -> bool:  # the optional `<think>` lead too, as for Qwen3
        return True

    found = [(name, turn_grammar(Conversation(turns=question, output=OutputSchema(schema)), get_family("chatml"),
                                 every_lead)) for name, schema, _ in BATTERY]
    tool = ToolSpec("get_weather", None, {"type": "object", "properties": {
        "city": {"type": "string"}, "days": {"type": "integer"}, "unit": {"type": "string", "enum": ["c", "f"]}},
        "required": ["city", "days", "unit"], "additionalProperties": False}, strict=True)
    loose = ToolSpec("get_time", None, {"type": "object"})
    for family in ("chatml", "glm", "deepseek-v4", "deepseek-v4.1"):
        for effort in ("high", "none"):
            found.append((f"{family} calls, effort {effort}", turn_grammar(Conversation(
                turns=question, tools=(tool, loose), tool_choice="required", reasoning_effort=effort),
                get_family(family), every_lead)))
            found.append((f"{family} json_object, effort {effort}", turn_grammar(Conversation(
                turns=question, output=OutputSchema(None), reasoning_effort=effort), get_family(family), every_lead)))
    return found


def test_llama_server_reads_every_kind_of_grammar_maya_writes():
    grammars = _grammars()
    assert all(grammar for _, grammar in grammars)
    with embedded_server(threads=2, slots=1) as server, child_http(server.engine) as child:
        refused = []
        for name, grammar in grammars:
            answer = child.post("/completion", json={"prompt": "Hi", "n_predict": 4, "grammar": grammar})
            if answer.status_code != 200:
                refused.append((name, answer.status_code, answer.text[:200]))
        broken = child.post("/completion", json={"prompt": "Hi", "n_predict": 4, "grammar": "root ::= ("})
    assert refused == []
    assert broken.status_code == 400  # what a grammar llama-server cannot read gets: Maya's fallback (tested
    # with a fake upstream in tests/engine/upstream/test_grammars.py) takes exactly this answer
