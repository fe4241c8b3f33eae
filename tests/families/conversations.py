"""The golden conversations, and how each becomes the official templates' input.

The same neutral conversations are rendered by our families and, converted to
OpenAI-style message dicts, by the official templates / DeepSeek's encoder.
"""

from __future__ import annotations

import json

from maya_server.neutral.conversation import Conversation, Message, TextPart, ToolCall, ToolResult, ToolSpec

WEATHER = ToolSpec(
    name="get_weather",
    description="Current weather for a city.",
    parameters={
        "type": "object",
        "properties": {
            "city": {"type": "string", "description": "City name, e.g. Zürich"},
            "days": {"type": "integer"},
            "units": {"type": ["string", "null"], "enum": ["metric", "imperial", None]},
        },
        "required": ["city"],
    },
)
SEARCH = ToolSpec(
    name="search",
    description="Search the web.",
    parameters={
        "type": "object",
        "properties": {
            "query": {"type": "string"},
            "filters": {"type": "object"},
            "top_k": {"type": "number"},
            "fresh": {"type": "boolean"},
            "tags": {"type": "array", "items": {"type": "string"}},
        },
    },
)
CLOCK = ToolSpec(name="now", description="The current time.", parameters={"type": "object", "properties": {}})


def user(text: str) -> Message:
    return Message("user", (TextPart(text),))


def system(text: str, role: str = "system") -> Message:
    return Message(role, (TextPart(text),))


def assistant(text: str = "", reasoning: str | None = None, calls: tuple[ToolCall, ...] = ()) -> Message:
    return Message("assistant", (TextPart(text),) if text else (), reasoning, calls)


def call(call_id: str, name: str, **arguments) -> ToolCall:
    return ToolCall(call_id, name, json.dumps(arguments, ensure_ascii=False))


def result(call_id: str, text: str) -> ToolResult:
    return ToolResult(call_id, (TextPart(text),))


TOOLS = (WEATHER, SEARCH, CLOCK)

_PARIS = call("call_1", "get_weather", city="Paris", days=3)
_ROME = call("call_2", "get_weather", city="Rome", units=None)
_SEARCH = call(
    "call_3", "search", query="café \"best\"", filters={"open": True, "stars": [4, 5]}, top_k=2.5, fresh=False, tags=["a", "b"]
)
_NOW = ToolCall("call_4", "now", "{}")

CONVERSATIONS: dict[str, Conversation] = {
    "plain": Conversation((user("Hello!"),)),
    "system": Conversation((system("You are terse."), user("Hi there\nhow are you?"))),
    "developer": Conversation((system("Answer in French.", role="developer"), user("Good morning"))),
    "multi_turn_reasoning": Conversation((
        system("Be helpful."),
        user("What is 2+2?"),
        assistant("4", reasoning="Simple arithmetic: 2+2=4."),
        user("And times 3?"),
        assistant("12", reasoning="  4*3 = 12\n"),
        user("Thanks!"),
    )),
    "tools_declared": Conversation((system("Use tools wisely."), user("Weather in Zürich?")), tools=TOOLS),
    "tools_no_system": Conversation((user("Weather in Zürich?"),), tools=TOOLS),
    "tool_call_and_result": Conversation((
        user("Weather in Paris for 3 days?"),
        assistant("Let me check.", reasoning="I should call get_weather.", calls=(_PARIS,)),
        result("call_1", "Sunny, 21°C"),
    ), tools=TOOLS),
    "several_results": Conversation((
        system("You are a travel agent."),
        user("Compare Paris and Rome, and find cafés."),
        assistant("", reasoning="Three calls at once.", calls=(_PARIS, _ROME, _SEARCH)),
        result("call_2", "Rain"),
        result("call_1", "Sunny"),
        result("call_3", '[{"name": "Le Café"}]'),
        assistant("Paris is sunny, Rome rainy. Try Le Café.", reasoning="Summarise."),
        user("What time is it?"),
        assistant("", reasoning="Use the clock.", calls=(_NOW,)),
        result("call_4", "12:00"),
    ), tools=TOOLS),
    "multi_step_loop": Conversation((
        user("Plan my day."),
        assistant("", reasoning="First the weather.", calls=(_PARIS,)),
        result("call_1", "Sunny"),
        assistant("Nice weather; now cafés.", reasoning="Then search.", calls=(_SEARCH,)),
        result("call_3", "none found"),
    ), tools=TOOLS),
    "system_mid_conversation": Conversation((
        user("Hi"),
        assistant("Hello! How can I help?"),
        system("From now on, answer in one word."),
        user("Describe the sea."),
    )),
    "thinking_off": Conversation((
        system("Be brief."),
        user("Hi"),
        assistant("Hello.", reasoning="greeting"),
        user("Bye"),
    ), reasoning_effort="none"),
    "thinking_off_tools": Conversation((
        user("Weather in Paris?"),
        assistant("", calls=(_PARIS,)),
        result("call_1", "Sunny"),
    ), tools=TOOLS, reasoning_effort="none"),
    "effort_high": Conversation((user("Prove it."),), reasoning_effort="high"),
    "effort_low": Conversation((user("Quick one."),), reasoning_effort="low"),
    "effort_xhigh": Conversation((system("Think hard."), user("Prove Fermat."),), reasoning_effort="xhigh"),
    "unicode_and_whitespace": Conversation((
        user("  Ünïcødé ✓ 你好 — tabs\tand\n\nblank lines  "),
        assistant("  Réponse avec espaces  "),
        user("emoji 🎉"),
    )),
    "assistant_last": Conversation((user("Write a haiku."), assistant("Autumn moonlight", reasoning="A haiku."))),
}


def tool_dicts(conversation: Conversation) -> list[dict]:
    tools = []
    for tool in conversation.tools:
        function = {"name": tool.name, "description": tool.description, "parameters": tool.parameters}
        tools.append({"type": "function", "function": function})
    return tools


def openai_messages(conversation: Conversation, *, arguments_as_text: bool = False) -> list[dict]:
    """OpenAI-style messages; developer becomes system (our documented rule for every family)."""
    messages = []
    for turn in conversation.turns:
        if isinstance(turn, ToolResult):
            messages.append({"role": "tool", "tool_call_id": turn.call_id, "content": turn.text})
            continue
        role = "system" if turn.role == "developer" else turn.role
        message = {"role": role, "content": turn.text}
        if turn.reasoning is not None:
            message["reasoning_content"] = turn.reasoning
        if turn.tool_calls:
            message["tool_calls"] = [_openai_call(c, arguments_as_text) for c in turn.tool_calls]
        messages.append(message)
    return messages


def _openai_call(tool_call: ToolCall, arguments_as_text: bool) -> dict:
    arguments = tool_call.arguments if arguments_as_text else json.loads(tool_call.arguments)
    return {"id": tool_call.call_id, "type": "function", "function": {"name": tool_call.name, "arguments": arguments}}
