"""The fixed conversations a family renderer is checked with against a model's own chat template.

Each one exercises something a template release has changed before: the system
turn, tool declarations, a call and its result, parallel results answered out
of order (GLM-5.3 sorts them), reasoning in earlier turns (replayed or not), and
every reasoning effort. `template_messages` turns a conversation into the
OpenAI-style message dicts a Jinja chat template reads, as transformers and
vLLM hand them over (tool-call arguments parsed into objects, reasoning as
`reasoning_content`). Text only: an image is a media segment in Maya's prompt,
which no template renders the same way.
"""

from __future__ import annotations

import json

from ..neutral.conversation import Conversation, Message, TextPart, ToolCall, ToolResult, ToolSpec
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


def _user(text: str) -> Message:
    return Message("user", (TextPart(text),))


def _assistant(text: str = "", reasoning: str | None = None, calls: tuple[ToolCall, ...] = ()) -> Message:
    return Message("assistant", (TextPart(text),) if text else (), reasoning, calls)


def _result(call_id: str, text: str) -> ToolResult:
    return ToolResult(call_id, (TextPart(text),))


_PARIS = ToolCall("call_1", "get_weather", json.dumps({"city": "Paris", "days": 2}))
_ROME = ToolCall("call_2", "get_weather", json.dumps({"city": "Rome"}))
_NOW = ToolCall("call_3", "now", "{}")

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
    "reasoning_history": Conversation(_HISTORY),
    **{f"effort_{effort}": Conversation(_HISTORY, reasoning_effort=effort)
       for effort in ("none", "minimal", "low", "medium", "high", "xhigh")},
}


def template_messages(conversation: Conversation) -> list[dict]:
    """The conversation as a chat template's `messages` (developer messages as system, as Maya renders them)."""
    messages = []
    for turn in conversation.turns:
        if isinstance(turn, ToolResult):
            messages.append({"role": "tool", "tool_call_id": turn.call_id, "content": turn.text})
            continue
        message: dict = {"role": "system" if turn.role == "developer" else turn.role, "content": turn.text}
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


def template_tools(conversation: Conversation) -> list[dict] | None:
    tools = [{"type": "function", "function": {"name": t.name, "description": t.description, "parameters": t.parameters}}
             for t in conversation.tools]
    return tools or None
