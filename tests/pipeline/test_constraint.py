"""The grammar a turn is held to lets each family's reasoning through first, then only the answer it must give.

For every family: structured output after the reasoning section the rendered prompt leaves the model in (GLM and
DeepSeek think inside the prompt's `<think>`; Qwen-style ChatML may open its own), or right away with thinking
off; a required or named call in the family's own syntax (Hermes JSON, GLM's tags, DeepSeek's DSML in V4 and V4.1
spellings), a strict tool's arguments held to its schema. Each text the grammar accepts is read back by the
family's own parser into the reasoning, the JSON answer or the call: the grammar and the parser agree.
"""

from __future__ import annotations

import json
from itertools import count

import pytest

from maya_server.families import get_family
from maya_server.neutral.conversation import (
    Conversation, Message, NamedToolChoice, OutputSchema, TextPart, ToolSpec,
)
from maya_server.neutral.events import ReasoningDelta, TextDelta, ToolCallFinished, ToolCallStarted
from maya_server.pipeline.constraint import turn_grammar
from tests.structured.gbnf_recognizer import Recognizer

SCHEMA = {"type": "object", "properties": {"count": {"type": "integer"}}, "required": ["count"],
          "additionalProperties": False}
WEATHER = ToolSpec("get_weather", "The weather", {
    "type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"},
                                     "unit": {"type": "string", "enum": ["c", "f"]}},
    "required": ["city", "days", "unit"], "additionalProperties": False}, strict=True)
CLOCK = ToolSpec("get_time", "The time", {"type": "object", "properties": {"zone": {"type": "string"}}})
QUESTION = (Message("user", (TextPart("How many?"),)),)
ARGUMENTS = {"city": "Paris", "days": 3, "unit": "c"}


def held(conv: Conversation, family: str, tokens: tuple[str, ...] = ("<think>",)) -> str | None:
    """The grammar of `conv`'s turn for `family`, on a vocabulary whose single tokens include `tokens`."""
    return turn_grammar(conv, get_family(family), lambda text: text in tokens)


def conversation(**extra) -> Conversation:
    return Conversation(turns=QUESTION, **extra)


def read(family_name: str, conv: Conversation, text: str) -> dict:
    """What the family's parser makes of `text`: the reasoning, the answer text and the calls."""
    ids = count()
    parser = get_family(family_name).parser(conv, lambda: f"call_{next(ids)}")
    events = parser.feed(text) + parser.finish("stop")
    calls: dict[int, list] = {}
    for event in events:
        if isinstance(event, ToolCallStarted):
            calls[event.index] = [event.name, None]
        elif isinstance(event, ToolCallFinished):
            calls[event.index][1] = json.loads(event.arguments)
    return {"reasoning": "".join(e.text for e in events if isinstance(e, ReasoningDelta)),
            "text": "".join(e.text for e in events if isinstance(e, TextDelta)),
            "calls": [tuple(call) for call in calls.values()]}


THINKING = [("glm", None), ("glm-4.7", None), ("glm-5.3", None), ("deepseek-v4", None), ("deepseek-v4.1", "high")]


@pytest.mark.parametrize("family,effort", THINKING)
def test_a_thinking_model_reasons_to_its_closing_tag_then_writes_json_held_to_the_schema(family, effort):
    conv = conversation(output=OutputSchema(SCHEMA, "count"), reasoning_effort=effort)
    accepts = Recognizer(held(conv, family)).accepts
    answer = 'Three </thin k> things.\n</think>\n{"count": 3}'
    assert accepts(answer)
    assert read(family, conv, answer) == {"reasoning": "Three </thin k> things.", "text": '{"count": 3}',
                                          "calls": []}
    assert accepts('</think>{"count":3}')  # a reasoning may be empty
    for wrong in ['{"count": 3}', 'Hmm</think>{"count": "3"}', 'Hmm</think>The answer is 3.',
                  'Hmm</think>{"count": 3}</think>', 'Hmm</think>{"count": 3} done']:
        assert not accepts(wrong), wrong


@pytest.mark.parametrize("family", ["glm", "deepseek-v4", "deepseek-v4.1", "chatml"])
def test_with_thinking_off_the_json_comes_first(family):
    conv = conversation(output=OutputSchema(SCHEMA, "count"), reasoning_effort="none")
    accepts = Recognizer(held(conv, family)).accepts
    assert accepts('{"count": 3}') and accepts('\n{"count": 3}')
    assert not accepts('Hmm</think>{"count": 3}') and not accepts('<think>Hmm</think>{"count": 3}')
    assert read(family, conv, '{"count": 3}')["text"] == '{"count": 3}'


def test_a_chatml_model_may_open_its_own_reasoning_first_or_answer_at_once():
    conv = conversation(output=OutputSchema(None))  # json_object: any object
    accepts = Recognizer(held(conv, "chatml")).accepts
    assert accepts('{"a": [1]}') and accepts('<think>\nShort.\n</think>\n\n{"a": 1}')
    assert read("chatml", conv, '<think>\nShort.\n</think>\n\n{"a": 1}') == {
        "reasoning": "Short.", "text": '{"a": 1}', "calls": []}
    assert not accepts('Sure! {"a": 1}') and not accepts("[1]")


def test_a_model_whose_vocabulary_has_no_reasoning_opener_is_not_led_into_one():
    """SmolLM2 is served by the ChatML family but never learnt `<think>`: a first `<` must not commit it to a
    reasoning section it would never close."""
    conv = conversation(output=OutputSchema(None))
    accepts = Recognizer(held(conv, "chatml", tokens=())).accepts
    assert accepts('{"a": 1}')
    assert not accepts('<think>\nShort.\n</think>\n\n{"a": 1}')


CALLS = {  # each family's call as its model writes it, and a second call after it
    "chatml": ('<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "days": 3, "unit": "c"}}\n'
               '</tool_call>', "\n"),
    "glm": ("<tool_call>get_weather<arg_key>city</arg_key><arg_value>Paris</arg_value><arg_key>days</arg_key>"
            "<arg_value>3</arg_value><arg_key>unit</arg_key><arg_value>c</arg_value></tool_call>", ""),
    "deepseek-v4": ('\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name="get_weather">\n'
                    '<｜DSML｜parameter name="city" string="true">Paris</｜DSML｜parameter>\n'
                    '<｜DSML｜parameter name="days" string="false">3</｜DSML｜parameter>\n'
                    '<｜DSML｜parameter name="unit" string="true">c</｜DSML｜parameter>\n'
                    '</｜DSML｜invoke>\n</｜DSML｜tool_calls>', None),
    "deepseek-v4.1": ('<｜DSML｜ calls>\n<｜DSML｜ invoke name="get_weather">\n'
                      '<｜DSML｜ parameter name="city" string="true">Paris</｜DSML｜ parameter>\n'
                      '<｜DSML｜ parameter name="days" string="false">3</｜DSML｜ parameter>\n'
                      '<｜DSML｜ parameter name="unit" string="true">c</｜DSML｜ parameter>\n'
                      '</｜DSML｜ invoke>\n</｜DSML｜ calls>', None),
}


@pytest.mark.parametrize("family", list(CALLS))
@pytest.mark.parametrize("choice", ["required", NamedToolChoice("get_weather")])
def test_a_required_call_is_written_in_the_family_s_syntax_with_strict_arguments(family, choice):
    conv = conversation(tools=(WEATHER, CLOCK), tool_choice=choice, reasoning_effort="none")
    accepts = Recognizer(held(conv, family)).accepts
    call, _ = CALLS[family]
    assert accepts(call)
    assert read(family, conv, call)["calls"] == [("get_weather", ARGUMENTS)]
    for wrong, right in [('"days": 3', '"days": "3"'), (">3<", ">three<"), (">c<", ">k<"),
                         ("get_weather", "get_wether")]:
        if wrong in call:
            assert not accepts(call.replace(wrong, right, 1)), (wrong, right)
    assert not accepts("It is sunny.") and not accepts("")


@pytest.mark.parametrize("family", list(CALLS))
def test_required_lets_any_declared_tool_be_called_a_loose_one_with_any_arguments_and_named_only_that_one(family):
    required = conversation(tools=(WEATHER, CLOCK), tool_choice="required", reasoning_effort="none")
    named = conversation(tools=(WEATHER, CLOCK), tool_choice=NamedToolChoice("get_weather"), reasoning_effort="none")
    clock = {
        "chatml": '<tool_call>\n{"name": "get_time", "arguments": {"zone": "UTC", "extra": [1]}}\n</tool_call>',
        "glm": "<tool_call>get_time<arg_key>zone</arg_key><arg_value>UTC</arg_value></tool_call>",
        "deepseek-v4": '<｜DSML｜tool_calls>\n<｜DSML｜invoke name="get_time">\n<｜DSML｜parameter name="zone" '
                       'string="true">UTC</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>',
        "deepseek-v4.1": '<｜DSML｜ calls>\n<｜DSML｜ invoke name="get_time">\n<｜DSML｜ parameter name="zone" '
                         'string="true">UTC</｜DSML｜ parameter>\n</｜DSML｜ invoke>\n</｜DSML｜ calls>',
    }[family]
    assert Recognizer(held(required, family)).accepts(clock)
    assert read(family, required, clock)["calls"][0][0] == "get_time"
    assert not Recognizer(held(named, family)).accepts(clock)


@pytest.mark.parametrize("family", ["chatml", "glm"])
def test_parallel_calls_may_follow_one_another_unless_the_request_says_one(family):
    call, separator = CALLS[family]
    two = call + separator + call
    parallel = conversation(tools=(WEATHER,), tool_choice="required", reasoning_effort="none")
    single = conversation(tools=(WEATHER,), tool_choice="required", reasoning_effort="none",
                          parallel_tool_calls=False)
    assert Recognizer(held(parallel, family)).accepts(two)
    assert read(family, parallel, two)["calls"] == [("get_weather", ARGUMENTS)] * 2
    assert not Recognizer(held(single, family)).accepts(two)


def test_a_thinking_glm_reasons_before_its_required_call():
    conv = conversation(tools=(WEATHER,), tool_choice="required")
    accepts = Recognizer(held(conv, "glm")).accepts
    call, _ = CALLS["glm"]
    assert accepts("I should look it up.</think>" + call)
    assert read("glm", conv, "I should look it up.</think>" + call) == {
        "reasoning": "I should look it up.", "text": "", "calls": [("get_weather", ARGUMENTS)]}
    assert not accepts(call)


@pytest.mark.parametrize("family", ["chatml", "glm", "deepseek-v4.1"])
def test_no_grammar_where_the_turn_may_be_text_or_a_call_or_is_plain_text(family):
    for conv in [conversation(), conversation(tools=(WEATHER,)),
                 conversation(tools=(WEATHER,), output=OutputSchema(SCHEMA))]:
        assert held(conv, family) is None
    # tools hidden by tool_choice none: the structured answer is held
    hidden = Conversation.from_request(QUESTION, tools=(WEATHER,), tool_choice="none", reasoning_effort=None,
                                       parallel_tool_calls=None, output=OutputSchema(SCHEMA))
    assert held(hidden, family) is not None
