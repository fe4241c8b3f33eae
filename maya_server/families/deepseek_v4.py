"""DeepSeek-V4 / V4.1 (`deepseek-v4`), following DeepSeek's own `encoding_dsv4.py`.

Prompt: BOS, the system text with no role token (tools appended to it as a
`## Tools` section describing DSML), `<｜User｜>` turns, and assistant turns as
`reasoning</think>answer` + DSML calls + EOS. There is no tool role: a run of
tool results and user messages becomes one user turn of blocks joined by blank
lines, each result as `<tool_result>…</tool_result>`, the results ordered like
the calls they answer. A user turn followed by the model's turn ends with
`<｜Assistant｜><think>` (thinking) or `<｜Assistant｜></think>` (chat mode).

Reasoning history: without tools, reasoning is dropped from assistant turns
before the last user turn (and their user turn hands over with `</think>`);
with tools declared, every turn keeps its reasoning and thinking opener, as
DeepSeek's encoder does for agentic use.

Tools attach to the opening system message; without one, an empty system
message carries them (so the section starts with a blank line after BOS).
A conversation ending with an assistant turn gets no generation prompt, as in
the encoder. Developer messages render as system text (the encoder's own
`developer` role, a user turn, is for DeepSeek's internal agent format).

Reasoning effort: `none` → chat mode; `xhigh` → thinking with the encoder's
"max" effort preamble; `minimal`/`low`/`medium`/`high` or none given →
thinking at its default ("high", which adds no text).

Images: V4's text encoder has no image syntax; an ImagePart is written as the
vocabulary's `<｜image｜>` token so a vision path can expand it. This is our
assumption, not DeepSeek's documented format.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from ..neutral.conversation import Conversation, ImagePart, Message, Part, PartialTurn, ToolResult
from ..model.tokenizer import Prompt, PromptBuilder
from .continuation import think_first
from .base import StreamParser
from .call_events import json_text
from .control_text import ControlVocabulary
from .dsml_parser import BLOCK_OPEN, DSML, DsmlCallReader
from .history import call_arguments, function_dict, is_system, thinking_enabled, turns_with_extra_system
from .tagged_parser import OutputSyntax, TaggedParser

BOS, EOS = "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"
USER, ASSISTANT = "<｜User｜>", "<｜Assistant｜>"
IMAGE = "<｜image｜>"

VOCABULARY = ControlVocabulary([BOS, EOS, USER, ASSISTANT, "<think>", "</think>", DSML, IMAGE])

MAX_EFFORT_PREAMBLE = (
    "Reasoning Effort: Absolute maximum with no shortcuts permitted.\n"
    "You MUST be very thorough in your thinking and comprehensively decompose the problem to resolve the root cause, "
    "rigorously stress-testing your logic against all potential paths, edge cases, and adversarial scenarios.\n"
    "Explicitly write out your entire deliberation process, documenting every intermediate step, considered "
    "alternative, and rejected hypothesis to ensure absolutely no assumption is left unchecked.\n\n"
)
TOOLS_HEADER = f"""## Tools

You have access to a set of tools to help answer the user's question. You can invoke tools by writing a "<{DSML}tool_calls>" block like the following:

<{DSML}tool_calls>
<{DSML}invoke name="$TOOL_NAME">
<{DSML}parameter name="$PARAMETER_NAME" string="true|false">$PARAMETER_VALUE</{DSML}parameter>
...
</{DSML}invoke>
<{DSML}invoke name="$TOOL_NAME2">
...
</{DSML}invoke>
</{DSML}tool_calls>

String parameters should be specified as is and set `string="true"`. For all other types (numbers, booleans, arrays, objects), pass the value in JSON format and set `string="false"`.

If thinking_mode is enabled (triggered by <think>), you MUST output your complete reasoning inside <think>...</think> BEFORE any tool calls or final response.

Otherwise, output directly after </think> with tool calls or final response.

### Available Tool Schemas

"""
TOOLS_FOOTER = "\n\nYou MUST strictly follow the above defined tool name and parameter schemas to invoke tool calls.\n"


@dataclass
class _UserTurn:
    """Consecutive user messages and tool results, merged as the encoder does."""

    blocks: list[Message | ToolResult] = field(default_factory=list)


_Turn = Message | _UserTurn


class DeepSeekV4Family:
    name = "deepseek-v4"
    stop_texts = (EOS,)

    def render(self, conversation: Conversation) -> Prompt:
        builder = PromptBuilder().control(BOS)
        thinking = thinking_enabled(conversation)
        keep_reasoning = bool(conversation.tools)
        turns = _merged_turns(conversation)
        last_user = max((i for i, t in enumerate(turns) if isinstance(t, _UserTurn)), default=-1)
        for index, turn in enumerate(turns):
            if index == 0 and thinking and conversation.reasoning_effort == "xhigh":
                builder.plain(MAX_EFFORT_PREAMBLE)
            if isinstance(turn, _UserTurn):
                _write_user(builder, turn)
                if index + 1 < len(turns) and not _is_assistant(turns[index + 1]):
                    continue
                builder.control(ASSISTANT)
                opens = thinking and (keep_reasoning or index >= last_user)
                builder.control("<think>" if opens else "</think>")
            elif is_system(turn):
                _write_system(builder, turn, conversation if index == 0 else None)
            else:
                show = thinking and (keep_reasoning or index > last_user)
                with builder.assistant(turn):
                    _write_assistant(builder, turn, show)
        return builder.build()

    def continuation(self, conversation: Conversation, partial: PartialTurn) -> Prompt:
        return think_first(partial, self.name)

    def parser(self, conversation: Conversation, new_call_id: Callable[[], str]) -> StreamParser:
        return TaggedParser(
            OutputSyntax(call_open=BLOCK_OPEN),
            DsmlCallReader,
            new_call_id,
            in_reasoning=thinking_enabled(conversation),
        )


def _merged_turns(conversation: Conversation) -> list[_Turn]:
    turns = list(turns_with_extra_system(conversation))
    if conversation.tools and not (turns and is_system(turns[0])):
        turns.insert(0, Message("system"))
    merged: list[_Turn] = []
    for turn in turns:
        if isinstance(turn, ToolResult) or turn.role == "user":
            if not merged or not isinstance(merged[-1], _UserTurn):
                merged.append(_UserTurn())
            merged[-1].blocks.append(turn)
        else:
            merged.append(turn)
    _order_results(merged)
    return merged


def _order_results(turns: list[_Turn]) -> None:
    """Put each user turn's results in the order of the latest assistant calls (stable, unknown first)."""
    order: dict[str, int] = {}
    for turn in turns:
        if isinstance(turn, Message) and turn.tool_calls:
            order = {call.call_id: i for i, call in enumerate(turn.tool_calls)}
        elif isinstance(turn, _UserTurn) and order:
            slots = [i for i, b in enumerate(turn.blocks) if isinstance(b, ToolResult)]
            ordered = sorted((turn.blocks[i] for i in slots), key=lambda r: order.get(r.call_id, 0))
            for slot, result in zip(slots, ordered, strict=True):
                turn.blocks[slot] = result


def _is_assistant(turn: _Turn) -> bool:
    return isinstance(turn, Message) and turn.role == "assistant"


def _write_system(builder: PromptBuilder, message: Message, with_tools: Conversation | None) -> None:
    _write_parts(builder, message.content)
    if with_tools is not None and with_tools.tools:
        builder.plain("\n\n")
        VOCABULARY.write(builder, TOOLS_HEADER)
        builder.plain("\n".join(json_text(function_dict(t)) for t in with_tools.tools))
        builder.plain(TOOLS_FOOTER)


def _write_user(builder: PromptBuilder, turn: _UserTurn) -> None:
    builder.control(USER)
    for position, block in enumerate(turn.blocks):
        if position:
            builder.plain("\n\n")
        if isinstance(block, ToolResult):
            builder.plain("<tool_result>")
            _write_parts(builder, block.content)
            builder.plain("</tool_result>")
        else:
            _write_parts(builder, block.content)


def _write_assistant(builder: PromptBuilder, message: Message, show_reasoning: bool) -> None:
    if show_reasoning:
        builder.plain(message.reasoning or "").control("</think>")
    builder.plain(message.text)
    if message.tool_calls:
        VOCABULARY.write(builder, f"\n\n<{DSML}tool_calls>\n")
        for position, call in enumerate(message.tool_calls):
            if position:
                builder.plain("\n")
            _write_invoke(builder, call.name, call_arguments(call))
        VOCABULARY.write(builder, f"\n</{DSML}tool_calls>")
    builder.control(EOS)


def _write_invoke(builder: PromptBuilder, name: str, arguments: dict) -> None:
    VOCABULARY.write(builder, f"<{DSML}invoke name=\"")
    builder.plain(name + '">\n')
    for position, (key, value) in enumerate(arguments.items()):
        if position:
            builder.plain("\n")
        VOCABULARY.write(builder, f"<{DSML}parameter name=\"")
        is_string = isinstance(value, str)
        builder.plain(f'{key}" string="{"true" if is_string else "false"}">')
        builder.plain(value if is_string else json_text(value))
        VOCABULARY.write(builder, f"</{DSML}parameter>")
    VOCABULARY.write(builder, f"\n</{DSML}invoke>")


def _write_parts(builder: PromptBuilder, parts: tuple[Part, ...]) -> None:
    for part in parts:
        if isinstance(part, ImagePart):
            builder.media(IMAGE)
        else:
            builder.plain(part.text)
