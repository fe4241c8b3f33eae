"""The family boundary.

A family is what Maya knows of one kind of model: its prompt format, tool-call syntax
and reasoning markers, nothing about HTTP. `--family` names it, `detection.py` reads it
from the model's chat template. Example::

    family = get_family("glm")
    prompt = family.render(conversation)          # Prompt of control/plain segments
    ids = prompt.token_ids(tokenizer)
    parser = family.parser(conversation, new_call_id)
    for piece in engine_text_pieces:
        for event in parser.feed(piece):
            ...
    events = parser.finish("stop")                 # or "length"
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Literal, Protocol, Sequence

from ..neutral.conversation import Conversation, PartialTurn, ToolSpec
from ..neutral.events import ParserEvent
from ..model.tokenizer import Prompt
from ..structured.grammar import Grammar

EndReason = Literal["stop", "length"]


class StreamParser(Protocol):
    def feed(self, text: str) -> list[ParserEvent]:
        """Consume the next piece of model output (any split); return the events it completes."""

    def finish(self, reason: EndReason) -> list[ParserEvent]:
        """The stream ended: by end-of-turn (`stop`) or by the output limit (`length`)."""

    def record_raw(self) -> None:
        """From now on, keep each piece of text read (for `take_raw`): a background task logs the model's own
        text, so that a turn cut short is written back as the model wrote it (`continuation.py`)."""

    def take_raw(self) -> list[tuple[int, str, bool]]:
        """The pieces read since the last call, once `record_raw` was called: (how many of the events returned
        since the last call came before the piece, its text, whether it was read as a tag)."""


@dataclass(frozen=True)
class ReasoningLead:
    """What a model writes before its answer, as the rendered prompt leaves it: the reasoning section a constraint
    must let through to its end (`pipeline/constraint.py`), as the family's parser reads it."""

    in_reasoning: bool
    """The prompt ends inside the reasoning: the model writes it, then `think_close`, then the answer."""
    think_open: str | None = None
    """An opener the model may write first itself (Qwen3), then its reasoning and `think_close`; None: it opens none."""
    think_close: str = "</think>"


class Family(Protocol):
    name: str
    stop_texts: tuple[str, ...]
    """Special-token texts that end the assistant's turn."""

    def render(self, conversation: Conversation) -> Prompt:
        """The prompt the model's official template produces, ending with the assistant's generation prompt."""

    def continuation(self, conversation: Conversation, partial: PartialTurn) -> Prompt:
        """What the model had written of a turn cut short, to follow `render(conversation)` (`continuation.py`):
        the model's own text when the task's log kept it (`continuation.written_back`, the same for every family),
        else the items in the family's syntax; `EngineError` when this family cannot write those back."""

    def parser(self, conversation: Conversation, new_call_id: Callable[[], str]) -> StreamParser:
        """A fresh incremental parser for one generation of `conversation`.

        It knows the declared tools (to type arguments) and whether the rendered
        generation prompt left the model inside its reasoning block.
        """

    def reasoning_lead(self, conversation: Conversation) -> ReasoningLead:
        """What the model writes before its answer to `render(conversation)`."""

    def call_grammar(self, grammar: Grammar, tools: Sequence[ToolSpec], parallel: bool) -> str | None:
        """The rule for a turn of calls to `tools` (one, or one or more with `parallel`) in the family's syntax
        (`call_grammars.py`); None where a grammar cannot say it."""
