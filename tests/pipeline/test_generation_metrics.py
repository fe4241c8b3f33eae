"""`maya:generations_total{finish_reason}`: each turn counted once, by how it ended.

The engine records how its sequence ended; a turn the pipeline ends itself (a stop string, the tool
policy) closes the engine early, which the engine records as `cancelled`, yet counts as `stop`.
"""

from __future__ import annotations

import json
import re

import openai
import pytest

from tests.server import wait_for

ASK = [{"role": "user", "content": "Weather in Paris?"}]
TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {}}}}]


def call(name: str) -> str:
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": {}}) + "\n</tool_call>"


def generations(server) -> dict[str, float]:
    with server.http() as http:
        text = http.get("/metrics/prometheus").text
    return {m[1]: float(m[2]) for m in re.finditer(r'maya:generations_total\{finish_reason="(\w+)"\} ([\d.]+)', text)}


def test_a_stop_string_and_a_single_call_count_as_stop_though_the_engine_was_closed(start_server):
    server = start_server(["one two three four five"])
    client = server.client()
    client.chat.completions.create(model="m", messages=ASK, stop=["three"])
    server.engine.set_script([call("get_weather") + call("get_weather") + " trailing words"])
    single = client.chat.completions.create(model="m", messages=ASK, tools=TOOLS, parallel_tool_calls=False)
    assert single.choices[0].finish_reason == "tool_calls"
    assert server.engine.cancelled == 2  # both turns closed the engine before it finished
    assert generations(server) == {"stop": 2.0}


def test_length_error_and_a_client_gone_keep_the_engines_reason(start_server):
    server = start_server(["one two three four five"])
    client = server.client()
    assert client.chat.completions.create(model="m", messages=ASK, max_tokens=2).choices[0].finish_reason == "length"
    server.engine.set_script([{"text": "one two three", "fail_after": 1}])
    with pytest.raises(openai.InternalServerError):
        client.chat.completions.create(model="m", messages=ASK)
    server.engine.set_script(["tick " * 400])
    server.engine.delay = 0.01
    with server.http() as http:
        with http.stream("POST", "/v1/chat/completions", json={"messages": ASK, "stream": True}) as response:
            lines = response.iter_lines()
            [next(lines) for _ in range(4)]
    assert wait_for(lambda: generations(server).get("cancelled") == 1.0)
    assert generations(server) == {"length": 1.0, "error": 1.0, "cancelled": 1.0}
