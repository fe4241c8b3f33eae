"""`reasoning_effort: "max"` (DeepSeek's own tier) on /v1/chat/completions: taken by DeepSeek families, refused
elsewhere with a 400 at `reasoning_effort` before the engine is called, streamed or not."""

from __future__ import annotations

import openai
import pytest

from tests.family_recorder import recording_efforts

ASK = [{"role": "user", "content": "Hello"}]
COMMON = "'none', 'minimal', 'low', 'medium', 'high', 'xhigh'"


def test_max_reaches_a_deepseek_family(start_server, monkeypatch):
    server = start_server(["Thought hard.</think>Done."] * 2, family="deepseek-v4")
    efforts = recording_efforts(server, monkeypatch)
    client = server.client()
    completion = client.chat.completions.create(model="m", messages=ASK, reasoning_effort="max")
    assert completion.choices[0].message.content == "Done."
    assert completion.choices[0].message.reasoning_content == "Thought hard."
    chunks = list(client.chat.completions.create(model="m", messages=ASK, reasoning_effort="max", stream=True))
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "Done."
    assert efforts == ["max", "max"]


@pytest.mark.parametrize("family", ["glm", "glm-5.2", "chatml"])
@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
def test_max_is_refused_where_the_family_has_no_such_tier(start_server, family, stream):
    server = start_server(["never"], family=family)
    with server.http() as http:
        answer = http.post("/v1/chat/completions",
                           json={"model": "m", "messages": ASK, "reasoning_effort": "max", "stream": stream})
    assert answer.status_code == 400
    name = server.app.state.service.family.name
    assert answer.json() == {"error": {
        "message": "Unsupported value: 'reasoning_effort' does not support 'max' with this model. Reasoning effort "
                   f"'max' is DeepSeek's own tier, and this model's family '{name}' has none; use one of {COMMON} "
                   "('xhigh' is this family's highest).",
        "type": "invalid_request_error", "param": "reasoning_effort", "code": "unsupported_value",
    }}
    assert server.engine.calls == 0


def test_the_sdk_raises_bad_request_naming_the_param(start_server):
    server = start_server(["never"], family="chatml")
    with pytest.raises(openai.BadRequestError) as caught:
        server.client().chat.completions.create(model="m", messages=ASK, reasoning_effort="max")
    assert (caught.value.status_code, caught.value.param, caught.value.code) == (400, "reasoning_effort",
                                                                                  "unsupported_value")
    assert server.engine.calls == 0


def test_an_effort_no_api_has_still_names_max_among_the_values(start_server):
    """An unknown effort is pydantic's 400 as before; its list of values now ends with `max`."""
    server = start_server(["never"], family="deepseek-v4")
    with server.http() as http:
        answer = http.post("/v1/chat/completions", json={"model": "m", "messages": ASK, "reasoning_effort": "ultra"})
    assert answer.status_code == 400
    error = answer.json()["error"]
    assert error["param"] == "reasoning_effort" and "'max'" in error["message"]
    assert server.engine.calls == 0
