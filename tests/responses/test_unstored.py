"""The memory of `store:true` responses that ended unsaved: bounded, counted, per owner; and who feeds it."""

from __future__ import annotations

import pytest

from maya_server.errors import EngineError
from maya_server.neutral.events import Failed, Finished, TextDelta, Usage
from maya_server.responses.assembly.assembler import ResponseAssembler
from maya_server.responses.request.request import parse_responses_request
from maya_server.responses.persistence.unstored import UNSTORED_IDS, UnstoredResponses

USAGE = Usage(prompt_tokens=1, cached_tokens=0, completion_tokens=1, reasoning_tokens=0)


def test_it_explains_an_id_to_its_owner_only():
    memory = UnstoredResponses()
    memory.note("alice", "resp_1", "failed")
    assert "it failed" in memory.explain("alice", "resp_1")
    assert memory.explain("bob", "resp_1") is None          # another key: the plain unknown-id answer
    assert memory.explain("alice", "resp_2") is None
    assert UNSTORED_IDS == memory.limit == 4096


def test_it_is_bounded_oldest_forgotten_first_and_counts_what_it_does():
    memory = UnstoredResponses(limit=2)
    for n in range(3):
        memory.note("alice", f"resp_{n}", "cancelled")
    assert memory.explain("alice", "resp_0") is None
    assert "cancelled" in memory.explain("alice", "resp_2")
    assert memory.stats() == {"entries": 2, "limit": 2, "noted": 3, "evicted": 1}


def test_forget_is_per_owner_and_an_unknown_ending_is_a_bug():
    memory = UnstoredResponses()
    memory.note("alice", "resp_1", "abandoned")
    memory.forget("bob", "resp_1")
    assert "disconnected" in memory.explain("alice", "resp_1")
    memory.forget("alice", "resp_1")
    assert memory.explain("alice", "resp_1") is None
    with pytest.raises(ValueError):
        memory.note("alice", "resp_1", "deleted")


def assembler(noted: list) -> ResponseAssembler:
    request = parse_responses_request({"model": "m", "input": "hi", "store": True})
    return ResponseAssembler(request, model="m", on_unsaved=lambda rid, ending: noted.append((rid, ending)))


@pytest.mark.parametrize("end, ending", [
    (lambda a: a.on_event(Failed(EngineError("boom"), USAGE)), "failed"),
    (lambda a: a.cancelled(), "cancelled"),
    (lambda a: a.interrupted(EngineError("shutting down")), "failed"),
])
def test_the_assembler_reports_every_unsaved_end(end, ending):
    noted: list = []
    a = assembler(noted)
    a.opening()
    a.on_event(TextDelta("partial"))
    end(a)
    assert noted == [(a.id, ending)]


def test_a_finished_response_is_not_reported():
    noted: list = []
    a = assembler(noted)
    a.opening()
    a.on_event(TextDelta("done"))
    a.on_event(Finished("stop", USAGE))
    assert noted == []
