"""GLM's call forms over HTTP: the JSON-argument form becomes a tool call; a truly malformed call fails clearly.

A model that writes a call Maya cannot read has failed, not the client: Chat
answers 500 `server_error`, as OpenAI does when its model fails, with code
`invalid_tool_call` and a message that says the model produced an invalid call
and why; streamed Chat ends with that error object as its last event; Responses
fails the response with that message (its `error` event with that code; the
response object's `error.code` is OpenAI's fixed enum, `server_error`).
"""

from __future__ import annotations

import json

import openai
import pytest

from tests.chat.test_families_through_chat import ASK, TOOLS
from tests.responses.api.sse import read_stream

JSON_FORM = 'Checking.</think><tool_call>get_weather>{"city": "Paris", "days": 3}</tool_call>'
UNCLOSED_JSON_FORM = 'Checking.</think><tool_call>get_weather>{"city": "Paris", "days": 3}'
MALFORMED = "Checking.</think><tool_call>get_weather>{\"city\": \"Paris\"} and more</tool_call>"
INVALID_MESSAGE = "the model produced an invalid tool call (malformed)"


@pytest.mark.parametrize("family", ["glm-5.3", "glm-5.2", "glm-4.7"])
@pytest.mark.parametrize("script", [JSON_FORM, UNCLOSED_JSON_FORM])
def test_the_json_form_is_a_tool_call_over_chat(start_server, family, script):
    server = start_server([script], family=family)
    answer = server.client().chat.completions.create(model="m", messages=ASK, tools=TOOLS, reasoning_effort="high")
    message = answer.choices[0].message
    assert answer.choices[0].finish_reason == "tool_calls"
    assert [(c.function.name, json.loads(c.function.arguments)) for c in message.tool_calls] == [
        ("get_weather", {"city": "Paris", "days": 3})]
    assert message.content in (None, "")


def test_the_json_form_streams_as_a_tool_call(start_server):
    server = start_server([JSON_FORM], family="glm-5.3")
    chunks = list(server.client().chat.completions.create(model="m", messages=ASK, tools=TOOLS, stream=True))
    calls = [c for chunk in chunks if chunk.choices for c in (chunk.choices[0].delta.tool_calls or ())]
    assert calls[0].function.name == "get_weather"
    assert json.loads("".join(c.function.arguments or "" for c in calls)) == {"city": "Paris", "days": 3}
    assert [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason] == ["tool_calls"]


def test_the_json_form_is_a_function_call_over_responses(start_server):
    server = start_server([JSON_FORM], family="glm-5.3")
    response = server.client().responses.create(model="m", input=ASK, tools=[
        {"type": "function", "name": t["function"]["name"], "parameters": t["function"]["parameters"]} for t in TOOLS])
    assert response.status == "completed"
    calls = [item for item in response.output if item.type == "function_call"]
    assert [(c.name, json.loads(c.arguments)) for c in calls] == [("get_weather", {"city": "Paris", "days": 3})]


def test_a_malformed_call_is_a_clear_500_on_chat(start_server):
    server = start_server([MALFORMED], family="glm-5.3")
    with pytest.raises(openai.InternalServerError) as caught:
        server.client().chat.completions.create(model="m", messages=ASK, tools=TOOLS)
    assert caught.value.status_code == 500
    body = caught.value.body
    assert body["type"] == "server_error" and body["code"] == "invalid_tool_call" and body["param"] is None
    assert body["message"].startswith(INVALID_MESSAGE) and "JSON object" in body["message"]


def test_a_malformed_call_ends_streamed_chat_with_the_error(start_server):
    server = start_server([MALFORMED], family="glm-5.3")
    with server.http() as http:
        with http.stream("POST", "/v1/chat/completions",
                         json={"model": "m", "messages": ASK, "tools": TOOLS, "stream": True}) as answer:
            frames = [line[6:] for line in answer.iter_lines() if line.startswith("data: ")]
    assert answer.status_code == 200
    error = json.loads(frames[-2] if frames[-1] == "[DONE]" else frames[-1])["error"]
    assert error["code"] == "invalid_tool_call" and error["message"].startswith(INVALID_MESSAGE)


def test_a_malformed_call_fails_the_response_saying_why(start_server):
    server = start_server([MALFORMED], family="glm-5.3")
    tools = [{"type": "function", "name": t["function"]["name"], "parameters": t["function"]["parameters"]}
             for t in TOOLS]
    response = server.client().responses.create(model="m", input=ASK, tools=tools)
    assert response.status == "failed"  # a response's error.code is OpenAI's fixed enum: server_error
    assert response.error.code == "server_error" and response.error.message.startswith(INVALID_MESSAGE)
    with server.http() as http:
        stream = read_stream(http, {"model": "m", "input": ASK, "tools": tools})
    assert stream.of("error")[0].code == "invalid_tool_call"
    assert stream.final.status == "failed" and stream.final.error.message.startswith(INVALID_MESSAGE)
