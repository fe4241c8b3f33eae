"""Resuming a turn cut short (`responses/resumable.py`, `ResponseAssembler.restore`, `Family.continuation`, the
pipeline's primer), below HTTP and Redis: for every point where a ChatML answer with reasoning, text and a tool
call can be cut, an assembler restored from the events published before the cut, continued by the scripted
engine (which goes on from what the prompt already holds of its entry, as a deterministic model would), ends
with the same output as the uncut answer, its events numbered on from the cut.

The families that cannot write a cut tool call back (GLM, DeepSeek-V4) refuse it with an engine error."""

from __future__ import annotations

import asyncio

import pytest

from maya_server.engine.fifo import EngineQueue
from maya_server.engine.scripted import ScriptedEngine
from maya_server.errors import EngineError
from maya_server.families import get_family
from maya_server.metrics import Metrics
from maya_server.neutral.conversation import PartialItem, PartialTurn
from maya_server.pipeline.generation import GenerationService
from maya_server.responses.assembler import ResponseAssembler
from maya_server.responses.convert import to_conversation, to_settings
from maya_server.responses.request import parse_responses_request

ANSWER = ('<think>\nThe user wants the weather; I will look it up.\n</think>\n\nLet me check that for you.\n'
          '<tool_call>\n{"name": "lookup", "arguments": {"city": "Paris", "days": 3, "units": "metric"}}\n</tool_call>')
REQUEST = {
    "model": "m", "input": "Weather in Paris?", "max_output_tokens": 200,
    "tools": [{"type": "function", "name": "lookup", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"},
                                          "units": {"type": "string"}}}}],
}


def generate(assembler: ResponseAssembler, service: GenerationService, partial: PartialTurn | None,
             boundaries: list[int] | None = None) -> list[dict]:
    """The events `assembler` publishes for one generation (continuing `partial`, when given); `boundaries`
    gets the count after each pipeline event's events (a replica flushes no less than that together)."""
    body = parse_responses_request(REQUEST)
    conversation = to_conversation(body)

    async def run() -> list[dict]:
        prepared = service.prepare(conversation, to_settings(body), context_param="input", partial=partial)
        events = []
        async for event in service.run(prepared, service.admit()):
            events += assembler.on_event(event)
            if boundaries is not None:
                boundaries.append(len(events))
        return events

    return asyncio.run(run())


def service() -> GenerationService:
    return GenerationService(ScriptedEngine([ANSWER]), get_family("chatml"), EngineQueue(slots=1, max_queue=4),
                             Metrics())


def whole_run(boundaries: list[int] | None = None) -> tuple[ResponseAssembler, list[dict]]:
    assembler = ResponseAssembler(parse_responses_request(REQUEST), model="m")
    opening = assembler.opening()
    after = []
    events = opening + generate(assembler, service(), None, after)
    if boundaries is not None:
        boundaries += [len(opening)] + [len(opening) + count for count in after]
    return assembler, events


def test_the_uncut_answer_is_reasoning_text_and_a_complete_call():
    assembler, events = whole_run()
    kinds = [item["type"] for item in assembler.snapshot()["output"]]
    assert kinds == ["reasoning", "message", "function_call"] and assembler.status == "completed"
    assert assembler.snapshot()["output"][2]["arguments"] == '{"city": "Paris", "days": 3, "units": "metric"}'


def without_ids(output: list[dict]) -> list[dict]:
    """The items without the ids made for them (an item begun after the cut gets its own)."""
    return [{key: value for key, value in item.items() if key not in ("id", "call_id")} for item in output]


def cut_points(events: list[dict], boundaries: list[int]) -> list[int]:
    """Every cut between two pipeline events' events (what one event publishes is flushed together), but between
    a call's start and its first arguments: both come from the one token that made the call readable."""
    return sorted({cut for cut in boundaries if cut < len(events)
                   and not (events[cut - 1]["type"] == "response.output_item.added"
                            and events[cut - 1]["item"]["type"] == "function_call")})


def test_at_every_cut_the_resumed_answer_is_the_whole_answer_numbered_on_from_the_cut():
    boundaries: list[int] = []
    whole, events = whole_run(boundaries)
    expected = whole.snapshot()
    cuts = cut_points(events, boundaries)
    assert len(cuts) > 20  # inside the reasoning, the text and the call's arguments
    for cut in cuts:
        assembler = ResponseAssembler(parse_responses_request(REQUEST), model="m", response_id=whole.id)
        assembler.restore({"created_at": whole.created_at, "status": "in_progress"}, events[:cut])
        rest = generate(assembler, service(), assembler.partial_turn())
        resumed = events[:cut] + rest
        assert [e["sequence_number"] for e in resumed] == list(range(len(resumed))), cut
        final = assembler.snapshot()
        assert final["status"] == "completed", (cut, final)
        assert without_ids(final["output"]) == without_ids(expected["output"]), (cut, final["output"])
        published = {e["item"]["id"] for e in events[:cut] if e["type"] == "response.output_item.added"}
        assert published <= {item["id"] for item in final["output"]}, cut  # items published keep their ids
        assert final["created_at"] == expected["created_at"] and final["id"] == expected["id"]


def test_the_partial_turn_says_what_was_published_and_what_was_closed():
    whole, events = whole_run()
    cut = next(i for i, e in enumerate(events) if e["type"] == "response.function_call_arguments.delta") + 1
    assembler = ResponseAssembler(parse_responses_request(REQUEST), model="m", response_id=whole.id)
    assembler.restore({"created_at": whole.created_at, "status": "in_progress"}, events[:cut])
    partial = assembler.partial_turn()
    assert [(item.kind, item.done) for item in partial.items] == [("reasoning", True), ("text", True),
                                                                    ("call", False)]
    assert partial.items[2].name == "lookup" and partial.items[2].text.startswith("{")
    written = get_family("chatml").continuation(None, partial).text
    assert ANSWER.startswith(written.split('"arguments": ')[0])


@pytest.mark.parametrize("family", ["glm", "deepseek-v4"])
def test_families_that_cannot_write_a_cut_call_back_refuse_it_and_continue_reasoning_and_text(family):
    cut_call = PartialTurn((PartialItem("reasoning", "Thinking.", True), PartialItem("call", '{"a": 1', False, "f")))
    with pytest.raises(EngineError):
        get_family(family).continuation(None, cut_call)
    text = PartialTurn((PartialItem("reasoning", "Thinking.", True), PartialItem("text", "The answer", False)))
    assert get_family(family).continuation(None, text).text == "Thinking.</think>The answer"
