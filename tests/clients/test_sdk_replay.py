"""The OpenAI SDK's own answer objects, replayed as the next turn's input, are accepted by both APIs.

`messages.append(reply.model_dump())` (or `to_dict()`), the message of `chat.completions.parse()` and
of the `.stream()` helper, and a Responses answer's `output` items the same ways, carry fields the
SDK adds (`annotations`, `audio`/`function_call` as null, `parsed`, `parsed_arguments`, a tool
call's `index`, `async_`): Maya accepts and drops them, and the next turn reaches the model.
"""

from __future__ import annotations

import pydantic
import pytest
from openai import pydantic_function_tool

from tests.chat.test_families_through_chat import glm_call

CALL = "Looking it up.</think>" + glm_call("get_weather", city="Paris")
ANSWER = "Got it.</think>It is sunny in Paris."
JSON_ANSWER = '</think>{"city": "Paris", "sunny": true}'
QUESTION = "What is the weather in Paris?"
pytestmark = pytest.mark.filterwarnings("ignore:Pydantic serializer warnings")  # the SDK's own dump of `parsed`


class GetWeather(pydantic.BaseModel):
    city: str


class Weather(pydantic.BaseModel):
    city: str
    sunny: bool


DUMPS = {"model_dump": lambda obj: obj.model_dump(), "to_dict": lambda obj: obj.to_dict(),
         "model_dump_json_mode": lambda obj: obj.model_dump(mode="json")}


def chat_tools() -> list:
    return [pydantic_function_tool(GetWeather, name="get_weather")]


def assert_next_turn_saw(server, *texts: str) -> None:
    assert server.engine.calls >= 2
    for text in texts:
        assert text in server.engine.last_prompt_text


@pytest.mark.parametrize("dump", DUMPS)
def test_chat_replays_its_own_message_with_a_tool_call(maya, dump):
    server, _ = maya([CALL, ANSWER])
    client = server.client()
    messages = [{"role": "user", "content": QUESTION}]
    reply = client.chat.completions.create(model="glm", messages=messages, tools=chat_tools())
    call = reply.choices[0].message.tool_calls[0]
    messages += [DUMPS[dump](reply.choices[0].message),
                 {"role": "tool", "tool_call_id": call.id, "content": "sunny (tool result)"}]
    final = client.chat.completions.create(model="glm", messages=messages, tools=chat_tools())
    assert final.choices[0].message.content == "It is sunny in Paris."
    assert_next_turn_saw(server, "sunny (tool result)", "get_weather")


@pytest.mark.parametrize("dump", DUMPS)
def test_chat_parse_helpers_message_replays(maya, dump):
    server, _ = maya([CALL, JSON_ANSWER, ANSWER])
    client = server.client()
    messages = [{"role": "user", "content": QUESTION}]
    parsed_call = client.chat.completions.parse(model="glm", messages=messages, tools=chat_tools())
    message = parsed_call.choices[0].message
    assert message.tool_calls[0].function.parsed_arguments == GetWeather(city="Paris")
    messages += [DUMPS[dump](message), {"role": "tool", "tool_call_id": message.tool_calls[0].id, "content": "sunny"}]
    parsed = client.chat.completions.parse(model="glm", messages=messages, response_format=Weather)
    assert parsed.choices[0].message.parsed == Weather(city="Paris", sunny=True)
    messages += [DUMPS[dump](parsed.choices[0].message), {"role": "user", "content": "Thanks."}]
    final = client.chat.completions.create(model="glm", messages=messages)
    assert final.choices[0].message.content == "It is sunny in Paris."
    assert_next_turn_saw(server, '{"city": "Paris", "sunny": true}', "Thanks.")


def test_chat_stream_helpers_message_replays(maya):
    server, _ = maya([CALL, ANSWER])
    client = server.client()
    messages = [{"role": "user", "content": QUESTION}]
    with client.chat.completions.stream(model="glm", messages=messages, tools=chat_tools()) as stream:
        for _ in stream:
            pass
        completion = stream.get_final_completion()
    message = completion.choices[0].message
    messages += [message.model_dump(), {"role": "tool", "tool_call_id": message.tool_calls[0].id, "content": "sunny"}]
    with client.chat.completions.stream(model="glm", messages=messages, tools=chat_tools()) as stream:
        final = stream.get_final_completion()
    assert final.choices[0].message.content == "It is sunny in Paris."
    assert_next_turn_saw(server, "sunny")


@pytest.mark.parametrize("dump", DUMPS)
def test_responses_replays_its_own_output_items(maya, dump):
    server, _ = maya([CALL, ANSWER])
    client = server.client()
    tools = [{"type": "function", "name": "get_weather", "parameters": GetWeather.model_json_schema()}]
    first = client.responses.create(model="glm", input=QUESTION, tools=tools)
    call = first.output[-1]
    history = [{"role": "user", "content": QUESTION}, *(DUMPS[dump](item) for item in first.output),
               {"type": "function_call_output", "call_id": call.call_id, "output": "sunny (tool result)"}]
    final = client.responses.create(model="glm", input=history, tools=tools)
    assert final.output_text == "It is sunny in Paris."
    assert_next_turn_saw(server, "sunny (tool result)", "Looking it up.")


@pytest.mark.parametrize("dump", DUMPS)
def test_responses_parse_helpers_output_replays(maya, dump):
    server, _ = maya([CALL, JSON_ANSWER, ANSWER])
    client = server.client()
    tools = [pydantic_function_tool(GetWeather, name="get_weather")]
    first = client.responses.parse(model="glm", input=QUESTION, tools=tools)
    call = first.output[-1]
    assert call.parsed_arguments == GetWeather(city="Paris")
    history = [{"role": "user", "content": QUESTION}, *(DUMPS[dump](item) for item in first.output),
               {"type": "function_call_output", "call_id": call.call_id, "output": "sunny"}]
    parsed = client.responses.parse(model="glm", input=history, text_format=Weather)
    assert parsed.output_parsed == Weather(city="Paris", sunny=True)
    history += [*(DUMPS[dump](item) for item in parsed.output), {"role": "user", "content": "Thanks."}]
    final = client.responses.create(model="glm", input=history)
    assert final.output_text == "It is sunny in Paris."
    assert_next_turn_saw(server, '{"city": "Paris", "sunny": true}', "Thanks.")


def test_responses_stream_helpers_output_replays(maya):
    server, _ = maya([CALL, ANSWER])
    client = server.client()
    tools = [pydantic_function_tool(GetWeather, name="get_weather")]
    with client.responses.stream(model="glm", input=QUESTION, tools=tools) as stream:
        first = stream.get_final_response()
    call = first.output[-1]
    history = [{"role": "user", "content": QUESTION}, *(item.model_dump() for item in first.output),
               {"type": "function_call_output", "call_id": call.call_id, "output": "sunny"}]
    with client.responses.stream(model="glm", input=history, tools=tools) as stream:
        final = stream.get_final_response()
    assert final.output_text == "It is sunny in Paris."
    assert_next_turn_saw(server, "sunny")
