"""openai-agents (the OpenAI Agents SDK for Python) runs unchanged against Maya.

`Runner.run` and `Runner.run_streamed` with a function tool, over the Responses API:
once with the full history re-sent each turn (Maya's default `store:false`), once
continuing with `previous_response_id` (`store:true`). The scripted GLM engine makes
the model call the tool, then answer with what the tool returned.
"""

from __future__ import annotations

import asyncio

import orjson
import pytest
from agents import Agent, ModelSettings, OpenAIResponsesModel, Runner, function_tool, set_tracing_disabled
from openai import AsyncOpenAI

from tests.chat.test_families_through_chat import glm_call

CALL = "Looking it up.</think>" + glm_call("get_weather", city="Paris")
ANSWER = "Got it.</think>It is sunny in Paris."
SCRIPT = [CALL, ANSWER]

set_tracing_disabled(True)  # tracing would export to OpenAI's servers


@function_tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city} (tool result)"


def agent(server, *, store: bool) -> Agent:
    client = AsyncOpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0)
    return Agent(name="weather", instructions="Answer with the weather tool.", tools=[get_weather],
                 model=OpenAIResponsesModel(model="glm", openai_client=client),
                 model_settings=ModelSettings(store=store))


def first_response_id(recorder) -> str:
    first = recorder.of("/v1/responses")[0]
    if first.content_type.startswith("text/event-stream"):
        return orjson.loads(first.body.split(b"data: ", 2)[1].split(b"\n", 1)[0])["response"]["id"]
    return orjson.loads(first.body)["id"]


def assert_tool_round_trip(server, recorder, final_output: str) -> None:
    assert final_output == "It is sunny in Paris."
    assert server.engine.calls == 2
    assert "sunny in Paris (tool result)" in server.engine.last_prompt_text  # the tool's output reached the model
    assert [e.status for e in recorder.of("/v1/responses")] == [200, 200]


@pytest.mark.parametrize("store", [False, True], ids=["full-history", "previous-response-id"])
def test_run_with_a_function_tool(maya, store):
    server, recorder = maya(SCRIPT)
    result = asyncio.run(Runner.run(agent(server, store=store), "What is the weather in Paris?",
                                    auto_previous_response_id=store))
    assert_tool_round_trip(server, recorder, result.final_output)
    second = recorder.of("/v1/responses")[1].request_json()
    if store:
        assert second["previous_response_id"] == first_response_id(recorder)
        assert not any(item.get("role") == "user" for item in second["input"])  # only the tool output is sent
    else:
        assert "previous_response_id" not in second
        assert any(item.get("role") == "user" for item in second["input"])  # the whole history again


@pytest.mark.parametrize("store", [False, True], ids=["full-history", "previous-response-id"])
def test_run_streamed_with_a_function_tool(maya, store):
    server, recorder = maya(SCRIPT)

    async def run() -> tuple[str, list[str]]:
        result = Runner.run_streamed(agent(server, store=store), "What is the weather in Paris?",
                                     auto_previous_response_id=store)
        kinds = [event.type async for event in result.stream_events()]
        return result.final_output, kinds

    final_output, kinds = asyncio.run(run())
    assert_tool_round_trip(server, recorder, final_output)
    assert "raw_response_event" in kinds and "run_item_stream_event" in kinds
    assert all(e.content_type.startswith("text/event-stream") for e in recorder.of("/v1/responses"))
    second = recorder.of("/v1/responses")[1].request_json()
    assert second.get("previous_response_id") == (first_response_id(recorder) if store else None)
