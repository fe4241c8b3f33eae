"""The neutral conversation both APIs convert into: immutable values, text that leaves images out, and
the request rules both APIs share in `Conversation.from_request` (tool_choice "none" hides the tools,
parallel calls unless the request says false), plus the one walk that finds the images."""

from __future__ import annotations

import dataclasses

import pytest

from maya_server.neutral.conversation import (
    Conversation, ImagePart, Message, NamedToolChoice, TextPart, ToolCall, ToolResult, ToolSpec, image_parts,
)

WEATHER = ToolSpec("weather", "Forecast", {"type": "object", "properties": {}}, strict=True)
CLOCK = ToolSpec("clock")
CAT = ImagePart("https://example.invalid/cat.png", param="input[0].content[1]")
DOG = ImagePart("data:image/png;base64,AAAA")


def request(**overrides) -> Conversation:
    rules = {"tools": (WEATHER, CLOCK), "tool_choice": "auto", "reasoning_effort": None, "parallel_tool_calls": None}
    return Conversation.from_request((Message("user", (TextPart("hi"),)),), **{**rules, **overrides})


def test_every_value_is_frozen():
    message = Message("user", (TextPart("hi"),))
    for value, field in ((message, "role"), (TextPart("a"), "text"), (WEATHER, "name"), (request(), "tools")):
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(value, field, None)


def test_text_joins_text_parts_and_leaves_images_out():
    message = Message("user", (TextPart("Look: "), CAT, TextPart("ünï ✓")))
    assert message.text == "Look: ünï ✓"
    assert ToolResult("call_1", (DOG, TextPart("42"), TextPart("!"))).text == "42!"
    assert Message("assistant", tool_calls=(ToolCall("c", "clock", "{}"),)).text == ""


def test_images_compare_by_url_only():
    assert ImagePart("u", param="a", data=b"png") == ImagePart("u", param="b")
    assert "png" not in repr(ImagePart("u", data=b"png"))  # loaded bytes never end up in a log line


def test_tool_choice_none_hides_the_tools_but_is_kept():
    hidden = request(tool_choice="none")
    assert hidden.tools == () and hidden.tool_choice == "none" and hidden.tool("weather") is None
    assert request(tool_choice="required").tools == (WEATHER, CLOCK)
    named = request(tool_choice=NamedToolChoice("clock"))
    assert named.tools == (WEATHER, CLOCK) and named.tool_choice == NamedToolChoice("clock")


@pytest.mark.parametrize("sent, allowed", [(None, True), (True, True), (False, False)])
def test_parallel_calls_are_allowed_unless_the_request_says_false(sent, allowed):
    assert request(parallel_tool_calls=sent).parallel_tool_calls is allowed


def test_from_request_keeps_effort_and_extra_system_text():
    conversation = request(reasoning_effort="high", extra_system=("Respond in JSON.",))
    assert conversation.reasoning_effort == "high" and conversation.extra_system == ("Respond in JSON.",)
    assert request().extra_system == ()


def test_tool_finds_a_declared_tool_by_name():
    conversation = request()
    assert conversation.tool("weather") is WEATHER and conversation.tool("clock") is CLOCK
    assert conversation.tool("Weather") is None


def test_image_parts_lists_every_image_in_prompt_order():
    turns = (
        Message("system", (TextPart("s"),)),
        Message("user", (TextPart("a"), CAT)),
        ToolResult("call_1", (DOG,)),
        Message("user", (CAT, TextPart("again"))),
    )
    assert image_parts(Conversation(turns)) == [CAT, DOG, CAT]
    assert image_parts(request()) == []
