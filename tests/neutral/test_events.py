"""The neutral generation events every engine, parser, pipeline and assembler share: they are frozen values
compared by content, usage totals prompt plus completion (cached and reasoning tokens are parts, not extra),
prompt progress renders llama.cpp's `prompt_progress` body, the unions hold exactly the documented members,
and the module imports nothing of Maya but the error classes (so everything can depend on it)."""

from __future__ import annotations

import ast
import dataclasses
import inspect
import typing

import pytest

from maya_server.errors import EngineError
from maya_server.neutral import events
from maya_server.neutral.events import (
    Failed, Finished, LoopEvent, McpRoundLimitReached, McpToolCall, McpToolResult, ParserEvent, PipelineEvent,
    PromptProgress, RawOutput, ReasoningDelta, ReasoningFinished, TextDelta, ToolCallArgumentsDelta, ToolCallFinished,
    ToolCallInvalid, ToolCallStarted, Usage,
)

PARSER = {TextDelta, ReasoningDelta, ReasoningFinished, ToolCallStarted, ToolCallArgumentsDelta, ToolCallFinished,
          ToolCallInvalid}


def test_usage_totals_prompt_and_completion_only():
    usage = Usage(prompt_tokens=10, cached_tokens=4, completion_tokens=7, reasoning_tokens=3)
    assert usage.total_tokens == 17


def test_prompt_progress_body_is_llama_cpps_shape():
    assert PromptProgress(total=12, cache=4, processed=8, time_ms=3).body() == {
        "total": 12, "cache": 4, "processed": 8, "time_ms": 3}


@pytest.mark.parametrize("event", [
    TextDelta("x"), ToolCallStarted(0, "c", "f"), Finished("stop", Usage(1, 0, 1, 0)),
    Failed(EngineError("boom"), Usage(1, 0, 0, 0)), McpToolCall(1, "c", "s", "f", "{}"),
])
def test_events_are_frozen_values(event):
    field = dataclasses.fields(event)[0].name
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(event, field, None)
    assert event == dataclasses.replace(event)


def test_events_compare_by_content():
    assert ToolCallInvalid(None, "malformed", "d") == ToolCallInvalid(None, "malformed", "d")
    assert TextDelta("a") != ReasoningDelta("a")
    assert ReasoningFinished() == ReasoningFinished()


def test_the_unions_hold_exactly_the_documented_members():
    assert set(typing.get_args(ParserEvent)) == PARSER
    assert set(typing.get_args(PipelineEvent)) == PARSER | {PromptProgress, RawOutput, Finished, Failed}
    assert set(typing.get_args(LoopEvent)) == set(typing.get_args(PipelineEvent)) | {
        McpToolCall, McpToolResult, McpRoundLimitReached}


def test_the_module_imports_only_the_error_classes_of_maya():
    tree = ast.parse(inspect.getsource(events))
    relative = [node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.level]
    absolute = [node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and not node.level]
    assert relative == ["errors"]
    assert not [module for module in absolute if module.startswith("maya_server")]
