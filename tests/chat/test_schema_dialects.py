"""`$schema` naming any of the five JSON Schema drafts is accepted wherever a schema is checked, in both APIs.

zod (and so the Vercel AI SDK's generateObject, streamObject and Output.object) writes
`"$schema": "http://json-schema.org/draft-07/schema#"`; Maya validates the subset with
Draft 2020-12 semantics whatever the draft named. Any other `$schema` is a 400 at it.
"""

from __future__ import annotations

import openai
import pytest

from tests.chat.test_families_through_chat import glm_call

DRAFT_07 = "http://json-schema.org/draft-07/schema#"
SCHEMA = {"$schema": DRAFT_07, "type": "object", "properties": {"count": {"type": "integer"}},
          "required": ["count"], "additionalProperties": False}
ASK = [{"role": "user", "content": "Count."}]


def chat_format(schema: dict) -> dict:
    return {"type": "json_schema", "json_schema": {"name": "count", "strict": True, "schema": schema}}


def responses_format(schema: dict) -> dict:
    return {"format": {"type": "json_schema", "name": "count", "strict": True, "schema": schema}}


@pytest.mark.parametrize("dialect", [
    "https://json-schema.org/draft/2020-12/schema", "http://json-schema.org/draft/2019-09/schema#", DRAFT_07,
    "https://json-schema.org/draft-06/schema", "http://json-schema.org/draft-04/schema#",
])
def test_structured_output_with_a_named_draft_in_both_apis(start_server, dialect):
    server = start_server(['{"count": 3}', '{"count": 3}', '{"count": "three"}'])
    client = server.client()
    schema = {**SCHEMA, "$schema": dialect}
    chat = client.chat.completions.create(model="m", messages=ASK, response_format=chat_format(schema))
    assert chat.choices[0].message.content == '{"count": 3}'
    response = client.responses.create(model="m", input="Count.", text=responses_format(schema))
    assert response.status == "completed" and response.output_text == '{"count": 3}'
    failed = client.responses.create(model="m", input="Count.", text=responses_format(schema))
    assert failed.status == "failed"  # validated all the same: "three" is no integer


def test_strict_tools_with_a_draft_07_schema_in_both_apis(start_server):
    server = start_server(["</think>" + glm_call("record", count=3), "</think>" + glm_call("record", count=4)], family="glm")
    client = server.client()
    chat = client.chat.completions.create(model="m", messages=ASK, tools=[
        {"type": "function", "function": {"name": "record", "strict": True, "parameters": SCHEMA}}])
    assert chat.choices[0].message.tool_calls[0].function.arguments == '{"count": 3}'
    response = client.responses.create(model="m", input="Count.", tools=[
        {"type": "function", "name": "record", "strict": True, "parameters": SCHEMA}])
    assert response.output[-1].type == "function_call" and response.output[-1].arguments == '{"count": 4}'


@pytest.mark.parametrize("dialect", ["http://json-schema.org/draft-03/schema#", "https://example.com/schema", 7])
def test_any_other_dialect_is_a_400_at_schema(start_server, dialect):
    server = start_server()
    client = server.client()
    schema = {**SCHEMA, "$schema": dialect}
    with pytest.raises(openai.BadRequestError) as chat:
        client.chat.completions.create(model="m", messages=ASK, response_format=chat_format(schema))
    assert chat.value.body["param"] == "response_format.json_schema.schema.$schema"
    with pytest.raises(openai.BadRequestError) as responses:
        client.responses.create(model="m", input="Count.", text=responses_format(schema))
    assert responses.value.body["param"] == "text.format.schema.$schema"
    with pytest.raises(openai.BadRequestError) as tool:
        client.responses.create(model="m", input="Count.", tools=[
            {"type": "function", "name": "record", "strict": True, "parameters": schema}])
    assert tool.value.body["param"] == "tools[0].parameters.$schema"
    assert server.engine.calls == 0
