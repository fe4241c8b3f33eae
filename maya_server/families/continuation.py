"""An assistant turn cut short, written back after the generation prompt as the model wrote it, so that the model
writes the rest (a background task taken over from a replica that stopped: `responses/background/resumable.py`).

The written text is also what the family's parser is fed, its events dropped, before the new tokens: the parser
then stands where it stood when the turn was cut (inside the reasoning, inside a tool call's arguments), and the
call indices it hands out go on from the published ones.

The task's log keeps the model's own text with the events it made (`RawOutput`, `PartialTurn.raw`), so the turn is
written back byte for byte whatever the family's syntax (`written_back`): reasoning whether empty or not, `</think>`,
whitespace the published items trim, and a tool call cut anywhere, in GLM's, DSML's or any other tags, with no
family code. A tag the parser read is written as a control segment (its special tokens are the model's), the rest
as plain text, as the model's own output would have been tokenized.

A log without that text (written by a replica older than this code) falls back to the items: GLM and DeepSeek-V4
write reasoning, then `</think>`, then the answer (`think_first`); their calls are published as JSON arguments,
which do not give back the text the model wrote, so such a turn cut inside or after a call is refused
(`EngineError`); ChatML's Hermes calls are JSON on both sides and continue (`chatml.py`).
"""

from __future__ import annotations

from ..errors import EngineError
from ..model.tokenizer import Prompt, PromptBuilder
from ..neutral.conversation import PartialTurn


def written_back(partial: PartialTurn) -> Prompt | None:
    """The cut turn exactly as the model wrote it, from the text its log kept; None when the log kept none."""
    if partial.raw is None:
        return None
    builder = PromptBuilder()
    for text, tag in partial.raw:
        if tag:
            builder.control(text)
        else:
            builder.plain(text)
    return builder.build()


def think_first(partial: PartialTurn, family: str, in_reasoning: bool | None = None) -> Prompt:
    """The partial turn of a family whose generation prompt leaves the model in its reasoning (or past it): as the
    model wrote it when the log kept its text; else the reasoning as plain text, `</think>` once it closed, then the
    answer. `in_reasoning`: whether the generation prompt left the model in its reasoning, when the family knows
    (then a turn whose reasoning was empty, so never published, gets its `</think>` before the answer)."""
    written = written_back(partial)
    if written is not None:
        return written
    builder = PromptBuilder()
    closed = not in_reasoning
    for item in partial.items:
        if item.kind == "call":
            raise EngineError(f"a {family} turn cut after a tool call began cannot be continued on another replica")
        if item.kind != "reasoning" and not closed:
            builder.control("</think>")
        builder.plain(item.text)
        closed = closed or item.kind != "reasoning" or item.done
        if item.kind == "reasoning" and item.done:
            builder.control("</think>")
    return builder.build()
