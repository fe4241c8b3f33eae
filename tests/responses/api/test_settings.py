"""Request settings reach the engine; echoed fields come back; diagnostics are not echoed."""

from __future__ import annotations

import json

import pytest

from tests.responses.api.sse import post_error, post_json, read_stream

ASK = "Hello"


def test_sampling_settings_reach_the_engine(start_server):
    server = start_server(["ok"])
    response = server.client().responses.create(model="m", input=ASK, temperature=0.3, top_p=0.9, max_output_tokens=64)
    params = server.engine.params[-1]
    assert (params.temperature, params.top_p, params.max_tokens) == (0.3, 0.9, 64)
    assert (response.temperature, response.top_p, response.max_output_tokens) == (0.3, 0.9, 64)


def test_defaults_reach_the_engine(start_server):
    server = start_server(["ok"], ctx=512)
    response = server.client().responses.create(model="m", input=ASK)
    params = server.engine.params[-1]
    assert (params.temperature, params.top_p) == (1.0, 1.0)
    assert params.max_tokens == 512 - len(server.engine.prompts[-1])  # the rest of the context
    assert response.max_output_tokens is None


@pytest.mark.parametrize("family", ["glm", "deepseek-v4"])
def test_reasoning_effort_none_turns_thinking_off(start_server, family):
    server = start_server(["Plain answer."], family=family)
    client = server.client()
    response = client.responses.create(model="m", input=ASK, reasoning={"effort": "none"})
    assert server.engine.last_prompt_text.endswith("</think>")
    assert [item.type for item in response.output] == ["message"]
    assert response.output_text == "Plain answer."
    assert response.reasoning.effort == "none"
    assert response.usage.output_tokens_details.reasoning_tokens == 0
    client.responses.create(model="m", input=ASK, reasoning={"effort": "high"})
    assert server.engine.last_prompt_text.endswith("<think>")


def test_metadata_and_prompt_cache_key_are_echoed(start_server):
    server = start_server(["ok"])
    metadata = {"ticket": "T-1", "team": "search"}
    with server.http() as http:
        response, _ = post_json(http, {"model": "m", "input": ASK, "metadata": metadata, "prompt_cache_key": "user-42"})
        stream = read_stream(http, {"model": "m", "input": ASK, "metadata": metadata, "prompt_cache_key": "user-42"})
    assert response.metadata == metadata and response.prompt_cache_key == "user-42"
    for event in stream.of("response.created") + stream.of("response.completed"):
        assert event.response.metadata == metadata and event.response.prompt_cache_key == "user-42"


def test_prompt_cache_key_is_not_in_the_prompt(start_server):
    server = start_server(["ok"])
    server.client().responses.create(model="m", input=ASK, prompt_cache_key="CACHE-HINT-XYZ")
    assert "CACHE-HINT-XYZ" not in server.engine.last_prompt_text


def test_client_metadata_is_accepted_and_not_echoed(start_server):
    server = start_server(["ok"])
    body = {"model": "m", "input": ASK, "client_metadata": {"trace": "CLIENT-DIAG-1"}}
    with server.http() as http:
        _, raw = post_json(http, body)
        answer = http.post("/v1/responses", json={**body, "stream": True})
    assert raw["status"] == "completed"
    assert "client_metadata" not in raw and "CLIENT-DIAG-1" not in str(raw)
    assert answer.status_code == 200 and "CLIENT-DIAG-1" not in answer.text
    assert "CLIENT-DIAG-1" not in server.engine.last_prompt_text
    sdk = server.client().responses.create(model="m", input=ASK, extra_body={"client_metadata": {"trace": "x"}})
    assert sdk.status == "completed"


def test_client_metadata_must_be_strings(start_server):
    server = start_server(["ok"])
    with server.http() as http:
        error = post_error(http, {"model": "m", "input": ASK, "client_metadata": {"trace": 7}})
    assert error["param"].startswith("client_metadata")
    assert server.engine.calls == 0


def test_include_encrypted_reasoning_with_effort_none(start_server):
    server = start_server(["Plain answer."], family="glm")
    response = server.client().responses.create(
        model="m", input=ASK, reasoning={"effort": "none"}, include=["reasoning.encrypted_content"]
    )
    assert response.status == "completed" and response.output_text == "Plain answer."
    assert all(item.type != "reasoning" for item in response.output)


@pytest.mark.parametrize("reasoning", [None, {"effort": "low"}])
def test_include_encrypted_reasoning_needs_effort_none(start_server, reasoning):
    server = start_server(["ok"], family="glm")
    body = {"model": "m", "input": ASK, "include": ["reasoning.encrypted_content"]}
    if reasoning is not None:
        body["reasoning"] = reasoning
    with server.http() as http:
        error = post_error(http, body)
    assert error["param"] == "include[0]" and "effort" in error["message"]
    assert server.engine.calls == 0


def test_status_lists_the_responses_endpoint(start_server):
    server = start_server(["ok"])
    with server.http() as http:
        status = http.get("/v1/status").json()
    assert "/v1/responses" in status["dialects"]
    assert "/v1/chat/completions" in status["dialects"]


CODEX_TURN_METADATA = json.dumps({"installation_id": "9c2381b9-0699-4525-9c4a-d985666e3d32", "turn": "t" * 780})


def test_long_client_metadata_values_are_accepted_and_never_kept(start_server):
    """Codex CLI sends an 837-character JSON string under x-codex-turn-metadata: not a `metadata` value."""
    server = start_server(["ok"])
    assert len(CODEX_TURN_METADATA) > 512
    body = {"model": "m", "input": ASK, "store": True, "client_metadata": {"x-codex-turn-metadata": CODEX_TURN_METADATA}}
    with server.http() as http:
        _, raw = post_json(http, body)
        stored = http.get(f"/v1/responses/{raw['id']}").json()
        items = http.get(f"/v1/responses/{raw['id']}/input_items").text
        status = http.get("/v1/status").text + http.get("/metrics/prometheus").text
    for text in (str(raw), str(stored), items, status, server.engine.last_prompt_text):
        assert "9c2381b9" not in text


def test_client_metadata_over_its_size_limit_is_refused(start_server):
    server = start_server(["ok"])
    with server.http() as http:
        error = post_error(http, {"model": "m", "input": ASK, "client_metadata": {"a": "x" * 8192, "b": "y" * 8192}})
    assert error["param"] == "client_metadata" and "16384" in error["message"]
    assert server.engine.calls == 0


def test_penalties_reach_the_engine_and_are_echoed(start_server):
    server = start_server(["ok"])
    with server.http() as http:
        response, raw = post_json(http, {"model": "m", "input": ASK, "presence_penalty": 0.5, "frequency_penalty": -1.0})
        _, defaults = post_json(http, {"model": "m", "input": ASK})
    params = server.engine.params[0]
    assert (params.presence_penalty, params.frequency_penalty) == (0.5, -1.0)
    assert (raw["presence_penalty"], raw["frequency_penalty"]) == (0.5, -1.0)
    assert (defaults["presence_penalty"], defaults["frequency_penalty"]) == (0.0, 0.0)
    assert server.engine.params[1].presence_penalty == 0.0


@pytest.mark.parametrize("field", ["presence_penalty", "frequency_penalty"])
def test_penalties_out_of_range_are_refused(start_server, field):
    server = start_server(["ok"])
    with server.http() as http:
        error = post_error(http, {"model": "m", "input": ASK, field: 2.5})
    assert error["param"] == field
    assert server.engine.calls == 0
