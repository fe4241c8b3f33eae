"""Through the real server on the scripted engine's prompt path: a structured request reaches the engine with the
grammar its turn is held to, reasoning first, and what the model writes comes back as the reasoning item and the
validated JSON.

GLM and DeepSeek templates think inside the prompt's `<think>`: the grammar the engine is given must accept the
model's reasoning up to `</think>` and then only JSON the schema allows (checked with the independent recognizer);
the answer publishes a `reasoning` item and the JSON text, as without a grammar. With `--no-constrained-decoding`,
or for plain text, the engine is given none. A required strict call reaches the engine held to the family's call
syntax.
"""

from __future__ import annotations

import httpx
import pytest

from tests.scripted import RecordingScriptedEngine
from tests.server import RunningServer, prometheus_values, scripted_config
from tests.structured.gbnf_recognizer import Recognizer

SCHEMA = {"type": "object", "properties": {"count": {"type": "integer"}, "unit": {"type": "string", "enum": ["legs"]}},
          "required": ["count", "unit"], "additionalProperties": False}
FORMAT = {"type": "json_schema", "name": "count", "schema": SCHEMA, "strict": True}
REASONING = "A spider is an arachnid: eight."
ANSWER = '{"count": 8, "unit": "legs"}'


def _server(family: str, script: list[str], **config) -> tuple[RunningServer, RecordingScriptedEngine]:
    engine = RecordingScriptedEngine(script)
    return RunningServer(scripted_config(family=family, **config), engine), engine


@pytest.mark.parametrize("family", ["glm", "deepseek-v4", "deepseek-v4.1"])
def test_reasoning_then_constrained_json_reaches_the_engine_and_comes_back_validated(family):
    server, engine = _server(family, [f"{REASONING}</think>{ANSWER}"])
    try:
        response = httpx.post(server.url + "/v1/responses", timeout=30, json={
            "model": "m", "input": "How many legs has a spider?", "text": {"format": FORMAT},
            "reasoning": {"effort": "high"}})
        status = httpx.get(server.url + "/v1/status", timeout=10).json()["constrained_decoding"]
        metrics = prometheus_values(httpx.get(server.url + "/metrics/prometheus", timeout=10).text,
                                    "maya:constrained_generations_total")
    finally:
        server.stop()
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["status"] == "completed"
    assert [item["type"] for item in body["output"]] == ["reasoning", "message"]
    assert body["output"][0]["content"][0]["text"] == REASONING
    assert body["output"][1]["content"][0]["text"] == ANSWER
    accepts = Recognizer(engine.grammars[-1]).accepts
    assert engine.last_prompt_text.endswith("<think>")  # the prompt leaves the model in its reasoning
    assert accepts(f"{REASONING}</think>{ANSWER}")
    assert not accepts(ANSWER)  # JSON before the reasoning closes would be read as reasoning
    assert not accepts(f"{REASONING}</think>" + '{"count": 8, "unit": "arms"}')
    assert status == {"enabled": True, "mechanism": None, "why_not": "the scripted engine takes no grammar"}
    assert metrics == {"maya:constrained_generations_total": 1.0}


@pytest.mark.parametrize("family", ["glm", "deepseek-v4.1"])
def test_chat_with_thinking_off_holds_the_json_from_the_first_token(family):
    server, engine = _server(family, [ANSWER])
    try:
        response = httpx.post(server.url + "/v1/chat/completions", timeout=30, json={
            "model": "m", "messages": [{"role": "user", "content": "How many legs?"}], "reasoning_effort": "none",
            "response_format": {"type": "json_schema", "json_schema": {k: v for k, v in FORMAT.items() if k != "type"}}})
    finally:
        server.stop()
    assert response.status_code == 200 and response.json()["choices"][0]["message"]["content"] == ANSWER
    accepts = Recognizer(engine.grammars[-1]).accepts
    assert accepts(ANSWER) and not accepts(f"Hmm</think>{ANSWER}")


def test_a_server_told_not_to_constrain_and_plain_text_give_the_engine_no_grammar():
    server, engine = _server("glm", [f"{REASONING}</think>{ANSWER}"], constrained_decoding=False)
    try:
        structured = httpx.post(server.url + "/v1/responses", timeout=30, json={
            "model": "m", "input": "How many?", "text": {"format": FORMAT}})
        status = httpx.get(server.url + "/v1/status", timeout=10).json()["constrained_decoding"]
        metrics = prometheus_values(httpx.get(server.url + "/metrics/prometheus", timeout=10).text,
                                    "maya:constrained_generations_total")
    finally:
        server.stop()
    assert structured.status_code == 200 and structured.json()["output"][-1]["content"][0]["text"] == ANSWER
    assert metrics == {"maya:constrained_generations_total": 0.0}
    assert list(engine.grammars) == [None] and status["enabled"] is False
    server, engine = _server("glm", ["Eight."])
    try:
        plain = httpx.post(server.url + "/v1/responses", timeout=30, json={"model": "m", "input": "How many?"})
    finally:
        server.stop()
    assert plain.status_code == 200 and list(engine.grammars) == [None]


def test_a_required_strict_call_reaches_the_engine_held_to_the_family_s_call_syntax():
    call = ("<tool_call>get_weather<arg_key>city</arg_key><arg_value>Paris</arg_value></tool_call>")
    server, engine = _server("glm", [f"Look it up.</think>{call}"])
    tool = {"type": "function", "name": "get_weather", "strict": True, "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"],
        "additionalProperties": False}}
    try:
        response = httpx.post(server.url + "/v1/responses", timeout=30, json={
            "model": "m", "input": "Weather in Paris?", "tools": [tool], "tool_choice": "required"})
    finally:
        server.stop()
    assert response.status_code == 200, response.text
    calls = [item for item in response.json()["output"] if item["type"] == "function_call"]
    assert [(c["name"], c["arguments"]) for c in calls] == [("get_weather", '{"city": "Paris"}')]
    accepts = Recognizer(engine.grammars[-1]).accepts
    assert accepts(f"Look it up.</think>{call}")
    assert not accepts("Look it up.</think>It is sunny.")
    assert not accepts(f"Look it up.</think>{call.replace('get_weather', 'get_time')}")
