"""DeepSeek's prompt encoder, shared by V4 and V4.1: what the two releases write alike, and the few places they
differ named in a `DeepSeekDialect` (`deepseek_v4.py`, `deepseek_v41.py`).

Checked against DeepSeek's own toolkit (deepseek-recipe 0.2.0, `DeepseekV4Encoding` and `DeepseekV41Encoding` after
its Chat Completions and Responses conversion): `tests/families/test_deepseek_golden.py`.

Alike in both:
- BOS; `<｜User｜>` turns; assistant turns as `reasoning</think>answer`, then DSML calls after a blank line, then EOS.
- No tool role: a run of tool results and user messages is one user turn of blocks joined by blank lines, each
  result as `<tool_result>…</tool_result>`, the results put in the order of the calls they answer.
- A message's parts (texts, images) are blocks joined by blank lines; a system message with no text is dropped
  (as the toolkit's conversion drops it).
- Tools are described after the opening system message's text and a blank line, and then the structured output
  asked for (`## Response Format:` and its JSON Schema; for any object, the dialect's words), in DeepSeek's
  words instead of Maya's; without a system message, an empty one carries them.
- A user turn followed by the model's turn (or ending the conversation) gets `<｜Assistant｜>` and `<think>`
  (thinking) or `</think>` (chat mode); a conversation ending with an assistant turn gets no generation prompt.
- Reasoning: without tools, reasoning is dropped from assistant turns before the last user turn (whose generation
  prompt then closes thinking with `</think>`); with tools declared, every turn keeps its reasoning.
- The reasoning-effort text is written first, in thinking mode only.

- A conversation that ends with an assistant turn (a client's finished turn, not a prefix) is followed by a new
  turn's generation prompt, and, without tools, no earlier turn keeps its reasoning (the toolkit's conversion).

Where they differ (`DeepSeekDialect`): the DSML tag names, the effort text, the image token, the order of an
assistant turn's calls, the empty line of a call without arguments, and system messages: V4 gathers every system
message into the opening one; V4.1 writes `<｜System｜>` before the opening system text (and before the effort text)
and before each later system message, which then counts as a user turn.

Client text (every message, tool result and reasoning) is written with `ControlVocabulary.write_client`: DeepSeek's
encoder tokenizes it without the added vocabulary, so typed `<｜System｜>`, `<think>` or `｜DSML｜` never become
those tokens. Server-owned instructions (`extra_system`) are one more block of the opening system message.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from ..model.tokenizer import Prompt, PromptBuilder
from ..neutral.conversation import Conversation, ImagePart, Message, Part, TextPart, ToolCall, ToolResult
from .call_events import json_text
from .control_text import ControlVocabulary
from .dsml_parser import DSML, DsmlTags
from .history import call_arguments, function_dict, is_system, thinking_enabled

BOS, EOS = "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"
USER, ASSISTANT = "<｜User｜>", "<｜Assistant｜>"
THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
BLOCK_SEPARATOR = "\n\n"


@dataclass(frozen=True)
class DeepSeekDialect:
    """What one DeepSeek release writes its own way."""

    tags: DsmlTags
    image: str
    effort_text: Callable[[str | None], str]
    """The text written first in thinking mode, for the client's reasoning effort (None: none given)."""
    system_token: str | None
    """V4.1's `<｜System｜>`; None: every system message joins the opening one (V4)."""
    calls_by_id: bool
    """V4 writes an assistant turn's calls sorted by call id (and so its results in that order); V4.1 as made."""
    empty_arguments_line: bool
    """V4.1 writes the (empty) line of arguments of a call without any; V4 closes the invoke on the next line."""
    json_object_section: str
    """What asks for any JSON object (`json_object`): V4.1 gives `{"type": "json_object"}` as the schema, V4 has
    words of its own."""
    vocabulary: ControlVocabulary = field(init=False)

    def __post_init__(self) -> None:
        tokens = [BOS, EOS, USER, ASSISTANT, THINK_OPEN, THINK_CLOSE, DSML, self.image]
        if self.system_token:
            tokens.append(self.system_token)
        object.__setattr__(self, "vocabulary", ControlVocabulary(tokens))

    def tools_section(self) -> str:
        t = self.tags
        return f"""## Tools

You have access to a set of tools to help answer the user's question. You can invoke tools by writing a "{t.block_open}" block like the following:

{t.block_open}
{t.invoke_open}$TOOL_NAME">
{t.param_open}$PARAMETER_NAME" string="true|false">$PARAMETER_VALUE{t.param_close}
...
{t.invoke_close}
{t.invoke_open}$TOOL_NAME2">
...
{t.invoke_close}
{t.block_close}

String parameters should be specified as is and set `string="true"`. For all other types (numbers, booleans, arrays, objects), pass the value in JSON format and set `string="false"`.

If thinking_mode is enabled (triggered by {THINK_OPEN}), you MUST output your complete reasoning inside {THINK_OPEN}...{THINK_CLOSE} BEFORE any tool calls or final response.

Otherwise, output directly after {THINK_CLOSE} with tool calls or final response.

### Available Tool Schemas

"""


TOOLS_FOOTER = "\n\nYou MUST strictly follow the above defined tool name and parameter schemas to invoke tool calls.\n"
RESPONSE_FORMAT = "## Response Format:\n\nYou MUST strictly adhere to the following schema to reply:\n"
JSON_OBJECT_SCHEMA_SECTION = RESPONSE_FORMAT + '{"type": "json_object"}'


@dataclass
class _UserTurn:
    """Consecutive user messages and tool results, merged as the encoder does."""

    blocks: list[Message | ToolResult] = field(default_factory=list)


_Turn = Message | _UserTurn


def render(conversation: Conversation, dialect: DeepSeekDialect) -> Prompt:
    """The prompt DeepSeek's encoder writes for `conversation` in `dialect`."""
    writer = _Writer(dialect)
    thinking = thinking_enabled(conversation)
    keep_reasoning = bool(conversation.tools)
    turns = _turns(conversation, dialect)
    asks = [_asks_for_answer(turn, index, dialect) for index, turn in enumerate(turns)]
    ends_answered = bool(turns) and _is_assistant(turns[-1])
    last_user = len(turns) if ends_answered else max((i for i, asking in enumerate(asks) if asking), default=-1)
    effort = dialect.effort_text(conversation.reasoning_effort) if thinking else ""
    builder = writer.builder.control(BOS)
    for index, turn in enumerate(turns):
        if index == 0:
            if dialect.system_token and (effort or is_system(turn)):
                builder.control(dialect.system_token)
            builder.plain(effort)
        if isinstance(turn, _UserTurn):
            writer.user(turn)
        elif is_system(turn):
            if index and dialect.system_token:
                builder.control(dialect.system_token)
            writer.parts(turn.content)
            if index == 0:
                writer.sections(conversation)
        else:
            with builder.assistant(turn):
                writer.assistant(turn, thinking and (keep_reasoning or index > last_user))
        answer_follows = index + 1 == len(turns) or _is_assistant(turns[index + 1])
        if asks[index] and answer_follows:
            builder.control(ASSISTANT)
            builder.control(THINK_OPEN if thinking and (keep_reasoning or index >= last_user) else THINK_CLOSE)
    if ends_answered:
        builder.control(ASSISTANT).control(THINK_OPEN if thinking else THINK_CLOSE)
    return builder.build()


def _asks_for_answer(turn: _Turn, index: int, dialect: DeepSeekDialect) -> bool:
    """A user turn, or (V4.1) a system message after the first turn: what the model's turn answers."""
    return isinstance(turn, _UserTurn) or (dialect.system_token is not None and index > 0 and is_system(turn))


def _is_assistant(turn: _Turn) -> bool:
    return isinstance(turn, Message) and turn.role == "assistant"


def _turns(conversation: Conversation, dialect: DeepSeekDialect) -> list[_Turn]:
    """The conversation as the encoder sees it: empty system messages dropped, the server's instructions and
    (V4) every system message joined to the opening one, tools given a system message, user turns merged."""
    turns = [t for t in conversation.turns if not (is_system(t) and _is_empty(t))]
    extra = tuple(TextPart(text) for text in conversation.extra_system if text)
    if extra:
        if turns and is_system(turns[0]):
            turns[0] = Message("system", turns[0].content + extra)
        else:
            turns.insert(0, Message("system", extra))
    if dialect.system_token is None:
        systems = [t for t in turns if is_system(t)]
        turns = [t for t in turns if not is_system(t)]
        if systems:
            turns.insert(0, Message("system", tuple(part for s in systems for part in s.content)))
    if (conversation.tools or conversation.output) and not (turns and is_system(turns[0])):
        turns.insert(0, Message("system"))
    merged: list[_Turn] = []
    for turn in turns:
        if isinstance(turn, ToolResult) or turn.role == "user":
            if not merged or not isinstance(merged[-1], _UserTurn):
                merged.append(_UserTurn())
            merged[-1].blocks.append(turn)
        else:
            merged.append(turn)
    _order_results(merged, dialect.calls_by_id)
    return merged


def _is_empty(message: Message) -> bool:
    return all(isinstance(part, TextPart) and not part.text for part in message.content)


def _order_results(turns: list[_Turn], calls_by_id: bool) -> None:
    """Put each user turn's results in the order the latest assistant calls are written in (stable, unknown
    first)."""
    order: dict[str, int] = {}
    for turn in turns:
        if isinstance(turn, Message) and turn.tool_calls:
            ids = [call.call_id for call in turn.tool_calls]
            order = {call_id: i for i, call_id in enumerate(sorted(ids) if calls_by_id else ids)}
        elif isinstance(turn, _UserTurn) and order:
            slots = [i for i, b in enumerate(turn.blocks) if isinstance(b, ToolResult)]
            ordered = sorted((turn.blocks[i] for i in slots), key=lambda r: order.get(r.call_id, 0))
            for slot, result in zip(slots, ordered, strict=True):
                turn.blocks[slot] = result


class _Writer:
    """Writes turns into one prompt: template text through the dialect's vocabulary, client text guarded."""

    def __init__(self, dialect: DeepSeekDialect) -> None:
        self.dialect = dialect
        self.builder = PromptBuilder()

    def client(self, text: str) -> None:
        self.dialect.vocabulary.write_client(self.builder, text)

    def template(self, text: str) -> None:
        self.dialect.vocabulary.write(self.builder, text)

    def parts(self, parts: tuple[Part, ...]) -> None:
        for position, part in enumerate(parts):
            if position:
                self.builder.plain(BLOCK_SEPARATOR)
            if isinstance(part, ImagePart):
                self.builder.media(self.dialect.image)
            else:
                self.client(part.text)

    def sections(self, conversation: Conversation) -> None:
        """What follows the opening system text: the tools, then the structured output asked for."""
        if conversation.tools:
            self.builder.plain(BLOCK_SEPARATOR)
            self.template(self.dialect.tools_section())
            self.client("\n".join(json_text(function_dict(t)) for t in conversation.tools))
            self.builder.plain(TOOLS_FOOTER)
        if conversation.output is not None:
            self.builder.plain(BLOCK_SEPARATOR)
            schema = conversation.output.schema
            if schema is None:
                self.builder.plain(self.dialect.json_object_section)
            else:
                self.builder.plain(RESPONSE_FORMAT)
                self.client(json_text(schema))

    def user(self, turn: _UserTurn) -> None:
        self.builder.control(USER)
        for position, block in enumerate(turn.blocks):
            if position:
                self.builder.plain(BLOCK_SEPARATOR)
            if isinstance(block, ToolResult):
                self.builder.plain("<tool_result>")
                self.parts(block.content)
                self.builder.plain("</tool_result>")
            else:
                self.parts(block.content)

    def assistant(self, message: Message, show_reasoning: bool) -> None:
        if show_reasoning:
            self.client(message.reasoning or "")
            self.builder.control(THINK_CLOSE)
        self.parts(message.content)
        if message.tool_calls:
            by_id = self.dialect.calls_by_id
            self.calls(tuple(sorted(message.tool_calls, key=lambda c: c.call_id)) if by_id else message.tool_calls)
        self.builder.control(EOS)

    def calls(self, calls: tuple[ToolCall, ...]) -> None:
        tags = self.dialect.tags
        self.template(f"{BLOCK_SEPARATOR}{tags.block_open}\n")
        for position, call in enumerate(calls):
            if position:
                self.builder.plain("\n")
            self.template(tags.invoke_open)
            self.client(call.name)
            self.builder.plain('">\n')
            arguments = call_arguments(call)
            for number, (key, value) in enumerate(arguments.items()):
                if number:
                    self.builder.plain("\n")
                self.template(tags.param_open)
                is_string = isinstance(value, str)
                self.client(key)
                self.builder.plain(f'" string="{"true" if is_string else "false"}">')
                self.client(value if is_string else json_text(value))
                self.template(tags.param_close)
            if arguments or self.dialect.empty_arguments_line:
                self.builder.plain("\n")
            self.template(tags.invoke_close)
        self.template(f"\n{tags.block_close}")
