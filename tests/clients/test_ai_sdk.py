"""The Vercel AI SDK (`ai` + `@ai-sdk/openai`, pinned in package.json) runs its tool loop against Maya.

`generateText` and `streamText` over `openai.responses()` with a two-step tool loop, using
the README's option `providerOptions.openai.store = false` (the SDK otherwise assumes
OpenAI's stored responses and sends `item_reference`s, which Maya refuses with a 400 that
names this option). The packages come from the cached `npm ci` tree (node_packages.py).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.chat.test_families_through_chat import glm_call

from tests.clients.node_packages import ensure_installed

SCRIPT = Path(__file__).with_name("ai_sdk_tool_loop.mjs")
CALL = "Looking it up.</think>" + glm_call("get_weather", city="Paris")
ANSWER = "Got it.</think>It is sunny in Paris."

pytestmark = pytest.mark.skipif(shutil.which("node") is None, reason="the Node clients need Node.js")


def run_node(server, mode: str, **env: str) -> subprocess.CompletedProcess:
    work = ensure_installed().parent
    shutil.copy2(SCRIPT, work / SCRIPT.name)  # node resolves packages from the script's own directory
    return subprocess.run(["node", str(work / SCRIPT.name), mode], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "MAYA_BASE_URL": server.url + "/v1", **env})


def outcome_of(result: subprocess.CompletedProcess) -> dict:
    assert result.returncode == 0, result.stderr[-4000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("mode", ["generateText", "streamText"])
def test_two_step_tool_loop(maya, mode):
    server, recorder = maya([CALL, ANSWER])
    outcome = outcome_of(run_node(server, mode))
    assert outcome["text"] == "It is sunny in Paris."
    assert outcome["finishReasons"] == ["tool-calls", "stop"]
    assert outcome["toolResults"] == ["sunny in Paris (tool result)"]
    assert "sunny in Paris (tool result)" in server.engine.last_prompt_text
    requests = [e.request_json() for e in recorder.of("/v1/responses")]
    assert len(requests) == 2 and all(r.get("store") is False for r in requests)
    assert not any(item.get("type") == "item_reference" for item in requests[1]["input"])
    if mode == "streamText":
        assert outcome["deltas"] > 1


def test_without_store_false_the_error_names_the_option(maya):
    """The SDK's default (store:true) makes step 2 send item_reference; Maya's 400 says what to set."""
    server, recorder = maya([CALL, ANSWER])
    result = run_node(server, "generateText", AI_SDK_DEFAULT_STORE="1")
    assert result.returncode != 0
    refused = [e for e in recorder.of("/v1/responses") if e.status == 400]
    assert len(refused) == 1
    assert any(item.get("type") == "item_reference" for item in refused[0].request_json()["input"])
    error = json.loads(refused[0].body)["error"]
    assert "store: false" in error["message"] and error["param"].endswith(".type")
    assert server.engine.calls == 1  # the refused step never reached the engine


STRUCTURED = Path(__file__).with_name("ai_sdk_structured.mjs")
WEATHER = {"city": "Paris", "temperature": 21, "sunny": True, "tags": ["warm", "dry"],
           "wind": {"speed": 12.5, "unit": "kmh"}, "note": None}


@pytest.mark.parametrize("api", ["responses", "chat"])
@pytest.mark.parametrize("mode", ["generateObject", "streamObject", "outputObject"])
def test_structured_output_with_a_zod_schema(maya, mode, api):
    """zod's draft-07 `$schema` is accepted, the schema is enforced, and the SDK gets the object it asked for."""
    server, recorder = maya(["</think>" + json.dumps(WEATHER)])
    work = ensure_installed().parent
    shutil.copy2(STRUCTURED, work / STRUCTURED.name)
    result = subprocess.run(["node", str(work / STRUCTURED.name), mode, api], capture_output=True, text=True,
                            timeout=120, env={**os.environ, "MAYA_BASE_URL": server.url + "/v1"})
    assert outcome_of(result)["object"] == WEATHER
    path = "/v1/responses" if api == "responses" else "/v1/chat/completions"
    sent = recorder.of(path)[0].request_json()
    fmt = sent["text"]["format"] if api == "responses" else sent["response_format"]["json_schema"]
    assert fmt["schema"]["$schema"] == "http://json-schema.org/draft-07/schema#"
    assert "Schema name:" in server.engine.last_prompt_text  # the model was told the schema
