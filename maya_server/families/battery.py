"""The fixed conversations a family renderer is checked with against a model's own chat template.

Each one exercises something a template release has changed before, or could: the
system turn, a developer message, tool declarations (one of them `strict`), a call
and its result, parallel results answered out of order (GLM-5.3 sorts them; two
turns of two calls, one run reversed), reasoning in earlier turns (replayed or
not), a message of several content parts, an image, and every reasoning effort.
`template_messages` turns a conversation into the OpenAI-style message dicts a
Jinja chat template reads, as transformers and vLLM hand them over (tool-call
arguments parsed into objects, reasoning as `reasoning_content`, a message of
one text part as a string, else its parts as a list, a tool's `strict` kept).
An image is a media segment in Maya's prompt: the check compares it as the
family's image token (`conformance`).
"""

from __future__ import annotations

import json

from ..neutral.conversation import Conversation, ImagePart, Message, TextPart, ToolCall, ToolResult, ToolSpec
from .history import call_arguments

WEATHER = ToolSpec(
    name="get_weather",
    description="Current weather for a city.",
    parameters={
        "type": "object",
        "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
        "required": ["city"],
    },
)
CLOCK = ToolSpec(name="now", description="The current time.", parameters={"type": "object", "properties": {}})
TOOLS = (WEATHER, CLOCK)
STRICT = ToolSpec(name="add", description="The sum of two numbers.", strict=True, parameters={
    "type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}, "required": ["a", "b"],
    "additionalProperties": False,
})
PIXEL = ("data:image/png;base64,"
         "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGP4z8DwHwAFAAH/iZk9HQAAAABJRU5ErkJggg==")
"""A 1×1 PNG: the image's bytes never reach a template, only its place."""


def _user(text: str) -> Message:
    return Message("user", (TextPart(text),))


def _assistant(text: str = "", reasoning: str | None = None, calls: tuple[ToolCall, ...] = ()) -> Message:
    return Message("assistant", (TextPart(text),) if text else (), reasoning, calls)


def _result(call_id: str, text: str) -> ToolResult:
    return ToolResult(call_id, (TextPart(text),))


_PARIS = ToolCall("call_1", "get_weather", json.dumps({"city": "Paris", "days": 2}))
_ROME = ToolCall("call_2", "get_weather", json.dumps({"city": "Rome"}))
_NOW = ToolCall("call_3", "now", "{}")
_BERLIN = ToolCall("call_4", "get_weather", json.dumps({"city": "Berlin"}))

_HISTORY = (
    _user("What is 2+2?"),
    _assistant("4", reasoning="Simple arithmetic."),
    _user("And times 3?"),
)

BATTERY: dict[str, Conversation] = {
    "system": Conversation((Message("system", (TextPart("You are terse."),)), _user("Hi there"))),
    "tools": Conversation((Message("system", (TextPart("Use tools."),)), _user("Weather in Paris?")), tools=TOOLS),
    "tool_call_and_result": Conversation((
        _user("Weather in Paris?"),
        _assistant("Checking.", reasoning="Call the tool.", calls=(_PARIS,)),
        _result("call_1", "Sunny"),
    ), tools=TOOLS),
    "results_out_of_order": Conversation((
        _user("Paris, Rome and the time?"),
        _assistant("", reasoning="Three calls.", calls=(_PARIS, _ROME, _NOW)),
        _result("call_3", "12:00"),
        _result("call_1", "Sunny"),
        _result("call_2", "Rain"),
    ), tools=TOOLS),
    "two_calls_twice": Conversation((
        _user("Paris and Rome, then Berlin and the time?"),
        _assistant("", reasoning="Two calls.", calls=(_PARIS, _ROME)),
        _result("call_2", "Rain"),
        _result("call_1", "Sunny"),
        _assistant("", reasoning="Two more.", calls=(_BERLIN, _NOW)),
        _result("call_4", "Cloudy"),
        _result("call_3", "12:00"),
    ), tools=TOOLS),
    "strict_tool": Conversation((_user("What is 2+3?"),), tools=(STRICT, CLOCK)),
    "developer": Conversation((Message("developer", (TextPart("Answer in French."),)), _user("Hi there"))),
    "content_parts": Conversation((
        Message("system", (TextPart("You are terse. "), TextPart("Answer in one line."))),
        Message("user", (TextPart("First part. "), TextPart("Second part."))),
    )),
    "image": Conversation((Message("user", (TextPart("What is in "), ImagePart(PIXEL), TextPart(" this image?"))),)),
    "reasoning_history": Conversation(_HISTORY),
    **{f"effort_{effort}": Conversation(_HISTORY, reasoning_effort=effort)
       for effort in ("none", "minimal", "low", "medium", "high", "xhigh")},
}


def template_messages(conversation: Conversation) -> list[dict]:
    """The conversation as a chat template's `messages`, as the client sent it (a developer message as one)."""
    messages = []
    for turn in conversation.turns:
        if isinstance(turn, ToolResult):
            messages.append({"role": "tool", "tool_call_id": turn.call_id, "content": turn.text})
            continue
        message: dict = {"role": turn.role, "content": _content(turn.content)}
        if turn.reasoning is not None:
            message["reasoning_content"] = turn.reasoning
        if turn.tool_calls:
            message["tool_calls"] = [
                {"id": call.call_id, "type": "function",
                 "function": {"name": call.name, "arguments": call_arguments(call)}}
                for call in turn.tool_calls
            ]
        messages.append(message)
    return messages


def _content(parts: tuple) -> str | list[dict]:
    """One text part as a string (or none as ""), else the OpenAI content parts."""
    if not parts:
        return ""
    if len(parts) == 1 and isinstance(parts[0], TextPart):
        return parts[0].text
    return [{"type": "text", "text": part.text} if isinstance(part, TextPart)
            else {"type": "image_url", "image_url": {"url": part.url}} for part in parts]


def template_tools(conversation: Conversation) -> list[dict] | None:
    tools = [{"type": "function", "function": {"name": t.name, "description": t.description, "parameters": t.parameters,
                                               **({"strict": True} if t.strict else {})}}
             for t in conversation.tools]
    return tools or None
