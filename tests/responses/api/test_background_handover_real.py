"""A background task outlives its replica on the real engine: two `maya` processes on SmolLM2 (the default model,
each its own llama-server child) share one redis-server; the owner is killed mid-answer, and the other continues
the answer from the text already streamed (greedy, so the answer reads on where it was cut).

Slow, like the other real-engine tests (`pytest -m "not slow"` skips it)."""

from __future__ import annotations

import pytest

from tests.responses.api.test_background_replicas import (  # noqa: F401 (fleet: the fixture)
    SETTLE_S, Reader, fleet, jobs_status, numbers, read, retrieve, status,
)
from tests.server import wait_for

# serial: kill -9 lands mid-answer of a real model on a clock: other workers' load moves where it lands
pytestmark = [pytest.mark.slow, pytest.mark.serial]


def text_of(events: list[dict]) -> str:
    return "".join(event["delta"] for event in events if event["type"] == "response.output_text.delta")


def test_kill_9_of_the_owner_mid_answer_the_other_replica_continues_the_text_already_streamed(fleet):
    a = fleet.start_real("--job-lease-s", "2")
    b = fleet.start_real()
    with a.http() as http:
        created = http.post("/v1/responses", json={
            "model": "any", "input": "Tell me a long story about a dragon who learns to cook.", "background": True,
            "store": True, "temperature": 0, "max_output_tokens": 160})
    assert created.status_code == 200, created.text
    job = created.json()
    on_a = Reader(a, job["id"])
    assert wait_for(lambda: on_a.deltas() >= 25 or not on_a.is_alive(), SETTLE_S), on_a.events[-3:]
    a.kill()
    on_a.join(SETTLE_S)
    before = list(on_a.events)
    assert before[-1]["type"] == "response.output_text.delta", before[-3:]  # cut mid-answer
    rest = read(b, job["id"], starting_after=before[-1]["sequence_number"], timeout=SETTLE_S * 3)
    whole = before + rest
    assert numbers(whole) == list(range(len(whole)))
    assert whole[-1]["type"] in ("response.completed", "response.incomplete"), whole[-3:]
    streamed, answer = text_of(before), text_of(whole)
    final = retrieve(b, job["id"]).json()
    assert final["status"] == whole[-1]["response"]["status"]
    message = next(item for item in final["output"] if item["type"] == "message")
    assert message["content"][0]["text"] == answer  # one answer: the streamed text, then the rest
    assert answer.startswith(streamed) and len(answer) > len(streamed)
    assert final["usage"]["output_tokens"] <= 160 + 2  # the limit counts what was written before the cut
    assert jobs_status(b)["resumed"] == 1
