"""`reasoning.effort: "max"` (DeepSeek's own tier) on /v1/responses: taken by DeepSeek families, refused elsewhere.

A DeepSeek family gets the effort in its neutral conversation and the response echoes it, stored or not; any
other family answers a 400 at `reasoning.effort` before anything is stored or generated, whatever the mode.
"""

from __future__ import annotations

import openai
import pytest

from tests.family_recorder import recording_efforts
from tests.responses.api.sse import post_error, read_stream
from tests.responses.store_backends import store_stats

ASK = "Hello"
COMMON = "'none', 'minimal', 'low', 'medium', 'high', 'xhigh'"


def refusal(family_name: str) -> dict:
    return {"error": {
        "message": "Unsupported value: 'reasoning.effort' does not support 'max' with this model. Reasoning effort "
                   f"'max' is DeepSeek's own tier, and this model's family '{family_name}' has none; use one of "
                   f"{COMMON} ('xhigh' is this family's highest).",
        "type": "invalid_request_error", "param": "reasoning.effort", "code": "unsupported_value",
    }}


def test_max_reaches_a_deepseek_family_and_is_echoed(start_server, monkeypatch):
    server = start_server(["Thought hard.</think>Done."] * 3, family="deepseek-v4")
    efforts = recording_efforts(server, monkeypatch)
    client = server.client()
    response = client.responses.create(model="m", input=ASK, reasoning={"effort": "max"}, store=True)
    assert response.status == "completed" and response.output_text == "Done."
    assert response.reasoning.effort == "max"
    assert client.responses.retrieve(response.id).reasoning.effort == "max"
    with server.http() as http:
        stream = read_stream(http, {"model": "m", "input": ASK, "reasoning": {"effort": "max"}})
    assert stream.of("response.created")[0].response.reasoning.effort == "max"
    assert stream.of("response.completed")[0].response.reasoning.effort == "max"
    assert efforts == ["max", "max"]
    assert server.engine.calls == 2


@pytest.mark.parametrize("family", ["glm", "glm-5.3", "chatml"])
@pytest.mark.parametrize("mode", [{}, {"stream": True}, {"store": True}, {"store": True, "background": True}],
                         ids=["json", "stream", "stored", "background"])
def test_max_is_refused_where_the_family_has_no_such_tier(start_server, family, mode):
    server = start_server(["never"], family=family)
    with server.http() as http:
        answer = http.post("/v1/responses", json={"model": "m", "input": ASK, "reasoning": {"effort": "max"}, **mode})
    assert answer.status_code == 400
    assert answer.json() == refusal(server.app.state.service.family.name)
    assert server.engine.calls == 0
    assert store_stats(server)["entries"] == 0
    assert server.on_loop(server.app.state.jobs.stats)["records"] == 0


def test_the_refusal_is_before_the_stored_history_is_read(start_server):
    """A continuation of an unknown response is a 404 once validated; `max` is refused before that lookup."""
    server = start_server(["never"], family="chatml")
    with server.http() as http:
        error = post_error(http, {"model": "m", "input": ASK, "previous_response_id": "resp_unknown",
                                  "reasoning": {"effort": "max"}})
    assert error["param"] == "reasoning.effort" and error["code"] == "unsupported_value"


def test_the_sdk_raises_bad_request_naming_the_param(start_server):
    server = start_server(["never"], family="glm")
    with pytest.raises(openai.BadRequestError) as caught:
        server.client().responses.create(model="m", input=ASK, reasoning={"effort": "max"})
    assert caught.value.status_code == 400
    assert (caught.value.param, caught.value.code) == ("reasoning.effort", "unsupported_value")
    assert server.engine.calls == 0
