"""`max_tool_calls` is enforced: the turn ends once that many calls are complete, as OpenAI's does.

A call the model begins past the limit is never published (no item, no deltas), the
response completes with the calls it kept, and the engine is stopped there.
"""

from __future__ import annotations

from tests.chat.test_families_through_chat import glm_call

from tests.responses.api.shapes import CALL, OPENING, REASONING
from tests.responses.api.sse import read_stream
from tests.responses.api.test_function_tools import PARIS, TOOLS

THREE_CALLS = "Checking.</think>" + glm_call("get_weather", **PARIS) + glm_call("now") + glm_call("now") + "Done."


def test_the_turn_stops_at_the_limit(start_server):
    server = start_server([THREE_CALLS], family="glm")
    with server.http() as http:
        stream = read_stream(http, {"model": "m", "input": "go", "tools": TOOLS, "max_tool_calls": 2})
    assert stream.shape() == OPENING + REASONING + CALL + CALL + ["response.completed"]
    final = stream.final
    assert [item.name for item in final.output if item.type == "function_call"] == ["get_weather", "now"]
    assert final.max_tool_calls == 2
    assert final.usage.output_tokens < len(server.engine.tokenizer.encode(THREE_CALLS, special=True))
    assert server.engine.cancelled == 1  # the engine was stopped at the limit, not run to the end


def test_zero_allows_no_call(start_server):
    server = start_server([THREE_CALLS], family="glm")
    response = server.client().responses.create(model="m", input="go", tools=TOOLS, max_tool_calls=0)
    assert response.status == "completed"
    assert [item.type for item in response.output] == ["reasoning"]


def test_without_a_limit_every_call_is_kept(start_server):
    server = start_server([THREE_CALLS], family="glm")
    response = server.client().responses.create(model="m", input="go", tools=TOOLS)
    assert [item.type for item in response.output].count("function_call") == 3


def test_a_limit_of_zero_with_a_required_call_is_refused(start_server):
    server = start_server([THREE_CALLS], family="glm")
    with server.http() as http:
        answer = http.post("/v1/responses", json={"model": "m", "input": "go", "tools": TOOLS, "max_tool_calls": 0,
                                                  "tool_choice": "required"})
    assert answer.status_code == 400 and answer.json()["error"]["param"] == "max_tool_calls"
    assert server.engine.calls == 0
