"""GLM (Zhipu / Z.ai): GLM-4.7, GLM-5, GLM-5.1, GLM-5.2 and GLM-5.3 chat templates.

Prompt: `[gMASK]<sop>`, then `<|system|>` / `<|user|>` / `<|assistant|>` turns,
tool results after `<|observation|>` as `<tool_response>…</tool_response>`,
tool declarations in a leading `<|system|>` block, and the generation prompt
`<|assistant|><think>` (thinking) or `<|assistant|></think>` (not thinking).

Template variants (`GlmFamily(variant=...)`, registry names in brackets):

- `4.7` [`glm-4.7`, `glm-5`]: the template shipped with GLM-4.7(-Flash) and
  GLM-5 (they differ in whitespace control only and render identically).
  Tools are listed as whole OpenAI tool objects; replayed reasoning is stripped.
- `5.1` [`glm`, `glm-5.1`], the default: tools listed as their `function`
  object; an assistant turn after the last user message replays `<think></think>`
  even without reasoning while thinking is on; reasoning is replayed verbatim.
- `5.2` [`glm-5.2`]: as 5.1, plus a `Reasoning Effort: High|Max` system line
  while thinking, `<think></think>` wherever reasoning is absent, and a reminder
  text instead of images (its template's own words).
- `5.3` [`glm-5.3`]: GLM-5.3(-Flash). Always thinks: a `Reasoning Effort:
  Low|High|Max` line and an open `<think>` whatever the effort (the template has
  no off switch); every assistant turn replays its reasoning (`clear_thinking`
  defaults to false), `<think></think>` where it has none; a run of tool results
  is put in the order of the calls it answers (when every id matches one call
  once, as the template checks); images as GLM-V writes them.

In 4.7, 5.1 and 5.2, reasoning is replayed only for assistant turns after the last
user message (the current tool-use loop); earlier turns show no reasoning.
Images render as GLM-V's `<|begin_of_image|><|image|><|end_of_image|>` (the `<|image|>`
a media segment, where the engine puts the image's embeddings) except in 5.2.

Reasoning effort, up to 5.2: `none` → thinking off (the templates'
`enable_thinking=false`); any other effort, or none given → thinking on.
GLM-5.2 also states an effort: `xhigh` or no effort → `Max` (its default),
`minimal`/`low`/`medium`/`high` → `High`. Its template writes `High` only for
`high` and `Max` for anything else, `low` included; Maya maps every effort
below `xhigh` to `High`, the least thinking the model knows, because a client
that asks for less thinking should not get the most (`departures.py` lists
this once, as it lists GLM-5.3's `none`, `minimal` and `medium` and the
developer message, which the templates drop and Maya writes as system).
GLM-5.3 (`EFFORT_53`): `none`/`minimal`/`low` → `Low`, `medium`/`high` →
`High`, `xhigh` or no effort → `Max` (its default). `none` maps to the lowest
level rather than being refused because the model cannot stop thinking and
OpenAI clients send it routinely (Codex's recipe sets it); the reasoning still
comes back as reasoning, since the parser always starts in it.
"""

from __future__ import annotations

from typing import Callable, Sequence

from ..neutral.conversation import Conversation, ImagePart, Message, Part, PartialTurn, ToolCall, ToolResult, ToolSpec, Turn
from ..model.tokenizer import Prompt, PromptBuilder
from .continuation import think_first
from ..structured.grammar import Grammar
from .base import ReasoningLead, StreamParser
from .call_grammars import glm_calls
from .call_events import json_text
from .control_text import ControlVocabulary
from .glm_parser import CALL_OPEN, GlmCallReader
from .history import (
    call_arguments,
    function_dict,
    is_system,
    is_user,
    last_user_index,
    openai_tool_dict,
    thinking_enabled,
    turns_with_extra_system,
)
from .tagged_parser import OutputSyntax, TaggedParser

VARIANTS = ("4.7", "5.1", "5.2", "5.3")
EFFORT_53 = {"none": "Low", "minimal": "Low", "low": "Low", "medium": "High", "high": "High", "xhigh": "Max", None: "Max"}
"""GLM-5.3's `Reasoning Effort:` line for each OpenAI effort (its template knows `low`, `high` and `max`)."""

VOCABULARY = ControlVocabulary([
    "[gMASK]", "<sop>", "<|system|>", "<|user|>", "<|assistant|>", "<|observation|>",
    "<|endoftext|>", "<think>", "</think>", "<tool_call>", "</tool_call>",
    "<tool_response>", "</tool_response>", "<arg_key>", "</arg_key>", "<arg_value>",
    "</arg_value>", "<|begin_of_image|>", "<|image|>", "<|end_of_image|>",
])

TOOLS_HEADER = (
    "<|system|>\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n"
)
TOOLS_FOOTER = (
    "</tools>\n\nFor each function call, output the function name and arguments within the "
    "following XML format:\n<tool_call>{function-name}<arg_key>{arg-key-1}</arg_key>"
    "<arg_value>{arg-value-1}</arg_value><arg_key>{arg-key-2}</arg_key>"
    "<arg_value>{arg-value-2}</arg_value>...</tool_call>"
)
IMAGE_REMINDER = (
    "<reminder>You are unable to process this image because you don't have "
    "multi-modal input ability. Try different methods.</reminder>"
)


class GlmFamily:
    name = "glm"
    stop_texts = ("<|user|>", "<|observation|>", "<|endoftext|>")

    def __init__(self, variant: str = "5.1") -> None:
        if variant not in VARIANTS:
            raise ValueError(f"unknown GLM variant {variant!r}; valid: {', '.join(VARIANTS)}")
        self.variant = variant

    def render(self, conversation: Conversation) -> Prompt:
        builder = PromptBuilder().control("[gMASK]").control("<sop>")
        thinking = self.thinks(conversation)
        if self.variant == "5.2" and thinking:
            builder.control("<|system|>").plain("Reasoning Effort: " + _glm52_effort(conversation))
        elif self.variant == "5.3":
            builder.control("<|system|>").plain("Reasoning Effort: " + EFFORT_53[conversation.reasoning_effort])
        if conversation.tools:
            self._write_tools(builder, conversation)
        turns = turns_with_extra_system(conversation)
        if self.variant == "5.3":
            turns = results_in_call_order(turns)
        last_user = last_user_index(turns)
        for index in range(len(turns)):
            self._write_turn(builder, turns, index, last_user, thinking)
        builder.control("<|assistant|>")
        if thinking:
            builder.control("<think>")
        else:
            self._write_no_thinking(builder)
        return builder.build()

    def continuation(self, conversation: Conversation, partial: PartialTurn) -> Prompt:
        return think_first(partial, self.name, in_reasoning=self.thinks(conversation))

    def parser(self, conversation: Conversation, new_call_id: Callable[[], str]) -> StreamParser:
        return TaggedParser(
            OutputSyntax(call_open=CALL_OPEN),
            lambda emitter: GlmCallReader(emitter, conversation.tool),
            new_call_id,
            in_reasoning=self.reasoning_lead(conversation).in_reasoning,
        )

    def reasoning_lead(self, conversation: Conversation) -> ReasoningLead:
        return ReasoningLead(in_reasoning=self.thinks(conversation))

    def call_grammar(self, grammar: Grammar, tools: Sequence[ToolSpec], parallel: bool) -> str | None:
        return glm_calls(grammar, tools, parallel)

    def thinks(self, conversation: Conversation) -> bool:
        """Whether the prompt leaves the model in its reasoning: GLM-5.3 always thinks."""
        return self.variant == "5.3" or thinking_enabled(conversation)

    def _write_tools(self, builder: PromptBuilder, conversation: Conversation) -> None:
        VOCABULARY.write(builder, TOOLS_HEADER)
        for tool in conversation.tools:
            listed = openai_tool_dict(tool) if self.variant == "4.7" else function_dict(tool)
            builder.plain(json_text(listed) + "\n")
        VOCABULARY.write(builder, TOOLS_FOOTER)

    def _write_turn(self, builder: PromptBuilder, turns: tuple[Turn, ...], index: int, last_user: int, thinking: bool) -> None:
        turn = turns[index]
        if isinstance(turn, ToolResult):
            if index == 0 or not isinstance(turns[index - 1], ToolResult):
                builder.control("<|observation|>")
            builder.control("<tool_response>")
            self._write_parts(builder, turn.content)
            builder.control("</tool_response>")
        elif is_system(turn) or is_user(turn):
            builder.control("<|system|>" if is_system(turn) else "<|user|>")
            self._write_parts(builder, turn.content)
        else:
            with builder.assistant(turn):
                self._write_assistant(builder, turn, index > last_user, thinking)

    def _write_assistant(self, builder: PromptBuilder, message: Message, current: bool, thinking: bool) -> None:
        builder.control("<|assistant|>")
        reasoning, content = self._replayed_reasoning(message, current, thinking)
        if reasoning is not None:
            builder.control("<think>").plain(reasoning).control("</think>")
        elif self.variant in ("5.2", "5.3"):
            builder.control("<think>").control("</think>")
        else:
            builder.control("</think>")
        builder.plain(content.strip())
        for call in message.tool_calls:
            _write_call(builder, call)

    def _replayed_reasoning(self, message: Message, current: bool, thinking: bool) -> tuple[str | None, str]:
        """The reasoning shown between `<think>` and `</think>` (None: not shown) and the content."""
        reasoning, content = message.reasoning, message.text
        if self.variant == "4.7":
            if reasoning is None and "</think>" in content:
                head, content = content.split("</think>")[0], content.split("</think>")[-1].lstrip("\n")
                reasoning = head.rstrip("\n").split("<think>")[-1].lstrip("\n")
            return (reasoning.strip() if current and reasoning else None), content
        if reasoning is None and "</think>" in content:
            reasoning = content.split("</think>")[0].split("<think>")[-1]
            content = content.split("</think>")[-1]
        elif reasoning is None and self.variant == "5.1" and current and thinking:
            reasoning = ""
        return (reasoning if current or self.variant == "5.3" else None), content

    def _write_parts(self, builder: PromptBuilder, parts: tuple[Part, ...]) -> None:
        for part in parts:
            if not isinstance(part, ImagePart):
                builder.plain(part.text)
            elif self.variant == "5.2":
                builder.plain(IMAGE_REMINDER)
            else:
                builder.control("<|begin_of_image|>").media("<|image|>").control("<|end_of_image|>")

    def _write_no_thinking(self, builder: PromptBuilder) -> None:
        if self.variant == "5.2":
            builder.control("<think>")
        builder.control("</think>")


def _write_call(builder: PromptBuilder, call: ToolCall) -> None:
    builder.control("<tool_call>").plain(call.name)
    for key, value in call_arguments(call).items():
        builder.control("<arg_key>").plain(key).control("</arg_key>")
        builder.control("<arg_value>").plain(value if isinstance(value, str) else json_text(value))
        builder.control("</arg_value>")
    builder.control("</tool_call>")


def _glm52_effort(conversation: Conversation) -> str:
    effort = conversation.reasoning_effort
    return "Max" if effort in (None, "xhigh") else "High"


def results_in_call_order(turns: tuple[Turn, ...]) -> tuple[Turn, ...]:
    """Each run of tool results put in the order of the calls of the assistant turn just before it, as
    GLM-5.3's template does; a run stays as sent when the template would not sort it (a call or result
    without an id, an id given twice, a result that answers none of the calls)."""
    ordered = list(turns)
    start = 0
    while start < len(ordered):
        end = start
        while end < len(ordered) and isinstance(ordered[end], ToolResult):
            end += 1
        if end > start and start > 0:
            ordered[start:end] = _sorted_run(ordered[start - 1], ordered[start:end])
        start = end + 1 if end == start else end
    return tuple(ordered)


def _sorted_run(before: Turn, results: list) -> list:
    calls = before.tool_calls if isinstance(before, Message) and before.role == "assistant" else ()
    position = {call.call_id: i for i, call in enumerate(calls)}
    ids = [result.call_id for result in results]
    if (not calls or len(position) != len(calls) or not all(position)
            or len(set(ids)) != len(ids) or not all(i in position for i in ids)):
        return results
    return sorted(results, key=lambda result: position[result.call_id])
