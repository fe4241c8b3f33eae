"""A refusal that a popular client triggers by default says what to set in that client."""

from __future__ import annotations

import pytest

from tests.responses.api.sse import post_error

REFUSALS = [
    ({"input": [{"type": "item_reference", "id": "rs_1"}]}, "input[0].type", "providerOptions: {openai: {store: false}}"),
    ({"reasoning": {"summary": "auto"}}, "reasoning.summary", 'model_reasoning_summary = "none"'),
    ({"include": ["reasoning.encrypted_content"]}, "include[0]", 'model_reasoning_effort = "none"'),
    ({"tools": [{"type": "web_search"}]}, "tools[0].type", 'web_search = "disabled"'),
    ({"tools": [{"type": "namespace", "name": "multi_agent_v1", "tools": []}]}, "tools[0].type",
     "[agents] enabled = false"),
]


@pytest.mark.parametrize("fields, param, hint", REFUSALS, ids=[r[1] + ":" + r[2][:12] for r in REFUSALS])
def test_the_error_names_the_client_setting(start_server, fields, param, hint):
    server = start_server()
    with server.http() as http:
        error = post_error(http, {"model": "m", "input": "hi", **fields})
    assert error["param"] == param
    assert hint in error["message"]
    assert server.engine.calls == 0
