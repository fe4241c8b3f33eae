"""Maya in front of a real vLLM (`make test-vllm`: `tests/vllm_server.py` starts one and sets `MAYA_TEST_VLLM_URL`).

Without `MAYA_TEST_VLLM_URL` every test here skips. What a client sees through Maya must be what vLLM itself
answers: the model's name, the greedy text, the engine's own usage; and the Responses API's stored continuation,
background tasks and their cancelling work over it; each API key's prompts are salted apart in vLLM's prefix
cache (`cache_salt`), so a second key never reads the first key's cached blocks.
"""

from __future__ import annotations

import os
import time

import httpx
import orjson
import pytest

from maya_server.config import ServerConfig
from maya_server.engine.base import SamplingParams
from maya_server.engine.upstream.wire import completion_request
from maya_server.engine_setup import create_engine

from bench.relay.record import prompt_ids, stop_ids
from tests.gguf_model_dir import smollm2_tokenizer
from tests.server import RunningServer

URL = os.environ.get("MAYA_TEST_VLLM_URL")
pytestmark = pytest.mark.skipif(URL is None, reason="no live vLLM: set MAYA_TEST_VLLM_URL (make test-vllm)")
KEYS = ("sk-vllm-a", "sk-vllm-b")
WAIT_S = 120.0
"""The longest a background task may take here (a few dozen tokens on two busy cores)."""


@pytest.fixture(scope="module")
def maya(tokenizer_dir):
    config = ServerConfig(engine="upstream", family="chatml", upstream_url=URL, tokenizer=tokenizer_dir,
                          upstream_read_timeout=120.0, api_keys=KEYS)
    server = RunningServer(config, create_engine(config))
    yield server
    server.stop()


def direct(prompt: str, tokens: int) -> tuple[str, dict]:
    """vLLM's own answer to Maya's body for `prompt` (text, usage)."""
    tokenizer = smollm2_tokenizer()
    model = httpx.get(URL + "/v1/models", timeout=10).json()["data"][0]["id"]
    body = completion_request("vllm", model, prompt_ids(tokenizer, prompt), SamplingParams(max_tokens=tokens,
                              temperature=0), stop_ids(tokenizer))
    text, usage = [], None
    with httpx.stream("POST", URL + "/v1/completions", content=orjson.dumps(body), timeout=120,
                      headers={"content-type": "application/json"}) as response:
        for line in response.iter_lines():
            if line.startswith("data: {"):
                chunk = orjson.loads(line[6:])
                usage = chunk.get("usage") or usage
                text += [choice["text"] for choice in chunk.get("choices") or []]
    return "".join(text), usage


def test_chat_through_maya_is_vllms_own_answer(maya):
    prompt = "What is the capital of France? Answer in one short sentence."
    text, usage = direct(prompt, 64)
    served = httpx.get(URL + "/v1/models", timeout=10).json()["data"][0]["id"]
    client = maya.client(api_key=KEYS[0])
    assert [card.id for card in client.models.list().data] == [served]
    chunks = list(client.chat.completions.create(model=served, messages=[{"role": "user", "content": prompt}],
                                                 max_tokens=64, temperature=0, stream=True,
                                                 stream_options={"include_usage": True}))
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == text
    assert chunks[-1].model == served
    assert (chunks[-1].usage.prompt_tokens, chunks[-1].usage.completion_tokens) == (usage["prompt_tokens"],
                                                                                   usage["completion_tokens"])


def test_a_stored_response_continues_over_vllm(maya):
    client = maya.client(api_key=KEYS[0])
    first = client.responses.create(model="m", input="My name is Ada. Say hello.", max_output_tokens=24, store=True,
                                    temperature=0)
    assert first.status in ("completed", "incomplete") and first.output_text
    second = client.responses.create(model="m", input="What is my name?", previous_response_id=first.id,
                                     max_output_tokens=24, temperature=0, store=True)
    assert second.status in ("completed", "incomplete")
    assert second.usage.input_tokens > first.usage.input_tokens  # the first turn went upstream again


def test_background_and_cancel_over_vllm(maya):
    client = maya.client(api_key=KEYS[0])
    done = client.responses.create(model="m", input="Count from one to five.", max_output_tokens=32,
                                   temperature=0, background=True, store=True)
    deadline = time.monotonic() + WAIT_S
    while done.status in ("queued", "in_progress") and time.monotonic() < deadline:
        time.sleep(0.5)
        done = client.responses.retrieve(done.id)
    assert done.status in ("completed", "incomplete") and done.output_text

    long = client.responses.create(model="m", input="Write a very long story about a lighthouse.",
                                   max_output_tokens=1500, temperature=0, background=True, store=True)
    cancelled = client.responses.cancel(long.id)
    assert cancelled.status == "cancelled"
    assert client.responses.retrieve(long.id).status == "cancelled"


def test_each_key_has_its_own_prefix_cache(maya):
    """With `--enable-prompt-tokens-details` vLLM reports cached prompt tokens: the same key's second request
    reads the blocks its first one left; another key's identical prompt, salted apart, reads none."""
    prompt = "Tell me about lighthouses. " * 20 + "Answer briefly."
    cached = []
    for key in (KEYS[0], KEYS[0], KEYS[1]):
        completion = maya.client(api_key=key).chat.completions.create(
            model="m", messages=[{"role": "user", "content": prompt}], max_tokens=4, temperature=0)
        details = completion.usage.prompt_tokens_details
        cached.append(details.cached_tokens if details else 0)
    assert cached[1] > 0 and cached[2] == 0, cached


def test_vllm_holds_structured_output_to_maya_s_grammar(maya):
    """vLLM takes the grammar as `structured_outputs.grammar` (xgrammar reads GBNF) and holds the model to it: a
    strict schema the model alone does not follow comes back valid (or cut by the output limit, never refused),
    and vLLM refused no grammar."""
    schema = {"type": "object", "properties": {"city": {"type": "string"}, "country": {"type": "string"}},
              "required": ["city", "country"], "additionalProperties": False}
    client = maya.client(api_key=KEYS[0])
    valid = 0
    for seed in (1, 2, 3):
        completion = client.chat.completions.create(
            model="m", seed=seed, temperature=0.7, max_tokens=200,
            messages=[{"role": "user", "content": "Where is the Eiffel Tower?"}],
            response_format={"type": "json_schema", "json_schema": {"name": "place", "schema": schema,
                                                                    "strict": True}})
        choice = completion.choices[0]
        if choice.finish_reason == "length":
            continue
        answer = orjson.loads(choice.message.content)
        assert set(answer) == {"city", "country"} and all(isinstance(v, str) for v in answer.values())
        valid += 1
    assert valid >= 2
    status = httpx.get(maya.url + "/v1/status", headers={"Authorization": f"Bearer {KEYS[0]}"}, timeout=10).json()
    assert status["constrained_decoding"]["refusals"] == 0 and status["constrained_decoding"]["in_use"]
