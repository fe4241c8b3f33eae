"""Deep JSON anywhere (a body, a tool argument string, model output) and non-string dispatch fields:
always a 400 or the spec's failed path, never a 500 or a cut stream."""

from __future__ import annotations

import json

import pytest

from maya_server.util.json_depth import TooDeep, loads_bounded, too_deep

from tests.chat.test_families_through_chat import D, dsml_block
from tests.responses.api.sse import ERROR_KEYS

DEEP = 300  # deeper than orjson writes (254), shallower than Python's json recursion


def nested(depth: int) -> list:
    value: list = []
    for _ in range(depth - 1):
        value = [value]
    return value


def test_depth_is_measured_without_recursion():
    assert too_deep({"a": [1]}, 2) is None and too_deep({"a": [[1]]}, 2) == ("a", 0)
    with pytest.raises(TooDeep):
        loads_bounded("[" * 100_000 + "]" * 100_000)
    assert loads_bounded(json.dumps(nested(64))) == nested(64)


@pytest.mark.parametrize("body, param", [
    ({"input": "hi", "tools": [{"type": "function", "name": "f",
                                "parameters": {"type": "object", "default": nested(DEEP)}}]}, "tools[0].parameters"),
    ({"input": [{"role": "assistant", "content": [{"type": "output_text", "text": "t",
                                                    "annotations": nested(DEEP)}]}]}, "input[0].content[0]"),
    ({"input": "hi", "metadata": {"a": "b"}, "text": {"format": {"type": "json_schema", "name": "n",
                                                                  "schema": {"default": nested(DEEP)}}}}, "text.format"),
])
def test_a_deep_body_is_a_400_naming_where(start_server, body, param):
    server = start_server(["ok"])
    for store in (False, True):
        answer = server.http().post("/v1/responses", json={**body, "store": store})
        assert answer.status_code == 400, answer.text
        error = answer.json()["error"]
        assert set(error) == ERROR_KEYS and error["code"] == "json_too_deep" and error["param"].startswith(param)
    assert server.engine.calls == 0 and server.app.state.store.stats()["entries"] == 0


def test_a_deep_chat_body_is_a_400(start_server):
    server = start_server(["ok"])
    body = {"messages": [{"role": "user", "content": "hi"}],
            "tools": [{"type": "function", "function": {"name": "f", "parameters": {"default": nested(DEEP)}}}]}
    answer = server.http().post("/v1/chat/completions", json=body)
    assert answer.status_code == 400 and answer.json()["error"]["code"] == "json_too_deep"
    assert server.engine.calls == 0


def test_a_deep_function_call_arguments_string_renders_and_stores(start_server):
    server = start_server(["done"])
    arguments = json.dumps({"a": nested(DEEP)})
    body = {"store": True, "input": [
        {"type": "function_call", "call_id": "c1", "name": "f", "arguments": arguments},
        {"type": "function_call_output", "call_id": "c1", "output": "ok"},
    ], "tools": [{"type": "function", "name": "f", "parameters": {"type": "object"}}]}
    answer = server.http().post("/v1/responses", json=body)
    assert answer.status_code == 200 and answer.json()["status"] == "completed"
    items = server.http().get(f"/v1/responses/{answer.json()['id']}/input_items?order=asc").json()["data"]
    assert items[0]["arguments"] == arguments


@pytest.mark.parametrize("family, call", [
    ("chatml", '<tool_call>{"name": "f", "arguments": {"a": %s}}</tool_call>'),
    ("glm", "<tool_call>f<arg_key>a</arg_key><arg_value>%s</arg_value></tool_call>"),
])
def test_deep_model_generated_arguments_fail_or_stay_text_never_a_500(start_server, family, call):
    server = start_server([call % json.dumps(nested(DEEP))], family=family)
    body = {"input": "hi", "tools": [{"type": "function", "name": "f",
                                      "parameters": {"type": "object", "properties": {"a": {"type": "array"}}}}]}
    answer = server.http().post("/v1/responses", json=body)
    assert answer.status_code == 200, answer.text
    assert answer.json()["status"] in ("failed", "completed")
    with server.http().stream("POST", "/v1/responses", json={**body, "stream": True}) as streamed:
        last = [line for line in streamed.iter_lines() if line.startswith("data: ")][-1]
    assert json.loads(last[6:])["type"] in ("response.failed", "response.completed")
    chat = server.http().post("/v1/chat/completions", json={
        "messages": [{"role": "user", "content": "hi"}],
        "tools": [{"type": "function", "function": {"name": "f", "parameters": body["tools"][0]["parameters"]}}]})
    # Chat's invalid-call path is its own error (code invalid_tool_call), not an unhandled 500
    assert chat.status_code == 200 or chat.json()["error"]["code"] == "invalid_tool_call", chat.text


def deep_call(family: str, value: list) -> str:
    if family == "chatml":
        return '<tool_call>{"name": "f", "arguments": {"a": %s}}</tool_call>' % json.dumps(value)
    if family == "glm":
        return "</think><tool_call>f<arg_key>a</arg_key><arg_value>%s</arg_value></tool_call>" % json.dumps(value)
    parameter = f'<{D}parameter name="a" string="false">{json.dumps(value)}</{D}parameter>\n'
    return "</think>" + dsml_block(f'<{D}invoke name="f">\n{parameter}</{D}invoke>')


@pytest.mark.parametrize("family", ["chatml", "glm", "deepseek-v4"])
@pytest.mark.parametrize("schema", [{"type": "array"}, {}], ids=["typed", "untyped"])
def test_model_arguments_deeper_than_64_fail_the_call_in_every_family(start_server, family, schema):
    """The README's rule: a call's arguments may be 64 levels deep; one level more is a malformed call."""
    server = start_server([deep_call(family, nested(63)), deep_call(family, nested(64))], family=family)
    tools = [{"type": "function", "name": "f", "parameters": {"type": "object", "properties": {"a": schema}}}]
    fits = server.client().responses.create(model="m", input="hi", tools=tools)
    assert fits.status == "completed" and fits.output[-1].type == "function_call"
    assert too_deep(json.loads(fits.output[-1].arguments), 64) is None
    too_much = server.client().responses.create(model="m", input="hi", tools=tools)
    assert too_much.status == "failed" and "invalid tool call" in too_much.error.message
    assert not any(item.type == "function_call" and item.status == "completed" for item in too_much.output)


@pytest.mark.parametrize("item, param", [
    ({"role": {"a": 1}, "content": "hi"}, "input[0].role"),
    ({"type": "message", "role": ["user"], "content": "hi"}, "input[0].role"),
    ({"type": ["message"], "role": "user", "content": "hi"}, "input[0].type"),
    ({"role": "user", "content": [{"type": {"x": 1}, "text": "hi"}]}, "input[0].content[0].type"),
    ({"type": "function_call_output", "call_id": "c", "output": [{"type": ["input_text"]}]},
     "input[0].output[0].type"),
])
def test_a_role_or_type_that_is_not_a_string_is_a_400(start_server, item, param):
    server = start_server(["ok"])
    answer = server.http().post("/v1/responses", json={"input": [item]})
    assert answer.status_code == 400 and answer.json()["error"]["param"] == param
    assert server.engine.calls == 0


@pytest.mark.parametrize("field, value, param", [
    ("tools", [{"type": {"a": 1}}], "tools[0].type"),
    ("tool_choice", {"type": ["function"]}, "tool_choice.type"),
    ("text", {"format": {"type": {"a": 1}}}, "text.format.type"),
])
def test_a_tool_or_format_type_that_is_not_a_string_is_a_400(start_server, field, value, param):
    server = start_server(["ok"])
    answer = server.http().post("/v1/responses", json={"input": "hi", field: value})
    assert answer.status_code == 400 and answer.json()["error"]["param"] == param
