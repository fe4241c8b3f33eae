"""`GenerationService` on its own: a scripted engine, a real queue and metrics, no HTTP.

Each test runs one turn through `prepare`, `admit` and `run` and asserts on the events the
pipeline yields: the parser's events, then exactly one `Finished` or `Failed`.
"""

from __future__ import annotations

import asyncio

import pytest

from maya_server.neutral.conversation import Conversation, Message, NamedToolChoice, TextPart, ToolSpec
from maya_server.families import get_family
from maya_server.engine.base import Counts
from maya_server.engine.fifo import EngineQueue
from maya_server.errors import ContextLengthExceeded, EngineError, ToolPolicyError
from maya_server.neutral.events import (
    Failed, Finished, PromptProgress, TextDelta, ToolCallArgumentsDelta, ToolCallFinished, ToolCallStarted,
)
from maya_server.pipeline.generation import GenerationService, GenerationSettings
from maya_server.metrics import Metrics

from tests.scripted import RecordingScriptedEngine

WEATHER = ToolSpec("get_weather", parameters={"type": "object", "properties": {"city": {"type": "string"}}})


def call(name: str, city: str = "Paris") -> str:
    return f'<tool_call>\n{{"name": "{name}", "arguments": {{"city": "{city}"}}}}\n</tool_call>'


def make_service(script, *, context_size: int = 4096, delay: float = 0.0) -> GenerationService:
    engine = RecordingScriptedEngine(list(script), context_size=context_size, delay=delay)
    return GenerationService(engine, get_family("chatml"), EngineQueue(slots=1, max_queue=4), Metrics())


def conversation(*, tools=(), tool_choice="auto", parallel_tool_calls=None) -> Conversation:
    return Conversation.from_request((Message("user", (TextPart("What is the weather?"),)),), tools=tuple(tools),
                                     tool_choice=tool_choice, reasoning_effort=None,
                                     parallel_tool_calls=parallel_tool_calls)


async def collect(service: GenerationService, convo: Conversation, settings=GenerationSettings()) -> list:
    prepared = service.prepare(convo, settings)
    return [event async for event in service.run(prepared, service.admit())]


def run_turn(script, convo=None, settings=GenerationSettings(), **service_options) -> tuple[list, GenerationService]:
    service = make_service(script, **service_options)
    events = asyncio.run(collect(service, convo or conversation(), settings))
    return events, service


def text_of(events: list) -> str:
    return "".join(e.text for e in events if isinstance(e, TextDelta))


def test_a_text_turn_yields_the_parsers_events_then_one_stop_with_usage():
    events, service = run_turn(["Hello there, friend."])
    assert text_of(events) == "Hello there, friend."
    assert all(isinstance(e, TextDelta) for e in events[:-1])
    finished = events[-1]
    assert isinstance(finished, Finished) and finished.reason == "stop"
    assert finished.usage.prompt_tokens == len(service.engine.prompts[-1]) > 0
    assert finished.usage.completion_tokens == len(service.engine.tokenizer.encode("Hello there, friend.", special=True))
    assert finished.usage.total_tokens == finished.usage.prompt_tokens + finished.usage.completion_tokens
    assert sum(isinstance(e, (Finished, Failed)) for e in events) == 1
    assert service.queue.busy == 0


def test_max_tokens_ends_the_turn_with_length():
    events, _ = run_turn(["one two three four five six"], settings=GenerationSettings(max_tokens=2))
    assert text_of(events) == "one two"
    assert isinstance(events[-1], Finished) and events[-1].reason == "length"
    assert events[-1].usage.completion_tokens == 2


def test_a_stop_string_ends_the_turn_and_is_never_published():
    events, service = run_turn(["Hello there STOP and more after"], settings=GenerationSettings(stop=("STOP",)))
    assert text_of(events) == "Hello there"  # the space before the stop string is trailing whitespace the parser trims
    assert isinstance(events[-1], Finished) and events[-1].reason == "stop"
    assert service.engine.cancelled == 1  # the pipeline ended the engine's stream early


def test_a_stop_string_split_over_tokens_is_held_back_then_dropped():
    # the scripted tokenizer splits this into "abcdefgS" and "TOPxyz": the stop string spans two tokens
    events, _ = run_turn(["abcdefgSTOPxyz"], settings=GenerationSettings(stop=("STOP",)))
    assert text_of(events) == "abcdefg"
    assert isinstance(events[-1], Finished) and events[-1].reason == "stop"


def test_the_context_check_refuses_before_any_engine_call():
    service = make_service(["never generated"], context_size=32)
    with pytest.raises(ContextLengthExceeded) as refused:
        service.prepare(conversation(), GenerationSettings(max_tokens=1000))
    assert refused.value.param == "messages" and refused.value.status == 400
    assert service.engine.calls == 0 and service.queue.busy == 0


def test_a_prompt_that_fills_the_context_alone_is_refused():
    service = make_service(["never generated"], context_size=4)
    with pytest.raises(ContextLengthExceeded, match="the messages alone"):
        service.prepare(conversation(), GenerationSettings(), context_param="input")
    assert service.engine.calls == 0


def test_a_declared_call_finishes_with_tool_calls():
    events, _ = run_turn([call("get_weather")], conversation(tools=[WEATHER]))
    started = [e for e in events if isinstance(e, ToolCallStarted)]
    finished = [e for e in events if isinstance(e, ToolCallFinished)]
    assert [e.name for e in started] == ["get_weather"]
    assert [e.arguments for e in finished] == ['{"city": "Paris"}']
    assert "".join(e.text for e in events if isinstance(e, ToolCallArgumentsDelta)) == finished[0].arguments
    assert isinstance(events[-1], Finished) and events[-1].reason == "tool_calls"


def test_a_call_to_an_undeclared_function_fails_the_turn():
    events, service = run_turn([call("launch_rockets")], conversation(tools=[WEATHER]))
    failed = events[-1]
    assert isinstance(failed, Failed) and isinstance(failed.error, ToolPolicyError)
    assert "launch_rockets" in failed.error.message and failed.error.code == "invalid_tool_call"
    assert not any(isinstance(e, ToolCallStarted) for e in events)  # the forbidden call is never published
    assert failed.usage.prompt_tokens > 0
    assert service.queue.busy == 0


def test_a_call_other_than_the_named_choice_fails_the_turn():
    other = ToolSpec("get_time")
    events, _ = run_turn([call("get_weather")], conversation(tools=[WEATHER, other],
                                                              tool_choice=NamedToolChoice("get_time")))
    assert isinstance(events[-1], Failed) and "names 'get_time'" in events[-1].error.message


def test_parallel_tool_calls_false_ends_at_the_first_complete_call():
    script = call("get_weather", "Paris") + "\n" + call("get_weather", "Rome")
    events, _ = run_turn([script], conversation(tools=[WEATHER], parallel_tool_calls=False))
    assert [e.arguments for e in events if isinstance(e, ToolCallFinished)] == ['{"city": "Paris"}']
    assert sum(isinstance(e, ToolCallStarted) for e in events) == 1
    assert isinstance(events[-1], Finished) and events[-1].reason == "tool_calls"


def test_parallel_calls_are_all_published_by_default():
    script = call("get_weather", "Paris") + "\n" + call("get_weather", "Rome")
    events, _ = run_turn([script], conversation(tools=[WEATHER]))
    assert [e.index for e in events if isinstance(e, ToolCallFinished)] == [0, 1]


def test_a_required_call_that_never_comes_fails_the_turn():
    events, _ = run_turn(["Just some text."], conversation(tools=[WEATHER], tool_choice="required"))
    assert text_of(events) == "Just some text."
    failed = events[-1]
    assert isinstance(failed, Failed) and isinstance(failed.error, ToolPolicyError)
    assert "required tool call" in failed.error.message


def test_max_tool_calls_drops_a_call_past_the_limit():
    script = call("get_weather", "Paris") + "\n" + call("get_weather", "Rome") + "\ntrailing text"
    events, _ = run_turn([script], conversation(tools=[WEATHER]), GenerationSettings(max_tool_calls=1))
    assert [e.arguments for e in events if isinstance(e, ToolCallFinished)] == ['{"city": "Paris"}']
    assert sum(isinstance(e, ToolCallStarted) for e in events) == 1
    assert "trailing" not in text_of(events)
    assert isinstance(events[-1], Finished) and events[-1].reason == "tool_calls"


def test_report_progress_synthesizes_a_start_and_an_end_for_a_silent_engine():
    events, service = run_turn(["Hi there."], settings=GenerationSettings(report_progress=True))
    progress = [e for e in events if isinstance(e, PromptProgress)]
    total = len(service.engine.prompts[-1])
    assert events[0] == progress[0] and progress[0].processed == 0 and progress[0].total == total
    assert len(progress) == 2 and progress[1].processed == progress[1].total == total
    assert events.index(progress[1]) < events.index(next(e for e in events if isinstance(e, TextDelta)))
    assert isinstance(events[-1], Finished)


def test_without_report_progress_no_progress_is_yielded():
    events, _ = run_turn(["Hi there."])
    assert not any(isinstance(e, PromptProgress) for e in events)


def test_leaving_early_cancels_the_engine_and_releases_the_admission():
    async def scenario():
        service = make_service(["a b c d e f g h i j k l m n o p"], delay=0.01)
        prepared = service.prepare(conversation(), GenerationSettings())
        events = service.run(prepared, service.admit())
        first = await events.__anext__()
        busy_while_running = service.queue.busy
        await events.aclose()  # closes the engine's stream before it returns: no wait for the collector
        return service, first, busy_while_running

    service, first, busy_while_running = asyncio.run(scenario())
    assert isinstance(first, TextDelta)
    assert busy_while_running == 1 and service.queue.busy == 0
    assert service.engine.cancelled == 1
    assert service.metrics.generations.labels("cancelled")._value.get() == 1


def test_an_admission_still_waiting_is_given_up_when_the_reader_leaves():
    async def scenario():
        service = make_service(["a b c d e f"], delay=0.01)
        prepared = service.prepare(conversation(), GenerationSettings())
        holder = service.admit()
        events = service.run(prepared, service.admit())
        pending = asyncio.ensure_future(events.__anext__())
        await asyncio.sleep(0.01)
        waiting = service.queue.waiting
        pending.cancel()
        await asyncio.gather(pending, return_exceptions=True)
        await events.aclose()
        holder.release()
        return service, waiting

    service, waiting = asyncio.run(scenario())
    assert waiting == 1 and service.queue.waiting == 0 and service.queue.busy == 0
    assert service.engine.calls == 0


def test_an_engine_failure_becomes_failed_with_engine_error():
    events, service = run_turn([{"text": "one two three four", "fail_after": 2}])
    assert text_of(events) == "one two"
    failed = events[-1]
    assert isinstance(failed, Failed) and isinstance(failed.error, EngineError)
    assert failed.usage.completion_tokens == 2
    assert sum(isinstance(e, (Finished, Failed)) for e in events) == 1
    assert service.queue.busy == 0


class _BatchingEngine(RecordingScriptedEngine):
    """An upstream-like engine: its own count runs ahead of the tokens it yields (a chunk of several ids)."""

    async def _stream(self, generation):
        async for item in super()._stream(generation):
            if not isinstance(item, Counts):
                yield Counts(generated_tokens=3)
            yield item


def first_token_observations(service: GenerationService) -> float:
    return next(s.value for m in service.metrics.registry.collect() for s in m.samples
                if s.name.endswith("first_token_seconds_count"))


def test_the_first_token_time_is_observed_once_a_turn_even_when_the_engines_count_runs_ahead():
    _, plain = run_turn(["Hello there, friend."])
    batching = GenerationService(_BatchingEngine(["Hello there, friend."]), get_family("chatml"),
                                 EngineQueue(slots=1, max_queue=4), Metrics())
    asyncio.run(collect(batching, conversation()))
    assert first_token_observations(plain) == 1
    assert first_token_observations(batching) == 1
