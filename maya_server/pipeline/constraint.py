"""The grammar a generation is held to while it writes: structured output, or the calls a turn must make.

Validate-before-publish (`gate.py`) guarantees nothing invalid is published; the constraint makes something valid
likely, on a small model too. It is the whole turn the model writes, as one GBNF grammar (`grammar.py`):

    root ::= LEAD ANSWER
    LEAD   — the family's reasoning section, let through to its closing tag (`Family.reasoning_lead`): text that
             ends with the first `</think>` when the prompt left the model in its reasoning; an optional
             `<think>…</think>` where the model opens it itself (Qwen3); nothing when thinking is off.
    ANSWER — a JSON object held to `text.format`'s schema (any object for `json_object`), or, when `tool_choice`
             is `required` or names a function, the family's calls (`Family.call_grammar`), a `strict` tool's
             arguments held to its schema.

An opener the model may write itself is let through only where it is one token of the model's vocabulary (Qwen3's
`<think>`): a model that never learnt it (SmolLM2 under the same ChatML family) would otherwise be led, by a first
`<`, into a reasoning section it never closes.

No grammar (None) where the turn may be either text or a call (tools offered with `tool_choice` auto: holding it
to JSON would forbid the call), for plain text, and for a turn continued after a cut (the grammar begins where
the turn begins). The engine ends the turn once the grammar is complete (only end-of-turn tokens are left).
"""

from __future__ import annotations

from typing import Callable

from ..families.base import Family, ReasoningLead
from ..neutral.conversation import Conversation, NamedToolChoice
from ..structured.grammar import Grammar, literal


def turn_grammar(conversation: Conversation, family: Family, is_token: Callable[[str], bool]) -> str | None:
    """The GBNF grammar `conversation`'s next turn is held to, or None when it is not held. `is_token(text)`: whether
    `text` is a single token of the model's vocabulary."""
    grammar = Grammar()
    answer = _answer(grammar, conversation, family)
    if answer is None:
        return None
    lead = _lead(grammar, family.reasoning_lead(conversation), is_token)
    return grammar.text(f"{lead} {answer}".strip())


def _answer(grammar: Grammar, conversation: Conversation, family: Family) -> str | None:
    choice = conversation.tool_choice
    if conversation.tools:
        if choice == "required":
            tools = conversation.tools
        elif isinstance(choice, NamedToolChoice):
            tools = tuple(tool for tool in conversation.tools if tool.name == choice.name)
        else:
            return None  # text or a call: either may come
        return family.call_grammar(grammar, tools, conversation.parallel_tool_calls) if tools else None
    output = conversation.output
    if output is None:
        return None
    value = grammar.json_value(output.schema) if output.schema is not None else grammar.any_object()
    return f"{grammar.ws} {value}"


def _lead(grammar: Grammar, lead: ReasoningLead, is_token: Callable[[str], bool]) -> str:
    if lead.in_reasoning:
        return f"{grammar.text_until(lead.think_close)} {grammar.ws}"
    if lead.think_open is not None and is_token(lead.think_open):
        return f"( {literal(lead.think_open)} {grammar.text_until(lead.think_close)} {grammar.ws} )?"
    return ""
