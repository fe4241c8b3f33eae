"""What the model is given: `input` and `instructions` as they reach the engine's prompt.

The scripted engine records the exact prompt it was asked to continue; ChatML renders
it readably, so most assertions compare the whole prompt text.
"""

from __future__ import annotations

import json

import pytest

from tests.responses.api.sse import post_error, post_json
from tests.responses.api.test_function_tools import ASK, FAMILIES, PARIS, TOOLS, one_call

END = "<|im_end|>\n"


def chatml(*turns: tuple[str, str]) -> str:
    """A ChatML prompt of (role, text) turns, open for the assistant."""
    return "".join(f"<|im_start|>{role}\n{text}{END}" for role, text in turns) + "<|im_start|>assistant\n"


def test_string_input_is_one_user_message(start_server):
    server = start_server(["ok"])
    response = server.client().responses.create(model="m", input="Hello there")
    assert response.output_text == "ok"
    assert server.engine.last_prompt_text == chatml(("user", "Hello there"))


def test_full_history_with_every_role(start_server):
    server = start_server(["ok"])
    history = [
        {"role": "system", "content": "SYS-ONE"},
        {"role": "developer", "content": [{"type": "input_text", "text": "DEV-TWO"}]},
        {"role": "user", "content": "USER-THREE"},
        {"type": "message", "role": "assistant",
         "content": [{"type": "output_text", "text": "ASSIST-FOUR", "annotations": []}]},
        {"role": "user", "content": [{"type": "input_text", "text": "USER-FIVE"}]},
    ]
    server.client().responses.create(model="m", input=history)
    assert server.engine.last_prompt_text == chatml(
        ("system", "SYS-ONE"), ("system", "DEV-TWO"), ("user", "USER-THREE"), ("assistant", "ASSIST-FOUR"),
        ("user", "USER-FIVE"),
    )


def test_instructions_are_a_system_message_for_this_request_only(start_server):
    server = start_server(["ok"])
    client = server.client()
    first = client.responses.create(model="m", input="Hello", instructions="Be terse.")
    assert server.engine.last_prompt_text == chatml(("system", "Be terse."), ("user", "Hello"))
    assert first.instructions == "Be terse."
    second = client.responses.create(model="m", input="Hello")
    assert server.engine.last_prompt_text == chatml(("user", "Hello"))
    assert second.instructions is None


def test_instructions_come_before_a_system_message_in_input(start_server):
    server = start_server(["ok"])
    server.client().responses.create(
        model="m", instructions="RULES", input=[{"role": "system", "content": "HISTORY-SYS"}, {"role": "user", "content": "hi"}]
    )
    assert server.engine.last_prompt_text == chatml(("system", "RULES"), ("system", "HISTORY-SYS"), ("user", "hi"))


TWO_CALLS_ANSWERED_BACKWARDS = [
    {"role": "user", "content": "Weather and time?"},
    {"type": "function_call", "call_id": "call_a", "name": "get_weather", "arguments": '{"city": "Paris"}'},
    {"type": "function_call", "call_id": "call_b", "name": "now", "arguments": "{}"},
    {"type": "function_call_output", "call_id": "call_b", "output": "RESULT-B"},
    {"type": "function_call_output", "call_id": "call_a", "output": "RESULT-A"},
]


def test_results_in_a_different_order_reach_the_prompt_in_call_order_chatml(start_server):
    server = start_server(["It is sunny at noon."])
    response = server.client().responses.create(model="m", input=TWO_CALLS_ANSWERED_BACKWARDS, tools=TOOLS)
    assert response.output_text == "It is sunny at noon."
    prompt = server.engine.last_prompt_text
    calls = ('<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>\n'
             '<tool_call>\n{"name": "now", "arguments": {}}\n</tool_call>')
    results = "<tool_response>\nRESULT-A\n</tool_response>\n<tool_response>\nRESULT-B\n</tool_response>"
    assert prompt.endswith(chatml(("user", "Weather and time?"), ("assistant", calls), ("user", results)))


@pytest.mark.parametrize("family", FAMILIES)
def test_results_in_a_different_order_reach_the_prompt(start_server, family):
    opener = "" if family == "chatml" else "Done.</think>"
    server = start_server([opener + "It is sunny at noon."], family=family)
    response = server.client().responses.create(model="m", input=TWO_CALLS_ANSWERED_BACKWARDS, tools=TOOLS)
    assert response.status == "completed" and response.output_text == "It is sunny at noon."
    prompt = server.engine.last_prompt_text
    assert prompt.count("RESULT-A") == 1 and prompt.count("RESULT-B") == 1
    assert prompt.index("get_weather", prompt.index("Weather and time?")) < prompt.index("RESULT-A")
    assert prompt.index("RESULT-A") < prompt.index("RESULT-B")  # results follow their calls' order


def test_a_call_without_its_result_is_refused(start_server):
    server = start_server(["ok"])
    history = TWO_CALLS_ANSWERED_BACKWARDS[:4]  # call_a has no output
    with server.http() as http:
        error = post_error(http, {"model": "m", "input": history, "tools": TOOLS})
    assert error["param"] == "input[1].call_id"
    assert "call_a" in error["message"]
    assert server.engine.calls == 0


def test_a_result_without_its_call_is_refused(start_server):
    server = start_server(["ok"])
    history = [{"role": "user", "content": "hi"}, {"type": "function_call_output", "call_id": "call_x", "output": "?"}]
    with server.http() as http:
        error = post_error(http, {"model": "m", "input": history})
    assert error["param"] == "input[1].call_id"
    assert server.engine.calls == 0


def test_function_result_with_text_parts(start_server):
    server = start_server(["ok"])
    history = TWO_CALLS_ANSWERED_BACKWARDS[:3] + [
        {"type": "function_call_output", "call_id": "call_a", "output": [{"type": "input_text", "text": "PART-A"}]},
        {"type": "function_call_output", "call_id": "call_b", "output": "RESULT-B"},
    ]
    server.client().responses.create(model="m", input=history, tools=TOOLS)
    assert "PART-A" in server.engine.last_prompt_text


def test_an_image_without_a_vision_encoder_is_refused(start_server):
    server = start_server(["ok"])
    image = {"type": "input_image", "image_url": "data:image/png;base64,iVBORw0KGgo=", "detail": "auto"}
    body = {"model": "m", "input": [{"role": "user", "content": [{"type": "input_text", "text": "what is it?"}, image]}]}
    with server.http() as http:
        error = post_error(http, body)
    assert error["param"] == "input[0].content[1].image_url"
    assert error["code"] == "images_not_supported"
    assert server.engine.calls == 0


@pytest.mark.parametrize("family", FAMILIES)
def test_store_false_flow_from_the_spec(start_server, family):
    """The spec's example: append `item.to_dict()` of the output and the results, then ask again."""
    answer = ("" if family == "chatml" else "Got it.</think>") + "It is sunny in Paris."
    server = start_server([one_call(family), answer], family=family)
    client = server.client()

    history = [{"role": "user", "content": ASK}]
    response = client.responses.create(model="m", input=history, tools=TOOLS, store=False)
    history += [item.to_dict() for item in response.output]
    for item in response.output:
        if item.type == "function_call":
            assert json.loads(item.arguments) == PARIS
            history.append({"type": "function_call_output", "call_id": item.call_id, "output": "SUNNY-22C"})
    assert [item["type"] for item in history[1:]] == ["reasoning", "function_call", "function_call_output"]

    with server.http() as http:  # the same history, read raw so the second answer is validated too
        second, _ = post_json(http, {"model": "m", "input": history, "tools": TOOLS, "store": False})
    assert second.status == "completed" and second.output_text == "It is sunny in Paris."
    prompt = server.engine.last_prompt_text
    assert "SUNNY-22C" in prompt and prompt.index("get_weather", prompt.index(ASK)) < prompt.index("SUNNY-22C")
    if family != "chatml":  # with tools declared, GLM and DeepSeek-V4 replay the call's reasoning
        assert prompt.index("Checking.", prompt.index(ASK)) < prompt.index("SUNNY-22C")
    assert server.engine.calls == 2
