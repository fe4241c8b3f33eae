"""A validated Responses request → the neutral `Conversation` and generation settings.

Responses history is a flat list of items, while the neutral conversation is a
list of turns: an assistant turn carries its reasoning, text and tool calls
together, followed by one result per call in the calls' order. The mapping:

    instructions                     → a system message, first, for this request only
    message (user/system/developer)  → a message with the same role
    reasoning, message (assistant),  → one assistant message: reasoning is replayed
      function_call …                   as the `reasoning` of the output that follows it
    function_call_output …           → tool results, re-ordered to their calls' order

The outputs for a group of calls must follow the group, before any other item,
in any order; a call without its output, or an output without its call, is a
400 naming the item. `prior` items (a stored previous response's history) are
prepended; an error inside them is reported at `previous_response_id`, except
that a missing output is reported at `input`, where the client must add it.
"""

from __future__ import annotations

from typing import Sequence, Union

from ...neutral.conversation import (
    Conversation, ImagePart, Message, NamedToolChoice, Part, TextPart, ToolCall, ToolResult, ToolSpec, Turn,
)
from ...engine.base import DEFAULT_TEMPERATURE, DEFAULT_TOP_P
from ...errors import InvalidRequestError
from ...pipeline.generation import GenerationSettings
from ..request.request import ResponsesRequest
from ..request.items import (
    FunctionCallItem, FunctionCallOutputItem, InputImage, InputItem, InputText, MessageItem, OutputText, ReasoningItem,
)
from ..request.tools import FunctionToolChoice
from ...structured.formats import output_schema
from ...util.wire import path
from ...util.echoed import echoed

Prefix = Union[tuple, None]
"""Where an item sits in the request (`("input", 3)`), or None for an item of the stored history."""

_PRIOR_PARAM = "previous_response_id"


def to_conversation(
    request: ResponsesRequest, *, prior: Sequence[InputItem] = ()
) -> Conversation:
    """The conversation to render: `prior` history, then `request.input`, with `instructions` first."""
    located = [(item, None) for item in prior] + [(item, ("input", i)) for i, item in enumerate(request.input or ())]
    turns = _TurnBuilder().build(located)
    if not turns:
        raise InvalidRequestError("'input' must contain at least one item.", param="input")
    if request.instructions:
        turns = (Message("system", (TextPart(request.instructions),)), *turns)
    choice = request.tool_choice
    tool_choice = NamedToolChoice(choice.name) if isinstance(choice, FunctionToolChoice) else choice
    tools = tuple(ToolSpec(t.name, t.description, t.parameters, bool(t.strict)) for t in request.tools)
    return Conversation.from_request(
        turns,
        tools=tools,
        tool_choice=tool_choice,
        reasoning_effort=request.effort,
        parallel_tool_calls=request.parallel_tool_calls,
        output=output_schema(request.output_format),
    )


def to_settings(request: ResponsesRequest) -> GenerationSettings:
    return GenerationSettings(
        max_tokens=request.max_output_tokens,
        temperature=DEFAULT_TEMPERATURE if request.temperature is None else float(request.temperature),
        top_p=DEFAULT_TOP_P if request.top_p is None else float(request.top_p),
        presence_penalty=float(request.presence_penalty or 0.0),
        frequency_penalty=float(request.frequency_penalty or 0.0),
        max_tool_calls=request.max_tool_calls,
    )


def _param(prefix: Prefix, *rest: object) -> str:
    return _PRIOR_PARAM if prefix is None else path(prefix, *rest)


class _TurnBuilder:
    """Walks the items once, accumulating the assistant turn in progress and the open call group."""

    def __init__(self) -> None:
        self.turns: list[Turn] = []
        self.reasoning: list[str] = []
        self.content: list[Part] = []
        self.calls: list[tuple[ToolCall, Prefix]] = []
        self.group: dict[str, tuple[ToolCall, Prefix]] = {}
        self.results: dict[str, ToolResult] = {}
        self.call_ids: set[str] = set()

    def build(self, items: Sequence[tuple[InputItem, Prefix]]) -> tuple[Turn, ...]:
        for item, prefix in items:
            self._add(item, prefix)
        self._close_group()
        self._flush_assistant()
        return tuple(self.turns)

    def _add(self, item: InputItem, prefix: Prefix) -> None:
        if isinstance(item, FunctionCallOutputItem):
            self._output(item, prefix)
            return
        self._close_group()
        if isinstance(item, FunctionCallItem):
            self._call(item, prefix)
        elif isinstance(item, ReasoningItem):
            self._reasoning(item)
        elif item.role == "assistant":
            if self.content or self.calls:
                self._flush_assistant()
            self.content.extend(self._parts(item, prefix))
        else:
            self._flush_assistant()
            self.turns.append(Message(item.role, self._parts(item, prefix)))

    def _reasoning(self, item: ReasoningItem) -> None:
        """Reasoning opens the next assistant turn; an item with no reasoning text adds nothing."""
        text = "".join(part.text for part in item.content or ())
        if not text:
            return
        if self.content or self.calls:
            self._flush_assistant()
        self.reasoning.append(text)

    def _call(self, item: FunctionCallItem, prefix: Prefix) -> None:
        if item.call_id in self.call_ids:
            raise InvalidRequestError(
                f"Duplicate function call id {echoed(item.call_id)!r}: each call needs a unique call_id.",
                param=_param(prefix, "call_id"),
            )
        self.call_ids.add(item.call_id)
        self.calls.append((ToolCall(item.call_id, item.name, item.arguments), prefix))

    def _flush_assistant(self) -> None:
        """Ends the assistant turn in progress; its calls cannot be left without outputs."""
        if self.calls:
            raise _missing_output(*self.calls[0])
        if self.content or self.reasoning:
            self.turns.append(Message("assistant", tuple(self.content), self._joined_reasoning()))
        self.content, self.reasoning = [], []

    def _open_group(self) -> None:
        """The assistant turn's calls now wait for their outputs, which must come next."""
        calls = tuple(call for call, _ in self.calls)
        self.turns.append(Message("assistant", tuple(self.content), self._joined_reasoning(), calls))
        self.group = {call.call_id: (call, prefix) for call, prefix in self.calls}
        self.results = {}
        self.content, self.reasoning, self.calls = [], [], []

    def _joined_reasoning(self) -> str | None:
        return "\n\n".join(self.reasoning) or None

    def _output(self, item: FunctionCallOutputItem, prefix: Prefix) -> None:
        if self.calls:
            self._open_group()
        entry = self.group.get(item.call_id)
        if entry is None:
            raise _orphan_output(item, prefix, seen=item.call_id in self.call_ids)
        if item.call_id in self.results:
            raise InvalidRequestError(
                f"Duplicate function call output for call_id {echoed(item.call_id)!r}.", param=_param(prefix, "call_id")
            )
        call = entry[0]
        if item.name is not None and item.name != call.name:
            raise InvalidRequestError(
                f"The output for call_id {echoed(item.call_id)!r} names {echoed(item.name)!r}, "
                f"but the call was to {call.name!r}.",
                param=_param(prefix, "name"),
            )
        content = _output_parts(item, prefix)
        self.results[item.call_id] = ToolResult(item.call_id, content, call.name)

    def _close_group(self) -> None:
        """Emits the open group's results in call order; every call must have one."""
        for call_id, (call, prefix) in self.group.items():
            if call_id not in self.results:
                raise _missing_output(call, prefix)
            self.turns.append(self.results[call_id])
        self.group, self.results = {}, {}

    def _parts(self, item: MessageItem, prefix: Prefix) -> tuple[Part, ...]:
        if isinstance(item.content, str):
            return (TextPart(item.content),)
        parts: list[Part] = []
        for j, part in enumerate(item.content):
            if isinstance(part, (InputText, OutputText)):
                parts.append(TextPart(part.text))
            elif isinstance(part, InputImage):
                parts.append(_image(part, prefix, "content", j))
            else:
                parts.append(TextPart(part.refusal))
        return tuple(parts)


def _output_parts(item: FunctionCallOutputItem, prefix: Prefix) -> tuple[Part, ...]:
    if isinstance(item.output, str):
        return (TextPart(item.output),)
    return tuple(
        TextPart(part.text) if isinstance(part, InputText)
        else _image(part, prefix, "output", j)
        for j, part in enumerate(item.output)
    )


def _image(part: InputImage, prefix: Prefix, *at: object) -> ImagePart:
    """`responses/request/items.py` checked the part's fields; whether the engine takes images at all is
    `GenerationService.load_images`'s one check."""
    return ImagePart(part.image_url or "", param=_param(prefix, *at, "image_url"))


def _missing_output(call: ToolCall, prefix: Prefix) -> InvalidRequestError:
    param = "input" if prefix is None else _param(prefix, "call_id")
    return InvalidRequestError(
        f"No tool output found for function call {echoed(call.call_id)}: every function call needs its "
        "function_call_output, right after the call's group, before the conversation can continue.",
        param=param,
    )


def _orphan_output(item: FunctionCallOutputItem, prefix: Prefix, *, seen: bool) -> InvalidRequestError:
    where = "does not directly follow its call's group" if seen else "has no matching function_call"
    return InvalidRequestError(
        f"No tool call found for function call output with call_id {echoed(item.call_id)}: the output {where}.",
        param=_param(prefix, "call_id"),
    )
