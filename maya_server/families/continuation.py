"""An assistant turn cut short, written back after the generation prompt as the model wrote it, so that the model
writes the rest (a background task taken over from a replica that stopped: `responses/resumable.py`).

The written text is also what the family's parser is fed, its events dropped, before the new tokens: the parser
then stands where it stood when the turn was cut (inside the reasoning, inside a tool call's arguments), and the
call indices it hands out go on from the published ones.

GLM and DeepSeek-V4 write reasoning, then `</think>`, then the answer: those continue the same way. Their tool
calls (GLM's `<arg_key>`/`<arg_value>` pairs, DeepSeek's DSML parameters) are published as JSON arguments, which
do not give back the exact text the model wrote, so a turn cut inside or after a call of theirs is refused
(`EngineError`); ChatML's Hermes calls are JSON on both sides and continue (`chatml.py`).
"""

from __future__ import annotations

from ..errors import EngineError
from ..model.tokenizer import Prompt, PromptBuilder
from ..neutral.conversation import PartialTurn


def think_first(partial: PartialTurn, family: str) -> Prompt:
    """The partial turn of a family whose generation prompt leaves the model in its reasoning (or past it): the
    reasoning as plain text, `</think>` once it closed, then the answer."""
    builder = PromptBuilder()
    for item in partial.items:
        if item.kind == "call":
            raise EngineError(f"a {family} turn cut after a tool call began cannot be continued on another replica")
        builder.plain(item.text)
        if item.kind == "reasoning" and item.done:
            builder.control("</think>")
    return builder.build()
