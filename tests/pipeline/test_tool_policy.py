"""`ToolPolicy` on its own: parser events checked against the request's tools, choice and call limit."""

from __future__ import annotations

from maya_server.neutral.conversation import Conversation, Message, NamedToolChoice, TextPart, ToolSpec
from maya_server.errors import ToolPolicyError
from maya_server.neutral.events import TextDelta, ToolCallFinished, ToolCallInvalid, ToolCallStarted
from maya_server.pipeline.tool_policy import ToolPolicy

TOOLS = (ToolSpec("get_weather"), ToolSpec("get_time"))


def policy(*, tool_choice="auto", parallel_tool_calls=None, max_calls=None, tools=TOOLS) -> ToolPolicy:
    conversation = Conversation.from_request((Message("user", (TextPart("hi"),)),), tools=tools,
                                             tool_choice=tool_choice, reasoning_effort=None,
                                             parallel_tool_calls=parallel_tool_calls)
    return ToolPolicy(conversation, max_calls)


def complete_call(p: ToolPolicy, index: int, name: str = "get_weather"):
    return p.check(ToolCallStarted(index, f"call_{index}", name)), p.check(ToolCallFinished(index, "{}"))


def test_text_and_declared_calls_pass():
    p = policy()
    assert p.check(TextDelta("hi")) is None
    assert complete_call(p, 0) == (None, None) and complete_call(p, 1, "get_time") == (None, None)
    assert p.calls_finished == 2 and not p.done and not p.requires_call


def test_an_undeclared_call_is_refused():
    error = policy().check(ToolCallStarted(0, "call_0", "launch_rockets"))
    assert isinstance(error, ToolPolicyError) and "undeclared function 'launch_rockets'" in error.message


def test_tool_choice_none_refuses_any_call():
    error = policy(tool_choice="none").check(ToolCallStarted(0, "call_0", "get_weather"))
    assert isinstance(error, ToolPolicyError) and "tool_choice is none" in error.message


def test_a_named_choice_refuses_other_functions_and_requires_a_call():
    p = policy(tool_choice=NamedToolChoice("get_time"))
    assert p.requires_call
    assert "names 'get_time'" in p.check(ToolCallStarted(0, "call_0", "get_weather")).message
    assert p.check(ToolCallStarted(1, "call_1", "get_time")) is None


def test_unreadable_call_syntax_is_refused_but_a_truncated_call_is_not():
    p = policy()
    assert isinstance(p.check(ToolCallInvalid(0, "malformed", "bad JSON")), ToolPolicyError)
    assert isinstance(p.check(ToolCallInvalid(None, "unterminated", "no end tag")), ToolPolicyError)
    assert p.check(ToolCallInvalid(0, "truncated", "the output limit")) is None


def test_parallel_calls_off_ends_the_turn_at_the_first_complete_call():
    p = policy(parallel_tool_calls=False)
    assert p.check(ToolCallStarted(0, "call_0", "get_weather")) is None and not p.done
    p.check(ToolCallFinished(0, "{}"))
    assert p.done and not p.over_limit


def test_the_call_limit_ends_the_turn_and_marks_a_call_begun_past_it():
    p = policy(max_calls=1)
    complete_call(p, 0)
    assert p.done and not p.over_limit
    p = policy(max_calls=0)
    assert p.check(ToolCallStarted(0, "call_0", "get_weather")) is None
    assert p.done and p.over_limit and p.calls_finished == 0
