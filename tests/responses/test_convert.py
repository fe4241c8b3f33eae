"""Request input → neutral conversation: roles, instructions, reasoning replay, call groups, images."""

from __future__ import annotations

import pytest

from maya_server.neutral.conversation import (
    ImagePart, Message, NamedToolChoice, OutputSchema, TextPart, ToolCall, ToolResult, ToolSpec,
)
from maya_server.errors import InvalidRequestError
from maya_server.responses.conversion.convert import to_conversation, to_settings
from maya_server.responses.request.items import FunctionCallItem, parse_input
from maya_server.util.echoed import ECHOED_CHARS

from tests.responses.helpers import STRICT_PARAMS, TOOL, assistant, call, image, output, parse, reasoning, user


def turns(items, *, prior=(), **fields):
    return to_conversation(parse(input=items, **fields), prior=prior).turns


def conversion_error(items, *, prior=(), **fields) -> InvalidRequestError:
    request = parse(input=items, **fields)
    with pytest.raises(InvalidRequestError) as caught:
        to_conversation(request, prior=prior)
    return caught.value


def tool_call(call_id, name="lookup", arguments='{"q": "x"}'):
    return ToolCall(call_id, name, arguments)


def result(call_id, text="ok", name="lookup"):
    return ToolResult(call_id, (TextPart(text),), name)


def test_string_input():
    assert turns("hello") == (Message("user", (TextPart("hello"),)),)


def test_instructions_come_first_as_a_system_message():
    history = [{"role": "developer", "content": "dev rules"}, user("q")]
    assert turns(history, instructions="Be brief.") == (
        Message("system", (TextPart("Be brief."),)),
        Message("developer", (TextPart("dev rules"),)),
        Message("user", (TextPart("q"),)),
    )


def test_empty_instructions_add_nothing():
    assert turns("q", instructions="") == (Message("user", (TextPart("q"),)),)


def test_full_history_with_output_text_and_refusal():
    history = [
        {"role": "system", "content": [{"type": "input_text", "text": "sys"}]},
        user("one"),
        assistant("first answer"),
        user("two"),
        {"role": "assistant", "content": [{"type": "refusal", "refusal": "I can't."}]},
        {"role": "assistant", "content": "plain string"},
        user("three"),
    ]
    assert turns(history) == (
        Message("system", (TextPart("sys"),)),
        Message("user", (TextPart("one"),)),
        Message("assistant", (TextPart("first answer"),)),
        Message("user", (TextPart("two"),)),
        Message("assistant", (TextPart("I can't."),)),
        Message("assistant", (TextPart("plain string"),)),
        Message("user", (TextPart("three"),)),
    )


def test_reasoning_is_replayed_on_the_following_assistant_message():
    history = [user(), reasoning("let me think"), assistant("answer"), user("more")]
    assert turns(history)[1] == Message("assistant", (TextPart("answer"),), "let me think")


def test_reasoning_without_following_output_stays_in_history():
    assert turns([user(), reasoning("unfinished"), user("again")])[1] == Message("assistant", (), "unfinished")


def test_reasoning_items_without_text_add_nothing():
    empty = {"type": "reasoning", "id": "rs_1", "summary": []}
    assert turns([user(), empty, user("again")]) == (Message("user", (TextPart("hi"),)),
                                                     Message("user", (TextPart("again"),)))
    history = [user(), reasoning("a"), {**empty, "content": []}, reasoning("b"), call("x"), empty, output("x")]
    assert turns(history)[1] == Message("assistant", (), "a\n\nb", (tool_call("x"),))


def test_reasoning_after_an_answer_starts_the_next_assistant_turn():
    history = [user(), reasoning("r1"), assistant("a1"), reasoning("r2"), assistant("a2")]
    assert turns(history)[1:] == (
        Message("assistant", (TextPart("a1"),), "r1"),
        Message("assistant", (TextPart("a2"),), "r2"),
    )


def test_function_calls_group_into_one_assistant_turn_with_text_and_reasoning():
    history = [user(), reasoning("need data"), assistant("Looking up."), call("a"), call("b", "fetch"),
               output("a", "ra"), output("b", "rb")]
    assert turns(history)[1:] == (
        Message("assistant", (TextPart("Looking up."),), "need data", (tool_call("a"), tool_call("b", "fetch"))),
        result("a", "ra"),
        result("b", "rb", "fetch"),
    )


def test_results_arriving_out_of_order_are_put_in_call_order():
    history = [user(), call("a"), call("b"), call("c"), output("c", "rc"), output("a", "ra"), output("b", "rb")]
    assert turns(history)[2:] == (result("a", "ra"), result("b", "rb"), result("c", "rc"))


def test_interleaved_call_and_output_pairs_are_separate_turns():
    history = [user(), call("a"), output("a"), call("b"), output("b"), assistant("done")]
    assert turns(history)[1:] == (
        Message("assistant", (), None, (tool_call("a"),)),
        result("a"),
        Message("assistant", (), None, (tool_call("b"),)),
        result("b"),
        Message("assistant", (TextPart("done"),)),
    )


@pytest.mark.parametrize(
    "history, param",
    [
        ([user(), call("a")], "input[1].call_id"),
        ([user(), call("a"), call("b"), output("b")], "input[1].call_id"),
        ([user(), call("a"), user("moving on")], "input[1].call_id"),
        ([user(), call("a"), assistant("text before output")], "input[1].call_id"),
        ([user(), call("a"), call("b"), output("a"), user("x"), output("b")], "input[2].call_id"),
    ],
    ids=["at end", "one of a group", "user message follows", "assistant text follows", "output too late"],
)
def test_a_call_without_its_output_is_rejected_at_the_call(history, param):
    error = conversion_error(history)
    assert error.param == param
    assert "No tool output found for function call" in error.message


@pytest.mark.parametrize(
    "history, param",
    [
        ([user(), output("zzz")], "input[1].call_id"),
        ([user(), call("a"), output("a"), output("zzz")], "input[3].call_id"),
        ([user(), call("a"), output("a"), user("x"), output("a")], "input[4].call_id"),
        ([user(), output("a"), call("a"), output("a")], "input[1].call_id"),
    ],
    ids=["no call at all", "unknown id in a group", "output repeated later", "output before its call"],
)
def test_an_output_without_its_call_is_rejected_at_the_output(history, param):
    error = conversion_error(history)
    assert error.param == param
    assert "No tool call found for function call output" in error.message


def test_duplicate_call_ids_and_outputs():
    assert conversion_error([user(), call("a"), call("a"), output("a")]).param == "input[2].call_id"
    assert conversion_error([user(), call("a"), output("a"), output("a")]).param == "input[3].call_id"


def test_output_naming_another_function_is_rejected():
    history = [user(), call("a"), {**output("a"), "name": "other"}]
    assert conversion_error(history).param == "input[2].name"


def test_images_become_image_parts_that_know_their_param():
    history = [{"role": "user", "content": [{"type": "input_text", "text": "what is it?"}, image()]}]
    (message,) = turns(history)
    assert message == Message("user", (TextPart("what is it?"), ImagePart("https://example.com/cat.png")))
    assert message.content[1].param == "input[0].content[1].image_url"


def test_function_results_with_text_and_image_parts():
    data_url = "data:image/png;base64,iVBORw0KGgo="
    history = [user(), call("a"), output("a", [{"type": "input_text", "text": "chart:"}, image(data_url)])]
    result = turns(history)[2]
    assert result == ToolResult("a", (TextPart("chart:"), ImagePart(data_url)), "lookup")
    assert result.content[1].param == "input[2].output[1].image_url"


def test_prior_items_are_prepended_and_can_be_answered_by_the_input():
    prior = parse_input([user("look up alpha"), call("a")])
    assert turns([output("a", "alpha=1")], prior=prior) == (
        Message("user", (TextPart("look up alpha"),)),
        Message("assistant", (), None, (tool_call("a"),)),
        result("a", "alpha=1"),
    )


def test_prior_call_left_unanswered_is_reported_at_input():
    prior = parse_input([user(), call("a")])
    assert conversion_error([user("no output")], prior=prior).param == "input"


def test_a_long_call_id_is_quoted_cut_short():
    """Validation bounds `call_id`; an error naming one still quotes at most `ECHOED_CHARS` of it, as it
    does every id, whatever a history holds (a 100 kB id once came back whole)."""
    long_id = "c" * 10_000
    prior = (FunctionCallItem.model_construct(type="function_call", call_id=long_id, name="f", arguments="{}"),)
    error = conversion_error([user("no output")], prior=prior)
    assert error.param == "input"
    assert "c" * ECHOED_CHARS + "…" in error.message and len(error.message) < 1_000


def test_images_inside_prior_items_point_at_previous_response_id():
    prior = parse_input([{"role": "user", "content": [image()]}])
    assert turns([user()], prior=prior)[0].content[0].param == "previous_response_id"


def test_previous_response_with_no_new_input():
    prior = parse_input([user("remember 73"), assistant("ok")])
    request = parse(input=..., previous_response_id="resp_1")
    assert len(to_conversation(request, prior=prior).turns) == 2


def test_empty_input_is_rejected():
    assert conversion_error([]).param == "input"
    assert conversion_error([], instructions="only instructions").param == "input"


def test_tools_choice_effort_and_parallel_calls():
    strict = {"type": "function", "name": "exact", "parameters": STRICT_PARAMS, "strict": True}
    conversation = to_conversation(parse(
        tools=[TOOL, strict], tool_choice={"type": "function", "name": "exact"}, parallel_tool_calls=False,
        reasoning={"effort": "high"},
    ))
    assert conversation.tools == (
        ToolSpec("lookup", None, TOOL["parameters"], False), ToolSpec("exact", None, STRICT_PARAMS, True),
    )
    assert conversation.tool_choice == NamedToolChoice("exact")
    assert conversation.parallel_tool_calls is False
    assert conversation.reasoning_effort == "high"


def test_tool_choice_none_hides_the_tools():
    conversation = to_conversation(parse(tools=[TOOL], tool_choice="none"))
    assert conversation.tools == () and conversation.tool_choice == "none"


def test_structured_output_is_carried_for_the_family_to_word():
    fmt = {"type": "json_schema", "name": "count", "schema": STRICT_PARAMS, "strict": True}
    output = to_conversation(parse(text={"format": fmt})).output
    assert output == OutputSchema(STRICT_PARAMS, "count", None)
    assert to_conversation(parse(text={"format": {"type": "json_object"}})).output == OutputSchema()
    assert to_conversation(parse()).output is None and to_conversation(parse()).extra_system == ()


def test_settings():
    settings = to_settings(parse(max_output_tokens=64, temperature=0, top_p=0.5))
    assert (settings.max_tokens, settings.temperature, settings.top_p) == (64, 0.0, 0.5)
    defaults = to_settings(parse())
    assert (defaults.max_tokens, defaults.temperature, defaults.top_p) == (None, 1.0, 1.0)
