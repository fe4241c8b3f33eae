"""LangChain's `ChatOpenAI` runs unchanged against Maya, over Chat Completions and over the Responses API.

invoke, stream, bind_tools (with the tool's result sent back) and
with_structured_output(method="json_schema"), in both modes (`use_responses_api`).
"""

from __future__ import annotations

import openai
import pydantic
import pytest
from langchain_core.messages import HumanMessage, ToolMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI

from tests.chat.test_families_through_chat import glm_call

MODES = {"chat-completions": False, "responses": True}
HELLO = "Greeting.</think>Hello from Maya."
CALL = "Looking it up.</think>" + glm_call("get_weather", city="Paris")
ANSWER = "Got it.</think>It is sunny in Paris."


class Count(pydantic.BaseModel):
    fruit: str
    count: int


@tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


def model(server, responses: bool) -> ChatOpenAI:
    return ChatOpenAI(model="glm", base_url=server.url + "/v1", api_key="unused", max_retries=0,
                      use_responses_api=responses)


def endpoint(responses: bool) -> str:
    return "/v1/responses" if responses else "/v1/chat/completions"


def text_of(message) -> str:
    return message.text if isinstance(message.text, str) else message.text()


@pytest.mark.parametrize("mode", MODES)
def test_invoke_and_stream(maya, mode):
    server, recorder = maya([HELLO])
    llm = model(server, MODES[mode])
    assert text_of(llm.invoke("Say hello")) == "Hello from Maya."
    streamed = [chunk for chunk in llm.stream("Say hello")]
    assert "".join(text_of(c) for c in streamed) == "Hello from Maya."
    assert len(streamed) > 2  # it really arrived in pieces
    assert [e.status for e in recorder.of(endpoint(MODES[mode]))] == [200, 200]


@pytest.mark.parametrize("mode", MODES)
def test_bind_tools_round_trip(maya, mode):
    server, recorder = maya([CALL, ANSWER])
    llm = model(server, MODES[mode]).bind_tools([get_weather])
    question = HumanMessage("What is the weather in Paris?")
    first = llm.invoke([question])
    assert [(c["name"], c["args"]) for c in first.tool_calls] == [("get_weather", {"city": "Paris"})]
    result = ToolMessage(get_weather.invoke(first.tool_calls[0]["args"]), tool_call_id=first.tool_calls[0]["id"])
    second = llm.invoke([question, first, result])
    assert text_of(second) == "It is sunny in Paris."
    assert "sunny in Paris" in server.engine.last_prompt_text
    assert [e.status for e in recorder.of(endpoint(MODES[mode]))] == [200, 200]


@pytest.mark.parametrize("mode", MODES)
def test_with_structured_output_json_schema(maya, mode):
    server, recorder = maya(['Counting.</think>{"fruit": "apple", "count": 3}'])
    structured = model(server, MODES[mode]).with_structured_output(Count, method="json_schema")
    assert structured.invoke("Count the apples.") == Count(fruit="apple", count=3)
    sent = recorder.of(endpoint(MODES[mode]))[0].request_json()
    fmt = sent["text"]["format"] if MODES[mode] else sent["response_format"]
    assert fmt["type"] == "json_schema"
    assert '"count"' in server.engine.last_prompt_text  # the schema reached the model's instructions


def test_previous_response_id_needs_store_true_and_the_404_says_so(maya):
    """LangChain leaves `store` unset and Maya's default is false, where OpenAI's is true: the fix docs/clients.md
    gives (`store=True`) makes turn 2 continue on the server; without it the 404 names that fix."""
    server, recorder = maya([HELLO, HELLO, HELLO])
    history = [HumanMessage("Say hello")]
    stored = ChatOpenAI(model="glm", base_url=server.url + "/v1", api_key="unused", max_retries=0,
                        use_responses_api=True, use_previous_response_id=True, store=True)
    first = stored.invoke(history)
    assert text_of(stored.invoke([*history, first, HumanMessage("Again")])) == "Hello from Maya."
    sent = recorder.of("/v1/responses")[1].request_json()
    assert sent["previous_response_id"] == first.response_metadata["id"] and sent["store"] is True
    unstored = ChatOpenAI(model="glm", base_url=server.url + "/v1", api_key="unused", max_retries=0,
                          use_responses_api=True, use_previous_response_id=True)
    first = unstored.invoke(history)
    with pytest.raises(openai.NotFoundError) as refused:
        unstored.invoke([*history, first, HumanMessage("Again")])
    assert "ChatOpenAI(store=True)" in refused.value.body["message"]
