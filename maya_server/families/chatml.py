"""ChatML with Hermes tools and Qwen3 thinking (`chatml`).

Renders like Qwen3's official template: `<|im_start|>role\\n…<|im_end|>\\n`
turns; tools declared in the system turn (after the system text) as Hermes
`<tools>` JSON lines; assistant calls as `<tool_call>\\n{"name": …,
"arguments": …}\\n</tool_call>`; consecutive tool results in one user turn as
`<tool_response>\\n…\\n</tool_response>`. Reasoning is replayed as
`<think>\\n…\\n</think>\\n\\n` only for assistant turns after the last real
user query (the current tool loop). No default system prompt is injected, so
without tools and reasoning this is exactly plain ChatML — what SmolLM2's GGUF
template produces minus its default "You are a helpful AI assistant named
SmolLM" system line, which we deliberately leave out.

Reasoning effort: `none` → thinking off, written as Qwen3's empty
`<think>\\n\\n</think>\\n\\n` after the generation prompt (when
`ChatmlFamily(thinking_switch=False)`, e.g. for a model that has no `<think>`
token, nothing is written); any other effort, or none → the model decides, and
a `<think>` it opens first is read as reasoning.

Images render as Qwen-VL's `<|vision_start|><|image_pad|><|vision_end|>`, the `<|image_pad|>`
being a media segment: where the engine puts the image's embeddings.
"""

from __future__ import annotations

from typing import Callable, Sequence

from ..neutral.conversation import Conversation, ImagePart, Message, Part, PartialTurn, ToolResult, ToolSpec, Turn
from ..model.tokenizer import Prompt, PromptBuilder
from ..structured.grammar import Grammar
from .base import ReasoningLead, StreamParser
from .call_grammars import hermes_calls
from .call_events import json_text
from .continuation import written_back
from .control_text import ControlVocabulary
from .hermes_parser import CALL_OPEN, HermesCallReader
from .history import call_arguments, is_system, is_user, openai_tool_dict, thinking_enabled, turns_with_extra_system
from .tagged_parser import OutputSyntax, TaggedParser

VOCABULARY = ControlVocabulary([
    "<|im_start|>", "<|im_end|>", "<|endoftext|>", "<tool_call>", "</tool_call>",
    "<tool_response>", "</tool_response>", "<think>", "</think>",
    "<|vision_start|>", "<|image_pad|>", "<|vision_end|>",
])

TOOLS_HEADER = (
    "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n<tools>"
)
TOOLS_FOOTER = (
    "\n</tools>\n\nFor each function call, return a json object with function name and arguments "
    "within <tool_call></tool_call> XML tags:\n<tool_call>\n"
    '{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call><|im_end|>\n'
)


class ChatmlFamily:
    name = "chatml"
    stop_texts = ("<|im_end|>", "<|endoftext|>")

    def __init__(self, thinking_switch: bool = True) -> None:
        self.thinking_switch = thinking_switch

    def render(self, conversation: Conversation) -> Prompt:
        builder = PromptBuilder()
        turns = turns_with_extra_system(conversation)
        opening_system = bool(turns) and is_system(turns[0])
        self._write_system(builder, conversation, turns[0] if opening_system else None)
        last_query = _last_query_index(turns)
        for index in range(1 if opening_system else 0, len(turns)):
            self._write_turn(builder, turns, index, last_query)
        VOCABULARY.write(builder, "<|im_start|>assistant\n")
        if self.thinking_switch and not thinking_enabled(conversation):
            VOCABULARY.write(builder, "<think>\n\n</think>\n\n")
        return builder.build()

    def continuation(self, conversation: Conversation, partial: PartialTurn) -> Prompt:
        """The cut turn as the model wrote it, when its log kept the model's text (`continuation.written_back`); else
        as the model writes it: `<think>\\n` reasoning (`\\n</think>\\n\\n` once closed), the answer, then each call
        as `<tool_call>\\n{"name": …, "arguments": ` and its arguments so far (`}\\n</tool_call>` once complete)."""
        written = written_back(partial)
        if written is not None:
            return written
        builder = PromptBuilder()
        for position, item in enumerate(partial.items):
            if item.kind == "reasoning":
                VOCABULARY.write(builder, "<think>\n")
                builder.plain(item.text)
                if item.done:
                    VOCABULARY.write(builder, "\n</think>\n\n")
            elif item.kind == "text":
                builder.plain(item.text)
            else:
                if position > 0 and partial.items[position - 1].kind != "reasoning":
                    builder.plain("\n")
                VOCABULARY.write(builder, '<tool_call>\n{"name": "')
                builder.plain(item.name + '", "arguments": ' + item.text)
                if item.done:
                    VOCABULARY.write(builder, "}\n</tool_call>")
        return builder.build()

    def parser(self, conversation: Conversation, new_call_id: Callable[[], str]) -> StreamParser:
        return TaggedParser(
            OutputSyntax(call_open=CALL_OPEN, think_open="<think>"),
            HermesCallReader,
            new_call_id,
            in_reasoning=False,
        )

    def reasoning_lead(self, conversation: Conversation) -> ReasoningLead:
        """The model opens its own reasoning, unless the prompt wrote it empty (thinking off)."""
        switched_off = self.thinking_switch and not thinking_enabled(conversation)
        return ReasoningLead(in_reasoning=False, think_open=None if switched_off else "<think>")

    def call_grammar(self, grammar: Grammar, tools: Sequence[ToolSpec], parallel: bool) -> str | None:
        return hermes_calls(grammar, tools, parallel)

    def _write_system(self, builder: PromptBuilder, conversation: Conversation, system: Message | None) -> None:
        if not conversation.tools:
            if system is not None:
                VOCABULARY.write(builder, "<|im_start|>system\n")
                _write_parts(builder, system.content)
                VOCABULARY.write(builder, "<|im_end|>\n")
            return
        VOCABULARY.write(builder, "<|im_start|>system\n")
        if system is not None:
            _write_parts(builder, system.content)
            builder.plain("\n\n")
        VOCABULARY.write(builder, TOOLS_HEADER)
        for tool in conversation.tools:
            builder.plain("\n" + json_text(openai_tool_dict(tool)))
        VOCABULARY.write(builder, TOOLS_FOOTER)

    def _write_turn(self, builder: PromptBuilder, turns: tuple[Turn, ...], index: int, last_query: int) -> None:
        turn = turns[index]
        if isinstance(turn, ToolResult):
            _write_result(builder, turns, index)
        elif turn.role == "assistant":
            with builder.assistant(turn):
                _write_assistant(builder, turn, index > last_query, index == len(turns) - 1)
        else:
            role = "user" if is_user(turn) else "system"
            VOCABULARY.write(builder, f"<|im_start|>{role}\n")
            _write_parts(builder, turn.content)
            VOCABULARY.write(builder, "<|im_end|>\n")


def _write_assistant(builder: PromptBuilder, message: Message, current: bool, last: bool) -> None:
    reasoning, content = message.reasoning or "", message.text
    if message.reasoning is None and "</think>" in content:
        reasoning = content.split("</think>")[0].rstrip("\n").split("<think>")[-1].lstrip("\n")
        content = content.split("</think>")[-1].lstrip("\n")
    VOCABULARY.write(builder, "<|im_start|>assistant\n")
    if current and (last or reasoning):
        VOCABULARY.write(builder, "<think>\n")
        builder.plain(reasoning.strip("\n"))
        VOCABULARY.write(builder, "\n</think>\n\n")
        content = content.lstrip("\n")
    builder.plain(content)
    for position, call in enumerate(message.tool_calls):
        if position > 0 or content:
            builder.plain("\n")
        VOCABULARY.write(builder, '<tool_call>\n{"name": "')
        builder.plain(call.name + '", "arguments": ' + json_text(call_arguments(call)))
        VOCABULARY.write(builder, "}\n</tool_call>")
    VOCABULARY.write(builder, "<|im_end|>\n")


def _write_result(builder: PromptBuilder, turns: tuple[Turn, ...], index: int) -> None:
    if index == 0 or not isinstance(turns[index - 1], ToolResult):
        VOCABULARY.write(builder, "<|im_start|>user")
    VOCABULARY.write(builder, "\n<tool_response>\n")
    _write_parts(builder, turns[index].content)
    VOCABULARY.write(builder, "\n</tool_response>")
    if index == len(turns) - 1 or not isinstance(turns[index + 1], ToolResult):
        VOCABULARY.write(builder, "<|im_end|>\n")


def _write_parts(builder: PromptBuilder, parts: tuple[Part, ...]) -> None:
    for part in parts:
        if isinstance(part, ImagePart):
            builder.control("<|vision_start|>").media("<|image_pad|>").control("<|vision_end|>")
        else:
            builder.plain(part.text)


def _last_query_index(turns: tuple[Turn, ...]) -> int:
    """Qwen3's last real user query: a user turn that is not itself a wrapped tool response."""
    for index in range(len(turns) - 1, -1, -1):
        text = turns[index].text if is_user(turns[index]) else None
        if text is not None and not (text.startswith("<tool_response>") and text.endswith("</tool_response>")):
            return index
    return len(turns) - 1
