"""Function tools through /v1/responses: calls as `function_call` items, tool_choice and the tool policy.

The scripted engine writes each family's real call syntax (GLM `<tool_call>`, DeepSeek-V4
DSML, ChatML/Hermes JSON); the server must turn it into function_call items whose streamed
argument deltas join to the done arguments, and fail, truncate or stop exactly as the spec says.
"""

from __future__ import annotations

import json

import pytest

from tests.chat.test_families_through_chat import chatml_call, dsml_block, dsml_call, glm_call

from tests.responses.api.shapes import CALL, OPENING, REASONING
from tests.responses.api.sse import post_json, read_stream
from tests.responses.api.test_text_and_reasoning import tokens

ASK = "Weather in Paris for 3 days?"
WEATHER = {
    "type": "function", "name": "get_weather", "description": "Weather for a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
                   "required": ["city"]},
}
NOW = {"type": "function", "name": "now", "parameters": {"type": "object", "properties": {}}}
TOOLS = [WEATHER, NOW]
PARIS = {"city": "Paris", "days": 3}


def one_call(family: str, name: str = "get_weather", **args) -> str:
    """The family's raw output for "Checking.</think>" + one call."""
    args = args or (PARIS if name == "get_weather" else {})
    if family == "glm":
        return "Checking.</think>" + glm_call(name, **args)
    if family == "deepseek-v4":
        return "Checking.</think>" + dsml_block(dsml_call(name, **args))
    return "<think>Checking.</think>" + chatml_call(name, **args)


def two_calls(family: str) -> str:
    if family == "glm":
        return "Checking.</think>" + glm_call("get_weather", **PARIS) + glm_call("now")
    if family == "deepseek-v4":
        return "Checking.</think>" + dsml_block(dsml_call("get_weather", **PARIS), dsml_call("now"))
    return "<think>Checking.</think>" + chatml_call("get_weather", **PARIS) + "\n" + chatml_call("now")


TEXT_ONLY = {"glm": "Checking.</think>No tool needed.", "deepseek-v4": "Checking.</think>No tool needed.",
             "chatml": "<think>Checking.</think>No tool needed."}
FAMILIES = ["chatml", "deepseek-v4", "glm"]


def calls_of(response) -> list[tuple[str, dict]]:
    return [(item.name, json.loads(item.arguments)) for item in response.output if item.type == "function_call"]


@pytest.mark.parametrize("family", FAMILIES)
def test_single_call_non_streaming(start_server, family):
    server = start_server([one_call(family)], family=family)
    response = server.client().responses.create(model="m", input=ASK, tools=TOOLS)
    assert response.status == "completed"
    reasoning, call = response.output
    assert reasoning.type == "reasoning" and reasoning.content[0].text == "Checking."
    assert call.type == "function_call" and call.status == "completed"
    assert call.name == "get_weather" and json.loads(call.arguments) == PARIS
    assert call.call_id.startswith("call_") and call.id and call.id != call.call_id
    assert response.output_text == ""
    assert response.usage.output_tokens == len(tokens(server, one_call(family)))
    assert "get_weather" in server.engine.last_prompt_text  # the declared tool reached the prompt


@pytest.mark.parametrize("family", FAMILIES)
def test_two_calls_stream(start_server, family):
    server = start_server([two_calls(family)], family=family)
    with server.http() as http:
        stream = read_stream(http, {"model": "m", "input": ASK, "tools": TOOLS})
    assert stream.shape() == OPENING + REASONING + CALL + CALL + ["response.completed"]
    done = stream.of("response.function_call_arguments.done")
    assert [json.loads(e.arguments) for e in done] == [PARIS, {}]
    _, weather, now = (e.item for e in stream.of("response.output_item.done"))
    assert (weather.name, now.name) == ("get_weather", "now")
    assert weather.call_id != now.call_id
    for index, item in ((1, weather), (2, now)):
        deltas = [e for e in stream.of("response.function_call_arguments.delta") if e.item_id == item.id]
        assert "".join(e.delta for e in deltas) == item.arguments
        assert deltas and {e.output_index for e in deltas} == {index}
    assert calls_of(stream.final) == [("get_weather", PARIS), ("now", {})]
    assert stream.final.usage.output_tokens == len(tokens(server, two_calls(family)))


def test_two_calls_with_the_sdk_stream_helper(start_server):
    server = start_server([two_calls("glm")], family="glm")
    with server.client().responses.stream(model="m", input=ASK, tools=TOOLS) as stream:
        events = list(stream)
        final = stream.get_final_response()
    done = [e for e in events if e.type == "response.function_call_arguments.done"]
    assert [json.loads(e.arguments) for e in done] == [PARIS, {}]
    assert calls_of(final) == [("get_weather", PARIS), ("now", {})]


# -- tool_choice ------------------------------------------------------------------------


def test_tool_choice_auto_allows_plain_text(start_server):
    server = start_server([TEXT_ONLY["glm"]], family="glm")
    response = server.client().responses.create(model="m", input=ASK, tools=TOOLS, tool_choice="auto")
    assert response.status == "completed" and response.output_text == "No tool needed."
    assert response.tool_choice == "auto"


def test_tool_choice_none_hides_the_tools_and_answers_in_text(start_server):
    server = start_server([TEXT_ONLY["chatml"]])
    response = server.client().responses.create(model="m", input=ASK, tools=TOOLS, tool_choice="none")
    assert response.status == "completed" and response.output_text == "No tool needed."
    assert "get_weather" not in server.engine.last_prompt_text
    assert response.tool_choice == "none"


@pytest.mark.parametrize("family", FAMILIES)
def test_tool_choice_none_fails_a_call(start_server, family):
    server = start_server([one_call(family)], family=family)
    with server.http() as http:
        stream = read_stream(http, {"model": "m", "input": ASK, "tools": TOOLS, "tool_choice": "none"})
    assert stream.shape() == OPENING + REASONING + ["error", "response.failed"]
    assert stream.of("error")[0].code == "invalid_tool_call"
    assert "tool_choice is none" in stream.final.error.message


def test_tool_choice_required_with_a_call(start_server):
    server = start_server([one_call("glm")], family="glm")
    response = server.client().responses.create(model="m", input=ASK, tools=TOOLS, tool_choice="required")
    assert response.status == "completed" and calls_of(response) == [("get_weather", PARIS)]
    assert response.tool_choice == "required"


@pytest.mark.parametrize("family", FAMILIES)
def test_tool_choice_required_without_a_call_fails(start_server, family):
    server = start_server([TEXT_ONLY[family]], family=family)
    with server.http() as http:
        stream = read_stream(http, {"model": "m", "input": ASK, "tools": TOOLS, "tool_choice": "required"})
    assert stream.types[-2:] == ["error", "response.failed"]
    assert "required tool call" in stream.final.error.message
    assert stream.final.usage.output_tokens == len(tokens(server, TEXT_ONLY[family]))


def test_named_tool_choice_with_that_call(start_server):
    server = start_server([one_call("deepseek-v4")], family="deepseek-v4")
    choice = {"type": "function", "name": "get_weather"}
    response = server.client().responses.create(model="m", input=ASK, tools=TOOLS, tool_choice=choice)
    assert response.status == "completed" and calls_of(response) == [("get_weather", PARIS)]
    assert response.tool_choice.type == "function" and response.tool_choice.name == "get_weather"


def test_named_tool_choice_fails_another_call(start_server):
    server = start_server([one_call("glm")], family="glm")
    with server.http() as http:
        response, _ = post_json(http, {"model": "m", "input": ASK, "tools": TOOLS,
                                       "tool_choice": {"type": "function", "name": "now"}})
    assert response.status == "failed"
    assert "tool_choice names 'now'" in response.error.message
    assert calls_of(response) == []


def test_named_tool_choice_without_any_call_fails(start_server):
    server = start_server([TEXT_ONLY["chatml"]])
    with server.http() as http:
        response, _ = post_json(http, {"model": "m", "input": ASK, "tools": TOOLS,
                                       "tool_choice": {"type": "function", "name": "now"}})
    assert response.status == "failed" and "required tool call" in response.error.message


# -- undeclared, parallel, truncated, unterminated --------------------------------------


@pytest.mark.parametrize("family", FAMILIES)
def test_undeclared_function_fails_the_stream(start_server, family):
    server = start_server([one_call(family, "launch_rocket", target="moon")], family=family)
    with server.http() as http:
        stream = read_stream(http, {"model": "m", "input": ASK, "tools": TOOLS})
    assert stream.shape() == OPENING + REASONING + ["error", "response.failed"]
    error = stream.of("error")[0]
    assert error.code == "invalid_tool_call" and "launch_rocket" in error.message
    assert stream.final.status == "failed" and "launch_rocket" in stream.final.error.message
    assert [item.type for item in stream.final.output] == ["reasoning"]
    assert stream.final.usage.output_tokens > 0


def test_undeclared_function_fails_non_streaming(start_server):
    server = start_server([one_call("glm", "launch_rocket", target="moon")], family="glm")
    response = server.client().responses.create(model="m", input=ASK, tools=[WEATHER])
    assert response.status == "failed"
    assert "undeclared function 'launch_rocket'" in response.error.message
    assert calls_of(response) == []


@pytest.mark.parametrize("family", FAMILIES)
def test_parallel_tool_calls_false_stops_at_the_first_call(start_server, family):
    server = start_server([two_calls(family)], family=family)
    with server.http() as http:
        full, _ = post_json(http, {"model": "m", "input": ASK, "tools": TOOLS})
        stream = read_stream(http, {"model": "m", "input": ASK, "tools": TOOLS, "parallel_tool_calls": False})
    single = stream.final
    assert stream.shape() == OPENING + REASONING + CALL + ["response.completed"]
    assert single.parallel_tool_calls is False and full.parallel_tool_calls is True
    assert calls_of(single) == [("get_weather", PARIS)]
    assert single.usage.output_tokens < full.usage.output_tokens
    if family == "glm":  # the tokens actually consumed: through the first call's closing tag
        first = "Checking.</think>" + glm_call("get_weather", **PARIS)
        assert single.usage.output_tokens == len(tokens(server, first))


def truncated_script() -> str:
    return "I will look up the weather in Paris for the user now.</think>" + glm_call("get_weather", **PARIS)


def limit_inside_the_call(server) -> int:
    """A max_output_tokens that ends the output inside the call's first argument value."""
    pieces = tokens(server, truncated_script())
    limit = pieces.index("<arg_value>") + 2  # the value's first token is generated, its close is not
    assert limit >= 16  # OpenAI's minimum max_output_tokens
    return limit


def test_truncated_call_is_incomplete_stream(start_server):
    server = start_server([truncated_script()], family="glm")
    limit = limit_inside_the_call(server)
    with server.http() as http:
        stream = read_stream(http, {"model": "m", "input": ASK, "tools": TOOLS, "max_output_tokens": limit})
    assert stream.shape() == OPENING + REASONING + [
        "response.output_item.added",
        "response.function_call_arguments.delta*",
        "response.output_item.done",
        "response.incomplete",
    ]
    assert stream.of("response.function_call_arguments.done") == []
    call = stream.of("response.output_item.done")[-1].item
    assert call.type == "function_call" and call.status == "incomplete" and call.name == "get_weather"
    final = stream.final
    assert final.status == "incomplete" and final.incomplete_details.reason == "max_output_tokens"
    assert final.output[-1].status == "incomplete"
    assert final.usage.output_tokens == limit


def test_truncated_call_is_incomplete_non_streaming(start_server):
    server = start_server([truncated_script()], family="glm")
    limit = limit_inside_the_call(server)
    response = server.client().responses.create(model="m", input=ASK, tools=TOOLS, max_output_tokens=limit)
    assert response.status == "incomplete" and response.incomplete_details.reason == "max_output_tokens"
    assert [(item.type, item.status) for item in response.output] == [("reasoning", "completed"),
                                                                       ("function_call", "incomplete")]


UNTERMINATED = "Look.</think><tool_call>get_weather<arg_key>city</arg_key><arg_value>Par"


def test_end_of_turn_inside_a_call_fails(start_server):
    server = start_server([UNTERMINATED], family="glm")
    with server.http() as http:
        stream = read_stream(http, {"model": "m", "input": ASK, "tools": TOOLS}, check=False)
    assert stream.types[-2:] == ["error", "response.failed"]
    assert "unterminated" in stream.of("error")[0].message
    assert stream.of("response.function_call_arguments.done") == []
    assert stream.final.status == "failed"
    assert stream.final.usage.output_tokens == len(tokens(server, UNTERMINATED))


def test_end_of_turn_inside_a_call_fails_non_streaming(start_server):
    server = start_server([UNTERMINATED], family="glm")
    response = server.client().responses.create(model="m", input=ASK, tools=TOOLS)
    assert response.status == "failed" and "unterminated" in response.error.message


def test_a_failed_stream_closes_the_started_call(start_server):
    server = start_server([UNTERMINATED], family="glm")
    with server.http() as http:
        stream = read_stream(http, {"model": "m", "input": ASK, "tools": TOOLS})  # full invariants
    assert stream.final.output[-1].type == "function_call"
    assert stream.final.output[-1].status == "incomplete"


def test_text_then_a_call(start_server):
    script = "Let me check." + "\n" + chatml_call("get_weather", **PARIS)
    server = start_server([script])
    with server.http() as http:
        stream = read_stream(http, {"model": "m", "input": ASK, "tools": TOOLS})
    message_events = [
        "response.output_item.added", "response.content_part.added", "response.output_text.delta*",
        "response.output_text.done", "response.content_part.done", "response.output_item.done",
    ]
    assert stream.shape() == OPENING + message_events + CALL + ["response.completed"]
    message, call = stream.final.output
    assert message.content[0].text.strip() == "Let me check."
    assert (call.name, json.loads(call.arguments)) == ("get_weather", PARIS)
