"""Over HTTP, with the official SDK: an answer sent back as history reaches the engine as the ids it generated.

Chat resends the whole history, Responses continues with `previous_response_id` (the store's history) or with
the output items resent inline; each next prompt must hold the ids the scripted engine generated ("Hel" "lo",
where its tokenizer writes "Hello"), and the metrics count the turns found.
"""

from __future__ import annotations

import pytest

from tests.scripted import holds_run, piece_ids
from tests.server import prometheus_values

ANSWER = ["Hel", "lo", " the", "re"]


def memory_metrics(server) -> dict[str, float]:
    return prometheus_values(server.http().get("/metrics/prometheus").text, "maya:spelling_memory")


def test_chat_history_reaches_the_engine_as_the_generated_ids(start_server):
    server = start_server([{"pieces": ANSWER}, "Fine."])
    client = server.client()
    first = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
    assert first.choices[0].message.content == "Hello there"

    client.chat.completions.create(model="m", messages=[
        {"role": "user", "content": "hi"}, {"role": "assistant", "content": "Hello there"},
        {"role": "user", "content": "and?"}])

    assert holds_run(server.engine.prompts[1], piece_ids(server.engine.tokenizer, *ANSWER))
    metrics = memory_metrics(server)
    assert metrics["maya:spelling_memory_hits_total"] == 1 and metrics["maya:spelling_memory_entries"] == 2


@pytest.mark.parametrize("history", ["previous_response_id", "inline"])
def test_a_responses_continuation_reaches_the_engine_as_the_generated_ids(start_server, history):
    server = start_server([{"pieces": ANSWER}, "Fine."])
    client = server.client()
    first = client.responses.create(model="m", input="hi", store=True)
    assert first.output_text == "Hello there"

    if history == "previous_response_id":
        client.responses.create(model="m", previous_response_id=first.id, input="and?")
    else:
        resent = [item.model_dump(exclude_none=True) for item in first.output]
        client.responses.create(model="m", input=[{"role": "user", "content": "hi"}, *resent,
                                                  {"role": "user", "content": "and?"}])

    assert holds_run(server.engine.prompts[1], piece_ids(server.engine.tokenizer, *ANSWER))
    assert memory_metrics(server)["maya:spelling_memory_hits_total"] == 1


def test_with_the_memory_off_the_history_is_tokenized_again_and_no_metric_is_served(start_server):
    server = start_server([{"pieces": ANSWER}, "Fine."], spelling_memory_mib=0)
    client = server.client()
    first = client.responses.create(model="m", input="hi", store=True)
    client.responses.create(model="m", previous_response_id=first.id, input="and?")

    assert not holds_run(server.engine.prompts[1], piece_ids(server.engine.tokenizer, *ANSWER))
    assert memory_metrics(server) == {}
