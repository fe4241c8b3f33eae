"""`PublishGate` on its own: what it holds, what it releases, and what it replaces with a failure."""

from __future__ import annotations

import asyncio

from maya_server.errors import EngineError, StructuredOutputError
from maya_server.neutral.events import (
    Failed, Finished, RawOutput, TextDelta, ToolCallArgumentsDelta, ToolCallFinished, ToolCallStarted, Usage,
)
from maya_server.neutral.conversation import Conversation, Message, TextPart, ToolSpec
from maya_server.structured.formats import JsonObjectFormat, TextFormat
from maya_server.structured.gate import PublishGate, gated, publish_gate
from maya_server.structured.validator import StructuredValidator

USAGE = Usage(prompt_tokens=7, cached_tokens=0, completion_tokens=5, reasoning_tokens=0)
CITY = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"],
        "additionalProperties": False}


def feed_all(gate: PublishGate, events: list) -> list[list]:
    """What the gate returns for each event, in order."""
    return [gate.feed(event) for event in events]


def call_events(arguments: str, name: str = "get_weather") -> list:
    return [ToolCallStarted(0, "call_1", name), ToolCallArgumentsDelta(0, arguments), ToolCallFinished(0, arguments)]


def test_an_inactive_gate_passes_every_event_through_at_once():
    gate = PublishGate(None, {})
    events = [TextDelta("a"), TextDelta("b"), Finished("stop", USAGE)]
    assert not gate.active
    assert feed_all(gate, events) == [[e] for e in events]


def test_a_json_gate_holds_everything_until_the_finish_then_releases_it_all():
    gate = PublishGate(StructuredValidator(None), {})
    events = [TextDelta('{"n"'), TextDelta(": 1}"), Finished("stop", USAGE)]
    released = feed_all(gate, events)
    assert gate.active
    assert released[:2] == [[], []]
    assert released[2] == events


def test_invalid_json_text_becomes_one_failure_carrying_the_finishs_usage():
    gate = PublishGate(StructuredValidator(None), {})
    released = feed_all(gate, [TextDelta("not json"), Finished("stop", USAGE)])
    assert released[0] == []
    [failure] = released[1]
    assert isinstance(failure, Failed) and isinstance(failure.error, StructuredOutputError)
    assert failure.error.code == "invalid_structured_output" and "text.format" in failure.error.message
    assert failure.usage == USAGE


def test_a_schema_mismatch_is_a_failure_too():
    gate = PublishGate(StructuredValidator(CITY), {})
    [[], [failure]] = feed_all(gate, [TextDelta('{"town": "Paris"}'), Finished("stop", USAGE)])
    assert isinstance(failure.error, StructuredOutputError)


def test_strict_tool_arguments_that_break_the_schema_fail_the_turn():
    gate = PublishGate(None, {"get_weather": StructuredValidator(CITY)})
    released = feed_all(gate, call_events('{"city": 3}') + [Finished("tool_calls", USAGE)])
    assert released[:3] == [[], [], []]
    [failure] = released[3]
    assert isinstance(failure, Failed) and isinstance(failure.error, StructuredOutputError)
    assert "'get_weather'" in failure.error.message and failure.usage == USAGE


def test_valid_strict_tool_arguments_are_released_whole():
    gate = PublishGate(None, {"get_weather": StructuredValidator(CITY)})
    events = call_events('{"city": "Paris"}') + [Finished("tool_calls", USAGE)]
    assert feed_all(gate, events)[-1] == events


def test_a_call_to_a_function_that_is_not_strict_is_not_checked():
    gate = PublishGate(None, {"get_weather": StructuredValidator(CITY)})
    events = call_events("not json at all", name="get_time") + [Finished("tool_calls", USAGE)]
    assert feed_all(gate, events)[-1] == events


def test_a_length_finish_releases_nothing_but_the_finish():
    gate = PublishGate(StructuredValidator(None), {})
    finish = Finished("length", USAGE)
    assert feed_all(gate, [TextDelta('{"n": '), finish]) == [[], [finish]]


def test_a_failure_passes_through_and_drops_what_was_held():
    gate = PublishGate(StructuredValidator(None), {})
    failure = Failed(EngineError("the engine broke"), USAGE)
    assert feed_all(gate, [TextDelta('{"n": 1}'), failure]) == [[], [failure]]


def test_output_past_the_byte_budget_fails_at_the_finish():
    gate = PublishGate(StructuredValidator(None), {}, budget_bytes=200)
    released = feed_all(gate, [TextDelta('{"text": "' + "x" * 100), TextDelta("y" * 100 + '"}'),
                               Finished("stop", USAGE)])
    assert released[:2] == [[], []]
    [failure] = released[2]
    assert isinstance(failure.error, StructuredOutputError) and "200-byte" in failure.error.message
    assert failure.usage == USAGE


def test_closing_the_gated_iterator_closes_its_source():
    closed: list[str] = []

    async def source():
        try:
            for n in range(100):
                yield TextDelta(str(n))
                await asyncio.sleep(0)
        finally:
            closed.append("source closed")

    async def scenario():
        events = gated(source(), PublishGate(None, {}))
        first = await events.__anext__()
        await events.aclose()
        return first

    assert asyncio.run(scenario()) == TextDelta("0")
    assert closed == ["source closed"]


def test_closing_an_active_gate_closes_its_source():
    """The held stream's own close path: the reader takes what the gate released (an engine failure passes at
    once) and closes the stream while the source still has events; the source's `finally` (which stops the engine)
    runs then, not whenever the collector finds it."""
    closed: list[str] = []
    failure = Failed(EngineError("the engine broke"), USAGE)

    async def source():
        try:
            yield TextDelta('{"n"')
            yield failure
            yield TextDelta("never read")
        finally:
            closed.append("source closed")

    async def scenario():
        upstream = source()
        events = gated(upstream, PublishGate(StructuredValidator(None), {}))
        assert events is not upstream  # an active gate is a stage of its own
        first = await events.__anext__()
        await events.aclose()
        return first, list(closed)  # before asyncio.run's own clean-up closes any generator left open

    assert asyncio.run(scenario()) == (failure, ["source closed"])  # the held text was never released


def _conversation(*tools: ToolSpec, tool_choice="auto") -> Conversation:
    return Conversation.from_request((Message("user", (TextPart("hi"),)),), tools=tools, tool_choice=tool_choice,
                                     reasoning_effort=None, parallel_tool_calls=None)


def test_the_gate_built_from_a_conversation_checks_its_strict_tools_only():
    """Both APIs build the gate from the neutral conversation: `ToolSpec.strict` decides which calls are checked."""
    conversation = _conversation(ToolSpec("get_weather", parameters=CITY, strict=True), ToolSpec("loose", parameters=CITY))
    gate = publish_gate(conversation, TextFormat())
    assert gate.active
    [*_, [failure]] = feed_all(gate, [*call_events('{"town": "Paris"}'), Finished("tool_calls", USAGE)])
    assert isinstance(failure, Failed) and isinstance(failure.error, StructuredOutputError)
    loose = publish_gate(conversation, TextFormat())
    released = feed_all(loose, [*call_events('{"town": "Paris"}', name="loose"), Finished("tool_calls", USAGE)])
    assert not any(isinstance(event, Failed) for batch in released for event in batch)


def test_a_plain_text_conversation_without_strict_tools_gets_an_inactive_gate():
    assert not publish_gate(_conversation(ToolSpec("loose", parameters=CITY)), TextFormat()).active
    assert publish_gate(_conversation(), JsonObjectFormat(type="json_object")).active


def test_the_model_text_passes_a_holding_gate_at_once_and_takes_none_of_its_budget():
    gate = PublishGate(StructuredValidator(None), {}, budget_bytes=400)
    raw = RawOutput("x" * 1000, False)  # a background task's log keeps it with the first event released after it
    assert gate.feed(raw) == [raw]
    assert gate.feed(TextDelta('{"n": 1}')) == []
    assert gate.feed(Finished("stop", USAGE)) == [TextDelta('{"n": 1}'), Finished("stop", USAGE)]
