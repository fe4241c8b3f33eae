"""`ResponseAssembler` fed neutral events directly: the Responses stream events and the response object.

The assembler alone turns pipeline events into what a Responses client sees, numbers every event
and keeps the object that the stream's terminal event, the JSON answer and the store all show.
Each stream here is also checked as a client would check it (every event a valid SDK event, the
stream's invariants: sequence numbers 0..n-1, one terminal event, items added → done, joined
deltas equal to their done text, the last item events equal to the final output).
"""

from __future__ import annotations

import asyncio

import pytest

from maya_server.errors import EngineError, MayaError, ServiceUnavailableError
from maya_server.neutral.events import (
    Failed, Finished, PromptProgress, ReasoningDelta, ReasoningFinished, TextDelta, ToolCallArgumentsDelta,
    ToolCallFinished, ToolCallInvalid, ToolCallStarted, Usage,
)
from maya_server.responses.assembly.assembler import ResponseAssembler
from maya_server.responses.request.request import parse_responses_request

from tests.responses.api.shapes import CALL, FAILED, MESSAGE, OPENING, REASONING
from tests.responses.api.sse import StreamResult, check_stream, validate_event

USAGE = Usage(prompt_tokens=11, cached_tokens=3, completion_tokens=5, reasoning_tokens=2)
USAGE_BODY = {"input_tokens": 11, "input_tokens_details": {"cached_tokens": 3, "cache_write_tokens": 0},
              "output_tokens": 5, "output_tokens_details": {"reasoning_tokens": 2}, "total_tokens": 16}


def assembler(**fields) -> ResponseAssembler:
    return ResponseAssembler(parse_responses_request({"model": "m", "input": "hi", **fields}), model="maya-test")


def feed(assembler: ResponseAssembler, events: list) -> list[dict]:
    """Each event through `deliver`, as the consumers feed it: the save's coroutine awaited where there is one."""
    out = []
    for event in events:
        delivered = assembler.deliver(event)
        out += delivered if isinstance(delivered, list) else asyncio.run(delivered)
    return out


def stream(assembler: ResponseAssembler, events: list) -> StreamResult:
    """The whole stream a client reads (opening, then the events' output), checked as a client would."""
    raw = assembler.opening() + feed(assembler, events)
    result = StreamResult([validate_event(r) for r in raw], raw)
    check_stream(result)
    return result


def call(index: int, call_id: str, name: str, pieces: list[str]) -> list:
    return ([ToolCallStarted(index, call_id, name)] + [ToolCallArgumentsDelta(index, p) for p in pieces]
            + [ToolCallFinished(index, "".join(pieces))])


def test_reasoning_then_text_become_two_items_each_opened_streamed_and_closed():
    a = assembler()
    result = stream(a, [ReasoningDelta("let me "), ReasoningDelta("think"), ReasoningFinished(),
                        TextDelta("Hel"), TextDelta("lo"), Finished("stop", USAGE)])
    assert result.shape() == OPENING + REASONING + MESSAGE + ["response.completed"]
    assert [e.delta for e in result.of("response.reasoning_text.delta")] == ["let me ", "think"]
    assert [e.delta for e in result.of("response.output_text.delta")] == ["Hel", "lo"]
    final = result.raw[-1]["response"]
    reasoning, message = final["output"]
    assert reasoning["type"] == "reasoning" and reasoning["status"] == "completed"
    assert reasoning["content"] == [{"type": "reasoning_text", "text": "let me think"}]
    assert message["type"] == "message" and message["status"] == "completed"
    assert [part["text"] for part in message["content"]] == ["Hello"]
    assert final["status"] == "completed" and final["usage"] == USAGE_BODY and final["incomplete_details"] is None
    assert final == a.snapshot()  # the stream's terminal object and the JSON answer are one object
    assert final["id"] == a.id and final["model"] == "maya-test" and isinstance(final["completed_at"], int)


def test_text_after_reasoning_closes_the_reasoning_even_without_its_end_marker():
    result = stream(assembler(), [ReasoningDelta("hmm"), TextDelta("Yes."), Finished("stop", USAGE)])
    assert result.shape() == OPENING + REASONING + MESSAGE + ["response.completed"]
    assert [item.status for item in result.final.output] == ["completed", "completed"]


def test_reasoning_the_model_closed_stays_complete_when_the_output_limit_follows_at_once():
    """The reasoning item closes at the model's end marker, not at the turn's end: a limit that cuts the
    turn right after it leaves the response incomplete but the reasoning whole."""
    result = stream(assembler(), [ReasoningDelta("all my thoughts"), ReasoningFinished(), Finished("length", USAGE)])
    assert result.shape() == OPENING + REASONING + ["response.incomplete"]
    [reasoning] = result.raw[-1]["response"]["output"]
    assert reasoning["status"] == "completed"
    assert result.index("response.output_item.done") < result.index("response.incomplete")


def test_function_calls_follow_the_text_as_their_own_items_with_arguments_streamed_then_done():
    result = stream(assembler(), [TextDelta("Checking.")] + call(0, "call_a", "get_weather", ['{"city": ', '"Paris"}'])
                    + call(1, "call_b", "get_time", ["{}"]) + [Finished("tool_calls", USAGE)])
    assert result.shape() == OPENING + MESSAGE + CALL + CALL + ["response.completed"]
    message, weather, clock = result.raw[-1]["response"]["output"]
    assert message["status"] == "completed"  # closed when the first call began, before its item was added
    assert {k: weather[k] for k in ("type", "call_id", "name", "arguments", "status")} == {
        "type": "function_call", "call_id": "call_a", "name": "get_weather", "arguments": '{"city": "Paris"}',
        "status": "completed"}
    assert (clock["call_id"], clock["name"], clock["arguments"]) == ("call_b", "get_time", "{}")
    assert [e.output_index for e in result.of("response.function_call_arguments.delta")] == [1, 1, 2]
    assert [e.delta for e in result.of("response.function_call_arguments.delta")] == ['{"city": ', '"Paris"}', "{}"]
    assert result.final.status == "completed"  # a turn that ends in calls is a completed response


def test_the_finished_calls_arguments_are_the_whole_text_it_carries():
    """The parser's deltas may stop short of the closing brace it adds; the finish carries the whole object."""
    a = assembler()
    a.opening()
    events = feed(a, [ToolCallStarted(0, "call_a", "f"), ToolCallArgumentsDelta(0, '{"a": 1'),
                      ToolCallFinished(0, '{"a": 1}'), Finished("tool_calls", USAGE)])
    done = next(e for e in events if e["type"] == "response.function_call_arguments.done")
    assert done["arguments"] == '{"a": 1}' and a.snapshot()["output"][0]["arguments"] == '{"a": 1}'


def test_the_output_limit_leaves_the_open_message_incomplete_and_the_response_incomplete():
    result = stream(assembler(), [TextDelta("one two"), Finished("length", USAGE)])
    assert result.shape() == OPENING + MESSAGE + ["response.incomplete"]
    final = result.raw[-1]["response"]
    assert final["status"] == "incomplete" and final["incomplete_details"] == {"reason": "max_output_tokens"}
    assert final["output"][0]["status"] == "incomplete" and final["output"][0]["content"][0]["text"] == "one two"
    assert final["usage"] == USAGE_BODY


def test_a_call_cut_off_by_the_output_limit_is_closed_incomplete_without_arguments_done():
    result = stream(assembler(), [ToolCallStarted(0, "call_a", "f"), ToolCallArgumentsDelta(0, '{"ci'),
                                  ToolCallInvalid(0, "truncated", "the output limit ended the call"),
                                  Finished("length", USAGE)])
    assert result.shape() == OPENING + ["response.output_item.added", "response.function_call_arguments.delta*",
                                        "response.output_item.done", "response.incomplete"]
    [item] = result.raw[-1]["response"]["output"]
    assert item["status"] == "incomplete" and item["arguments"] == '{"ci'


def test_a_failure_closes_what_is_open_then_sends_error_and_failed_with_the_usage():
    result = stream(assembler(), [TextDelta("partial"), ToolCallStarted(0, "call_a", "f"),
                                  ToolCallArgumentsDelta(0, "{"), Failed(EngineError("the engine broke"), USAGE)])
    cut_call = ["response.output_item.added", "response.function_call_arguments.delta*", "response.output_item.done"]
    assert result.shape() == OPENING + MESSAGE + cut_call + FAILED
    error = result.raw[-2]
    assert (error["code"], error["message"], error["param"]) == ("engine_error", "the engine broke", None)
    final = result.raw[-1]["response"]
    assert final["status"] == "failed" and final["usage"] == USAGE_BODY and final["completed_at"] is None
    assert final["error"] == {"code": "server_error", "message": "the engine broke"}  # OpenAI's enum in the object
    assert [item["status"] for item in final["output"]] == ["completed", "incomplete"]


def test_a_failure_that_saving_raises_replaces_the_completion():
    """`on_finish` (the store) sees the finished snapshot first; if it fails, the response fails instead."""
    seen = []

    async def refuse(snapshot: dict) -> None:
        seen.append(snapshot["status"])
        raise MayaError("the store is full", code="store_full")

    a = ResponseAssembler(parse_responses_request({"model": "m", "input": "hi"}), model="m", on_finish=refuse)
    result = stream(a, [TextDelta("hi"), Finished("stop", USAGE)])
    assert seen == ["completed"]
    assert result.shape() == OPENING + MESSAGE + FAILED
    assert result.raw[-2]["code"] == "store_full" and result.final.status == "failed"
    assert result.final.output[0].status == "completed"  # the message itself was whole


def test_events_with_nothing_to_show_take_no_sequence_number():
    a = assembler()
    opening = a.opening()
    assert a.on_event(PromptProgress(total=10, cache=0, processed=10, time_ms=3)) == []
    assert a.on_event(ReasoningFinished()) == []  # no reasoning is open
    [first, *_] = a.on_event(TextDelta("x"))
    assert [e["sequence_number"] for e in opening] == [0, 1] and first["sequence_number"] == 2


def test_a_background_response_numbers_its_queue_events_and_a_readers_reserved_one_in_one_sequence():
    a = assembler(background=True, store=True)
    queued = a.queued()
    assert [(e["type"], e["response"]["status"]) for e in queued] == [
        ("response.created", "queued"), ("response.queued", "queued")]
    reserved = a.reserve_sequence()
    started = a.started()
    rest = feed(a, [TextDelta("hi"), Finished("stop", USAGE)])
    numbers = [e["sequence_number"] for e in queued] + [reserved] + [e["sequence_number"] for e in started + rest]
    assert numbers == list(range(len(numbers)))
    assert started[0]["type"] == "response.in_progress" and started[0]["response"]["status"] == "in_progress"
    assert rest[-1]["response"]["background"] is True and rest[-1]["response"]["store"] is True


def test_a_cancelled_response_closes_the_open_text_and_a_started_call_incomplete_then_sends_an_error():
    a = assembler(background=True, store=True)
    a.queued(), a.started()
    feed(a, [TextDelta("half an ans")])
    events = a.cancelled()
    assert [e["type"] for e in events] == ["response.output_text.done", "response.content_part.done",
                                           "response.output_item.done", "error"]
    assert events[-1]["code"] == "response_cancelled"
    snapshot = a.snapshot()
    assert snapshot["status"] == "cancelled" and a.finished
    [message] = snapshot["output"]
    assert message["status"] == "incomplete" and message["content"][0]["text"] == "half an ans"

    calling = assembler(background=True, store=True)
    calling.queued(), calling.started()
    feed(calling, [TextDelta("Checking."), ToolCallStarted(0, "call_a", "f"), ToolCallArgumentsDelta(0, '{"ci')])
    events = calling.cancelled()
    assert [e["type"] for e in events] == ["response.output_item.done", "error"]
    assert [item["status"] for item in calling.snapshot()["output"]] == ["completed", "incomplete"]
    for event in events:
        validate_event(event)


def test_an_interrupted_stream_ends_with_the_errors_code_and_a_finished_one_is_left_alone():
    a = assembler()
    a.opening()
    feed(a, [TextDelta("so far")])
    gone = ServiceUnavailableError("shutting down", code="server_shutting_down")
    events = a.interrupted(gone)
    assert [e["type"] for e in events][-1] == "error" and events[-1]["code"] == "server_shutting_down"
    assert a.snapshot()["status"] == "failed" and a.snapshot()["output"][0]["status"] == "incomplete"

    done = assembler()
    done.opening()
    feed(done, [TextDelta("all"), Finished("stop", USAGE)])
    assert done.interrupted(gone) == [] and done.snapshot()["status"] == "completed"


@pytest.mark.parametrize("reason", ["stop", "length", "tool_calls"])
def test_usage_of_an_empty_turn_is_still_reported(reason):
    result = stream(assembler(), [Finished(reason, USAGE)])
    assert result.final.output == [] and result.raw[-1]["response"]["usage"] == USAGE_BODY
