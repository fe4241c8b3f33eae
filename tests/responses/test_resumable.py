"""Resuming a turn cut short (`responses/background/resumable.py`, `ResponseAssembler.restore`,
`Family.continuation`, the pipeline's primer), below HTTP and Redis: for every point where an answer with reasoning,
text and a tool call can be cut, in every family's own syntax, an assembler restored from the events published before
the cut (and the model's text the log keeps with them), continued by the scripted engine (which goes on from what the
prompt already holds of its entry, as a deterministic model would), ends with the same output as the uncut answer,
its events numbered on from the cut, and what was written back is the answer's own beginning, byte for byte.

A log that kept no model text (an older replica's) falls back to the items: ChatML writes calls back, GLM and
DeepSeek refuse a cut call with an engine error, and GLM's empty reasoning still gets its `</think>`."""

from __future__ import annotations

import asyncio

import pytest

from maya_server.engine.fifo import EngineQueue
from maya_server.engine.scripted import ScriptedEngine
from maya_server.errors import EngineError
from maya_server.families import get_family
from maya_server.metrics import Metrics
from maya_server.neutral.conversation import PartialItem, PartialTurn
from maya_server.neutral.events import Finished, RawOutput
from maya_server.pipeline.generation import GenerationService
from maya_server.responses.assembly.assembler import ResponseAssembler
from maya_server.responses.conversion.convert import to_conversation, to_settings
from maya_server.responses.request.request import parse_responses_request

DSML = "｜DSML｜"
ANSWERS = {
    "chatml": ('<think>\nThe user wants the weather; I will look it up.\n</think>\n\nLet me check that for you.\n'
               '<tool_call>\n{"name": "lookup", "arguments": {"city": "Paris", "days": 3, "units": "metric"}}\n'
               '</tool_call>'),
    "glm": ('\nThe user wants the weather; I will look it up.\n</think>\nLet me check that for you.\n'
            '<tool_call>lookup\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n<arg_key>days</arg_key>'
            '<arg_value>3</arg_value><arg_key>units</arg_key><arg_value>metric</arg_value>\n</tool_call>'),
    "deepseek-v4": (f'The user wants the weather; I will look it up.</think>Let me check that for you.\n\n'
                    f'<{DSML}tool_calls>\n<{DSML}invoke name="lookup">\n'
                    f'<{DSML}parameter name="city" string="true">Paris</{DSML}parameter>\n'
                    f'<{DSML}parameter name="days" string="false">3</{DSML}parameter>\n'
                    f'<{DSML}parameter name="units" string="true">metric</{DSML}parameter>\n'
                    f'</{DSML}invoke>\n</{DSML}tool_calls>'),
    "deepseek-v4.1": (f'The user wants the weather; I will look it up.</think>Let me check that for you.\n\n'
                      f'<{DSML} calls>\n<{DSML} invoke name="lookup">\n'
                      f'<{DSML} parameter name="city" string="true">Paris</{DSML} parameter>\n'
                      f'<{DSML} parameter name="days" string="false">3</{DSML} parameter>\n'
                      f'<{DSML} parameter name="units" string="true">metric</{DSML} parameter>\n'
                      f'</{DSML} invoke>\n</{DSML} calls>'),
}
"""One answer a family: reasoning, text, then a call of three arguments, as the model writes it after the
generation prompt (whitespace between the pieces included: it is written back too)."""
EMPTY_REASONING = "</think>" + " ".join(f"w{n}" for n in range(200))
"""GLM with thinking on, reasoning nothing: the issue's case, once restarted from its first word at a cut."""
FAMILIES = [
    "chatml", "glm", "deepseek-v4", "deepseek-v4.1",
]
REQUEST = {
    "model": "m", "input": "Weather in Paris?", "max_output_tokens": 1000,
    "tools": [{"type": "function", "name": "lookup", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"},
                                          "units": {"type": "string"}}}}],
}
ARGUMENTS = '{"city": "Paris", "days": 3, "units": "metric"}'


def generate(assembler: ResponseAssembler, service: GenerationService, partial: PartialTurn | None,
             boundaries: list[int] | None = None) -> list[dict]:
    """The events `assembler` publishes for one generation (continuing `partial`, when given), the model's text
    with them as a background task's worker asks for it; `boundaries` gets the count before each piece of the
    model's text and before the finish: where a log may be cut (a replica appends the events of one piece at once,
    and a flush never splits them: `event_log_redis._batch_count`)."""
    body = parse_responses_request(REQUEST)
    conversation = to_conversation(body)

    async def run() -> list[dict]:
        prepared = service.prepare(conversation, to_settings(body), context_param="input", partial=partial)
        events = []
        async for event in service.run(prepared, service.admit(), raw_output=True):
            if boundaries is not None and isinstance(event, (RawOutput, Finished)):
                boundaries.append(len(events))
            events += assembler.on_event(event)
        return events

    return asyncio.run(asyncio.wait_for(run(), 30))


def service(family: str, answer: str) -> GenerationService:
    return GenerationService(ScriptedEngine([answer]), get_family(family), EngineQueue(slots=1, max_queue=4),
                             Metrics())


def new_assembler(response_id: str | None = None) -> ResponseAssembler:
    assembler = ResponseAssembler(parse_responses_request(REQUEST), model="m", response_id=response_id)
    assembler.keeps_raw = True  # as a Redis log's maker sets it
    return assembler


def whole_run(family: str, answer: str, boundaries: list[int] | None = None
              ) -> tuple[ResponseAssembler, list[dict], list]:
    """The uncut answer: its assembler, its events, and the model's text the log keeps with each event."""
    assembler = new_assembler()
    opening = assembler.opening()
    after: list[int] = []
    events = opening + generate(assembler, service(family, answer), None, after)
    if boundaries is not None:
        boundaries += [len(opening)] + [len(opening) + count for count in after] + [len(events)]
    return assembler, events, [assembler.take_raw(event["sequence_number"]) for event in events]


def without_ids(output: list[dict]) -> list[dict]:
    """The items without the ids made for them (an item begun after the cut gets its own)."""
    return [{key: value for key, value in item.items() if key not in ("id", "call_id")} for item in output]


def cut_points(events: list[dict], boundaries: list[int]) -> list[int]:
    """Every cut where a log can end before the response did (`generate`'s boundaries)."""
    return sorted({cut for cut in boundaries if 0 < cut < len(events)})


def resumed_at(cut: int, whole: ResponseAssembler, events: list[dict], raw: list, family: str, answer: str,
               ) -> tuple[ResponseAssembler, list[dict], str]:
    """The answer cut after `cut` events and continued: its assembler, its events, the text written back."""
    assembler = new_assembler(whole.id)
    assembler.restore({"created_at": whole.created_at, "status": "in_progress"}, events[:cut], raw[:cut])
    partial = assembler.partial_turn()
    written = get_family(family).continuation(to_conversation(parse_responses_request(REQUEST)), partial).text
    return assembler, events[:cut] + generate(assembler, service(family, answer), partial), written


@pytest.mark.parametrize("family", FAMILIES)
def test_the_uncut_answer_is_reasoning_text_and_a_complete_call(family):
    assembler, _, raw = whole_run(family, ANSWERS[family])
    output = assembler.snapshot()["output"]
    assert [item["type"] for item in output] == ["reasoning", "message", "function_call"], output
    assert assembler.status == "completed"
    assert output[0]["content"][0]["text"] == "The user wants the weather; I will look it up."
    assert output[1]["content"][0]["text"] == "Let me check that for you."
    assert output[2]["name"] == "lookup" and output[2]["arguments"] == ARGUMENTS
    kept = "".join(text for pieces in raw if pieces for text, _ in pieces)
    assert ANSWERS[family].startswith(kept) and len(kept) > len(ANSWERS[family]) // 2  # the log keeps the text


@pytest.mark.parametrize("family", FAMILIES)
def test_at_every_cut_the_resumed_answer_is_the_whole_answer_numbered_on_from_the_cut(family):
    answer = ANSWERS[family]
    boundaries: list[int] = []
    whole, events, raw = whole_run(family, answer, boundaries)
    expected = whole.snapshot()
    cuts = cut_points(events, boundaries)
    in_call = [cut for cut in cuts if events[cut - 1]["type"] == "response.function_call_arguments.delta"]
    assert len(cuts) > 20 and len(in_call) >= 2, (len(cuts), len(in_call))  # reasoning, text, inside the call
    for cut in cuts:
        assembler, resumed, written = resumed_at(cut, whole, events, raw, family, answer)
        assert answer.startswith(written), (cut, written)  # written back as the model wrote it
        assert [e["sequence_number"] for e in resumed] == list(range(len(resumed))), cut
        final = assembler.snapshot()
        assert final["status"] == "completed", (cut, final)
        assert without_ids(final["output"]) == without_ids(expected["output"]), (cut, final["output"])
        published = {e["item"]["id"] for e in events[:cut] if e["type"] == "response.output_item.added"}
        assert published <= {item["id"] for item in final["output"]}, cut  # items published keep their ids
        deltas = "".join(e["delta"] for e in resumed if e["type"] == "response.function_call_arguments.delta")
        assert deltas == ARGUMENTS, (cut, deltas)  # no argument text published twice or lost
        assert final["created_at"] == expected["created_at"] and final["id"] == expected["id"]


def test_a_glm_answer_with_empty_reasoning_cut_anywhere_resumes_without_starting_over():
    boundaries: list[int] = []
    whole, events, raw = whole_run("glm", EMPTY_REASONING, boundaries)
    words = EMPTY_REASONING.removeprefix("</think>")
    assert [item["type"] for item in whole.snapshot()["output"]] == ["message"]
    cuts = cut_points(events, boundaries)
    assert len(cuts) > 150
    for cut in cuts:
        assembler, resumed, written = resumed_at(cut, whole, events, raw, "glm", EMPTY_REASONING)
        if any(e["type"] == "response.output_item.added" for e in events[:cut]):
            assert written.startswith("</think>"), (cut, written[:40])  # the reasoning closed, though empty
        assert EMPTY_REASONING.startswith(written), (cut, written[-40:])
        text = assembler.snapshot()["output"][0]["content"][0]["text"]
        assert text == words, (cut, text[:200])
        assert "".join(e["delta"] for e in resumed if e["type"] == "response.output_text.delta") == words, cut


def test_the_partial_turn_carries_the_model_text_the_log_kept():
    whole, events, raw = whole_run("glm", ANSWERS["glm"])
    cut = next(i for i, e in enumerate(events) if e.get("delta") == "Paris") + 1  # inside the call's first value
    assembler = new_assembler(whole.id)
    assembler.restore({"created_at": whole.created_at, "status": "in_progress"}, events[:cut], raw[:cut])
    partial = assembler.partial_turn()
    assert [(item.kind, item.done) for item in partial.items] == [("reasoning", True), ("text", True),
                                                                    ("call", False)]
    written = "".join(text for text, _ in partial.raw)
    assert written.endswith("<arg_value>Paris") and ANSWERS["glm"].startswith(written)
    tags = [text for text, tag in partial.raw if tag]
    assert tags[:3] == ["</think>", "<tool_call>", "<arg_key>"]  # the tags the parser read, as control segments
    prompt = get_family("glm").continuation(to_conversation(parse_responses_request(REQUEST)), partial)
    assert [s.text for s in prompt.segments if s.control] == tags


# -- a log that kept no model text (written by an older replica) -----------------------------------
def test_without_the_model_text_chatml_writes_its_items_back_at_every_cut():
    boundaries: list[int] = []
    whole, events, _ = whole_run("chatml", ANSWERS["chatml"], boundaries)
    expected = whole.snapshot()
    for cut in cut_points(events, boundaries):
        assembler, _, _ = resumed_at(cut, whole, events, [None] * len(events), "chatml", ANSWERS["chatml"])
        assert without_ids(assembler.snapshot()["output"]) == without_ids(expected["output"]), cut


@pytest.mark.parametrize("family", ["glm", "deepseek-v4"])
def test_without_the_model_text_a_cut_call_is_refused_and_reasoning_and_text_continue(family):
    conversation = to_conversation(parse_responses_request(REQUEST))
    cut_call = PartialTurn((PartialItem("reasoning", "Thinking.", True), PartialItem("call", '{"a": 1', False, "f")))
    with pytest.raises(EngineError):
        get_family(family).continuation(conversation, cut_call)
    text = PartialTurn((PartialItem("reasoning", "Thinking.", True), PartialItem("text", "The answer", False)))
    assert get_family(family).continuation(conversation, text).text == "Thinking.</think>The answer"


def test_without_the_model_text_glm_closes_an_empty_reasoning_before_the_answer():
    conversation = to_conversation(parse_responses_request(REQUEST))
    answer_only = PartialTurn((PartialItem("text", "w0 w1", False),))
    assert get_family("glm").continuation(conversation, answer_only).text == "</think>w0 w1"
    no_thinking = to_conversation(parse_responses_request({**REQUEST, "reasoning": {"effort": "none"}}))
    assert get_family("glm").continuation(no_thinking, answer_only).text == "w0 w1"  # the prompt closed it


def test_text_the_parser_held_until_the_end_is_kept_with_the_events_the_end_made():
    answer = "Reasoning.</think>The arrow is <"  # `<` may begin a tag: it is read only when the output ends
    boundaries: list[int] = []
    whole, events, raw = whole_run("glm", answer, boundaries)
    assert whole.snapshot()["output"][1]["content"][0]["text"] == "The arrow is <"
    assert "".join(text for pieces in raw if pieces for text, _ in pieces) == answer
    finish = next(i for i, e in enumerate(events) if e["type"] == "response.output_text.done")
    cuts = [cut for cut in cut_points(events, boundaries) if cut <= finish - 1 or cut >= finish + 3]
    # Not between the text the end released and the terminal events (a replica killed while it saves the
    # finished response): the parser primed there holds that text again and its end would publish it twice.
    for cut in cuts:
        assembler, _, written = resumed_at(cut, whole, events, raw, "glm", answer)
        assert answer.startswith(written), (cut, written)
        assert without_ids(assembler.snapshot()["output"]) == without_ids(whole.snapshot()["output"]), cut
