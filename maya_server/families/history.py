"""Reading the neutral conversation the way the official templates see it.

Templates receive OpenAI-style dicts: tools as `{"type": "function",
"function": {...}}`, tool-call arguments as parsed objects, developer messages
only where the family knows them. These helpers produce exactly those views,
plus the one thing templates know nothing about: `extra_system`, the server's
own instructions, and Maya's wording of the structured output asked for
(`output_instructions`) for families whose makers have none of their own.

Placement of `extra_system`: the texts are joined with blank lines and appended,
after a blank line, to a system (or developer) message that opens the
conversation; when the conversation does not open with one, a system message
holding only them is put first. Instructions there sit where every family
expects standing instructions, before any turn.
"""

from __future__ import annotations

import orjson

from ..neutral.conversation import Conversation, Message, OutputSchema, TextPart, ToolCall, ToolSpec, Turn
from ..util.json_depth import loads_bounded


def output_instructions(output: OutputSchema | None) -> str:
    """Maya's system-prompt text that asks for JSON output; empty for plain text."""
    if output is None:
        return ""
    if output.schema is None:
        return "Respond with only a valid JSON object: no other text and no Markdown code fences."
    lines = [
        "Respond with only a JSON object that matches the JSON Schema below: "
        "no other text and no Markdown code fences.",
        f"Schema name: {output.name}",
    ]
    if output.description:
        lines.append(f"Description: {output.description}")
    lines.append(orjson.dumps(output.schema).decode())
    return "\n".join(lines)


def turns_with_extra_system(conversation: Conversation) -> tuple[Turn, ...]:
    """The turns, with `extra_system` and Maya's `output_instructions` merged into the opening system message."""
    texts = (*conversation.extra_system, output_instructions(conversation.output))
    extra = "\n\n".join(t for t in texts if t)
    turns = conversation.turns
    if not extra:
        return turns
    first = turns[0] if turns else None
    if isinstance(first, Message) and first.role in ("system", "developer"):
        separator = "\n\n" if first.text else ""
        merged = Message("system", first.content + (TextPart(separator + extra),))
        return (merged,) + turns[1:]
    return (Message("system", (TextPart(extra),)),) + turns


def is_system(turn: Turn) -> bool:
    """System and developer messages both carry instructions; developer renders as system."""
    return isinstance(turn, Message) and turn.role in ("system", "developer")


def is_user(turn: Turn) -> bool:
    return isinstance(turn, Message) and turn.role == "user"


def last_user_index(turns: tuple[Turn, ...]) -> int:
    return max((i for i, t in enumerate(turns) if is_user(t)), default=-1)


def thinking_enabled(conversation: Conversation) -> bool:
    """Reasoning effort `none` turns thinking off; any other value (or none given) leaves it on."""
    return conversation.reasoning_effort != "none"


def function_dict(tool: ToolSpec) -> dict:
    """The `function` object of an OpenAI tool, as clients send it (without `strict`)."""
    function: dict = {"name": tool.name}
    if tool.description is not None:
        function["description"] = tool.description
    if tool.parameters is not None:
        function["parameters"] = tool.parameters
    return function


def openai_tool_dict(tool: ToolSpec) -> dict:
    return {"type": "function", "function": function_dict(tool)}


def call_arguments(call: ToolCall) -> dict:
    """The call's arguments as an object; text that is not a JSON object is kept under `arguments`.

    The fallback is DeepSeek's own (encoding_dsv4.py); applying it everywhere keeps
    a bad history item from failing a render.
    """
    try:
        value = loads_bounded(call.arguments)
    except ValueError:
        return {"arguments": call.arguments}
    return value if isinstance(value, dict) else {"arguments": call.arguments}
