"""`ChatAssembler` fed neutral events directly: the stream's chunks and the non-streamed completion."""

from __future__ import annotations

from maya_server.chat.assembler import ChatAssembler
from maya_server.errors import EngineError
from maya_server.neutral.events import (
    Failed, Finished, PromptProgress, ReasoningDelta, TextDelta, ToolCallArgumentsDelta, ToolCallFinished, ToolCallStarted,
    Usage,
)
from maya_server.neutral.events import McpToolCall, McpToolResult

USAGE = Usage(prompt_tokens=11, cached_tokens=3, completion_tokens=5, reasoning_tokens=2)
USAGE_BODY = {"prompt_tokens": 11, "completion_tokens": 5, "total_tokens": 16,
              "prompt_tokens_details": {"cached_tokens": 3}, "completion_tokens_details": {"reasoning_tokens": 2}}


def deltas(chunks: list[dict]) -> list[dict]:
    return [chunk["choices"][0]["delta"] for chunk in chunks]


def stream(assembler: ChatAssembler, events: list) -> list[dict]:
    return [chunk for event in events for chunk in assembler.on_event(event)]


def call(index: int, call_id: str, name: str, pieces: list[str]) -> list:
    return ([ToolCallStarted(index, call_id, name)] + [ToolCallArgumentsDelta(index, p) for p in pieces]
            + [ToolCallFinished(index, "".join(pieces))])


def test_the_stream_opens_with_the_role_then_sends_content_and_reasoning_deltas():
    assembler = ChatAssembler("maya-test")
    opening = assembler.opening_chunk()
    chunks = stream(assembler, [ReasoningDelta("hmm"), TextDelta("Hel"), TextDelta(""), TextDelta("lo")])
    assert deltas([opening]) == [{"role": "assistant", "content": ""}]
    assert deltas(chunks) == [{"reasoning_content": "hmm"}, {"content": "Hel"}, {"content": "lo"}]
    for chunk in [opening, *chunks]:
        assert chunk["id"] == assembler.id and chunk["object"] == "chat.completion.chunk"
        assert chunk["model"] == "maya-test" and chunk["choices"][0]["finish_reason"] is None
        assert "usage" not in chunk


def test_tool_call_deltas_carry_index_id_name_then_argument_pieces():
    assembler = ChatAssembler("m")
    chunks = stream(assembler, call(0, "call_a", "get_weather", ['{"city": ', '"Paris"}']) + [Finished("tool_calls", USAGE)])
    tool_deltas = [d["tool_calls"] for d in deltas(chunks) if "tool_calls" in d]
    assert tool_deltas == [
        [{"index": 0, "id": "call_a", "type": "function", "function": {"name": "get_weather", "arguments": ""}}],
        [{"index": 0, "function": {"arguments": '{"city": '}}],
        [{"index": 0, "function": {"arguments": '"Paris"}'}}],
    ]
    assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls" and deltas(chunks)[-1] == {}


def test_the_finish_chunk_then_a_usage_chunk_when_include_usage():
    assembler = ChatAssembler("m", include_usage=True)
    chunks = stream(assembler, [TextDelta("hi"), Finished("stop", USAGE)])
    assert [c["usage"] for c in chunks[:-1]] == [None, None]
    assert chunks[1]["choices"][0]["finish_reason"] == "stop"
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"] == USAGE_BODY


def test_without_include_usage_the_finish_is_the_last_chunk():
    assembler = ChatAssembler("m")
    chunks = stream(assembler, [TextDelta("hi"), Finished("length", USAGE)])
    assert chunks[-1]["choices"][0]["finish_reason"] == "length" and "usage" not in chunks[-1]


def test_prompt_progress_and_mcp_events_ride_on_empty_delta_chunks():
    assembler = ChatAssembler("m", mcp=True)
    chunks = stream(assembler, [PromptProgress(total=10, cache=2, processed=10, time_ms=5),
                                McpToolCall(1, "call_m", "files", "read", '{"path": "a"}'),
                                McpToolResult(1, "call_m", "contents", False)])
    assert deltas(chunks) == [{}, {}, {}]
    assert chunks[0]["prompt_progress"] == {"total": 10, "cache": 2, "processed": 10, "time_ms": 5}
    assert chunks[1]["strata_mcp"]["type"] == "tool_call" and chunks[2]["strata_mcp"]["type"] == "tool_result"


def test_the_completion_joins_text_reasoning_and_calls_in_index_order():
    assembler = ChatAssembler("m", mcp=True)
    stream(assembler, [ReasoningDelta("let me "), ReasoningDelta("think"), TextDelta("Sure. ")]
           + call(1, "call_b", "get_time", ["{}"]) + call(0, "call_a", "get_weather", ['{"city":', ' "Rome"}'])
           + [McpToolCall(1, "call_m", "files", "read", "{}"), McpToolResult(1, "call_m", "ok", False),
              Finished("tool_calls", USAGE)])
    body = assembler.completion()
    assert body["id"] == assembler.id and body["object"] == "chat.completion" and body["model"] == "m"
    choice = body["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    message = choice["message"]
    assert message["content"] == "Sure. " and message["reasoning_content"] == "let me think"
    assert message["tool_calls"] == [
        {"id": "call_a", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Rome"}'}},
        {"id": "call_b", "type": "function", "function": {"name": "get_time", "arguments": "{}"}},
    ]
    assert body["usage"] == USAGE_BODY
    assert body["strata_mcp"]["calls"] == [{"id": "call_m", "round": 1, "server": "files", "name": "read",
                                            "arguments": "{}", "result": "ok", "is_error": False}]


def test_a_completion_with_only_calls_has_null_content_and_one_with_nothing_has_empty_content():
    calls_only = ChatAssembler("m")
    stream(calls_only, call(0, "call_a", "f", ["{}"]) + [Finished("tool_calls", USAGE)])
    assert calls_only.completion()["choices"][0]["message"]["content"] is None
    empty = ChatAssembler("m")
    stream(empty, [Finished("stop", USAGE)])
    message = empty.completion()["choices"][0]["message"]
    assert message == {"role": "assistant", "content": "", "refusal": None}
    assert "strata_mcp" not in empty.completion()


def test_a_finished_calls_arguments_are_the_whole_text_its_finish_carries():
    assembler = ChatAssembler("m")
    chunks = stream(assembler, [ToolCallStarted(0, "call_a", "f"), ToolCallArgumentsDelta(0, '{"a": 1'),
                                ToolCallFinished(0, '{"a": 1}'), Finished("tool_calls", USAGE)])
    assert len(chunks) == 3  # the finish itself sends no chunk
    [tool_call] = assembler.completion()["choices"][0]["message"]["tool_calls"]
    assert tool_call["function"]["arguments"] == '{"a": 1}'


def test_a_call_cut_off_by_the_output_limit_keeps_the_arguments_its_deltas_streamed():
    assembler = ChatAssembler("m")
    stream(assembler, [ToolCallStarted(0, "call_a", "f"), ToolCallArgumentsDelta(0, '{"ci'), Finished("length", USAGE)])
    [tool_call] = assembler.completion()["choices"][0]["message"]["tool_calls"]
    assert tool_call["function"]["arguments"] == '{"ci'


def test_a_failure_is_recorded_with_its_usage_and_sends_no_chunk():
    assembler = ChatAssembler("m", include_usage=True)
    failure = Failed(EngineError("the engine broke"), USAGE)
    assert stream(assembler, [TextDelta("partial"), failure])[1:] == []
    assert assembler.failure is failure and assembler.usage == USAGE and assembler.finish_reason is None
