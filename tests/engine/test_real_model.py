"""End to end with the real embedded engine (llama-server as Maya's child): SmolLM2-135M, greedy, via the SDK."""

from __future__ import annotations

import pytest

from tests.embedded import embedded_server

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def smollm():
    with embedded_server(ctx=2048, slots=2) as server:
        yield server


QUESTION = [{"role": "user", "content": "What is the capital of France?"}]


def test_real_generation_answers_the_question(smollm):
    completion = smollm.client().chat.completions.create(model="smollm2", messages=QUESTION, temperature=0, max_tokens=32)
    answer = completion.choices[0].message.content
    assert "Paris" in answer
    assert completion.choices[0].finish_reason in ("stop", "length")
    assert completion.usage.completion_tokens > 0


def test_real_streaming_matches_non_streaming_greedy_output(smollm):
    client = smollm.client()
    whole = client.chat.completions.create(model="smollm2", messages=QUESTION, temperature=0, max_tokens=24)
    chunks = list(client.chat.completions.create(
        model="smollm2", messages=QUESTION, temperature=0, max_tokens=24, stream=True, stream_options={"include_usage": True}
    ))
    streamed = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert streamed == whole.choices[0].message.content
    assert chunks[-1].usage.completion_tokens == whole.usage.completion_tokens
    # the same prompt again: llama-server reuses the prefix its slot still holds
    assert 0 < chunks[-1].usage.prompt_tokens_details.cached_tokens < chunks[-1].usage.prompt_tokens


def test_real_max_tokens_truncates(smollm):
    completion = smollm.client().chat.completions.create(
        model="smollm2", messages=[{"role": "user", "content": "Write a long story about a dragon."}],
        temperature=0, max_tokens=5,
    )
    assert completion.choices[0].finish_reason == "length"
    assert completion.usage.completion_tokens == 5


def test_real_generation_through_responses(smollm):
    response = smollm.client().responses.create(
        model="smollm2", input="What is the capital of France?", temperature=0, max_output_tokens=32
    )
    assert response.status in ("completed", "incomplete")
    assert "Paris" in response.output_text
    assert response.usage.output_tokens > 0
    assert response.output[-1].type == "message"


def test_real_streaming_through_responses_matches_non_streaming(smollm):
    client = smollm.client()
    whole = client.responses.create(model="smollm2", input="Name a color.", temperature=0, max_output_tokens=16)
    events = list(client.responses.create(
        model="smollm2", input="Name a color.", temperature=0, max_output_tokens=16, stream=True
    ))
    assert [e.sequence_number for e in events] == list(range(len(events)))
    assert events[0].type == "response.created"
    assert events[-1].type in ("response.completed", "response.incomplete")
    streamed = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert streamed == whole.output_text
    assert events[-1].response.output_text == whole.output_text


def test_real_stored_continuation_reuses_the_previous_turn(smollm):
    client = smollm.client()
    first = client.responses.create(
        model="smollm2", input="Remember the value 73. Reply with one word.", temperature=0, max_output_tokens=16,
        store=True,
    )
    second = client.responses.create(
        model="smollm2", previous_response_id=first.id, input="What value did I give you?", temperature=0,
        max_output_tokens=16, store=True,
    )
    assert second.usage.input_tokens > first.usage.input_tokens
    # the continuation's prompt starts with the first turn's prompt, whose KV llama-server's slot kept
    assert second.usage.input_tokens_details.cached_tokens >= first.usage.input_tokens - 1
    assert [i.type for i in client.responses.input_items.list(second.id, order="asc")] == ["message"] * 3


def test_real_background_response(smollm):
    client = smollm.client()
    job = client.responses.create(
        model="smollm2", input="What is the capital of France?", temperature=0, max_output_tokens=32,
        background=True, store=True,
    )
    events = list(client.responses.retrieve(job.id, stream=True))
    assert events[-1].type in ("response.completed", "response.incomplete")
    assert "Paris" in client.responses.retrieve(job.id).output_text
