"""Chat Completions request → neutral conversation and generation settings."""

from __future__ import annotations

from ..neutral.conversation import (
    Conversation, ImagePart, Message, NamedToolChoice, Part, TextPart, ToolCall, ToolResult, ToolSpec, Turn,
)
from ..engine.base import DEFAULT_TEMPERATURE, DEFAULT_TOP_P
from ..errors import InvalidRequestError
from ..pipeline.generation import GenerationSettings
from ..structured.formats import OutputFormat, TextFormat, output_schema
from . import request as wire


def to_conversation(
    request: wire.ChatRequest, messages: list[wire.Message], *,
    output_format: OutputFormat = TextFormat(),
) -> Conversation:
    """`output_format` (the parsed `response_format`) is the structured output the family asks the model for."""
    turns = tuple(_turn(i, m) for i, m in enumerate(messages))
    choice = request.tool_choice
    tool_choice = NamedToolChoice(choice.function.name) if isinstance(choice, wire.NamedToolChoiceBody) else (choice or "auto")
    tools = tuple(
        ToolSpec(t.function.name, t.function.description, t.function.parameters, bool(t.function.strict))
        for t in request.tools or []
    )
    return Conversation.from_request(
        turns,
        tools=tools,
        tool_choice=tool_choice,
        reasoning_effort=request.reasoning_effort,
        parallel_tool_calls=request.parallel_tool_calls,
        output=output_schema(output_format),
    )


def to_settings(request: wire.ChatRequest) -> GenerationSettings:
    stop = (request.stop,) if isinstance(request.stop, str) else tuple(request.stop or ())
    return GenerationSettings(
        max_tokens=request.max_completion_tokens if request.max_completion_tokens is not None else request.max_tokens,
        temperature=DEFAULT_TEMPERATURE if request.temperature is None else float(request.temperature),
        top_p=DEFAULT_TOP_P if request.top_p is None else float(request.top_p),
        presence_penalty=float(request.presence_penalty or 0.0),
        frequency_penalty=float(request.frequency_penalty or 0.0),
        seed=request.seed,
        stop=stop,
        report_progress=bool(request.return_progress and request.stream),  # no effect without a stream
    )


def _turn(index: int, message: wire.Message) -> Turn:
    if isinstance(message, wire.ToolMessage):
        return ToolResult(call_id=message.tool_call_id, content=_parts(index, message.content))
    if isinstance(message, wire.AssistantMessage):
        calls = tuple(ToolCall(c.id, c.function.name, c.function.arguments) for c in message.tool_calls or [])
        return Message("assistant", _parts(index, message.content), message.reasoning_content, calls)
    return Message(message.role, _parts(index, message.content))


def _parts(index: int, content) -> tuple[Part, ...]:
    if content is None:
        return ()
    if isinstance(content, str):
        return (TextPart(content),)
    parts: list[Part] = []
    for j, part in enumerate(content):
        if isinstance(part, wire.TextContentPart):
            parts.append(TextPart(part.text))
            continue
        if isinstance(part, wire.RefusalContentPart):
            parts.append(TextPart(part.refusal))  # as Responses replays a refusal: what the assistant said
            continue
        # whether the engine takes images at all is `GenerationService.load_images`'s one check
        if part.image_url.detail != "auto":
            raise InvalidRequestError(
                "Only the 'auto' image detail is supported.", param=f"messages[{index}].content[{j}].image_url.detail"
            )
        parts.append(ImagePart(part.image_url.url, param=f"messages[{index}].content[{j}].image_url.url"))
    return tuple(parts)
