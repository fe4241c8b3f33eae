"""Writing a template's literal text with its special tokens as control segments.

Official templates write tags such as `<tool_call>` or `｜DSML｜` inside longer
literal strings (tool instructions, DSML markup), and the model's tokenizer
turns each into a single added token. We write those literals through a
vocabulary of the family's added tokens so they become control segments, while
anything that came from a client is written as plain text and can never become
a control token.
"""

from __future__ import annotations

import re
from typing import Iterable

from ..model.tokenizer import PromptBuilder


class ControlVocabulary:
    """The added-token texts of one model family."""

    def __init__(self, tokens: Iterable[str]) -> None:
        ordered = sorted(set(tokens), key=len, reverse=True)
        self._pattern = re.compile("|".join(re.escape(t) for t in ordered))
        self._starts = re.compile("(?=" + "|".join(re.escape(t) for t in ordered) + ")")

    def write(self, builder: PromptBuilder, literal: str) -> None:
        """Write template-owned text: known tokens as control segments, the rest plain."""
        pos = 0
        for match in self._pattern.finditer(literal):
            builder.plain(literal[pos:match.start()])
            builder.control(match.group())
            pos = match.end()
        builder.plain(literal[pos:])

    def write_client(self, builder: PromptBuilder, text: str) -> None:
        """Write client text so that no spelling of a vocabulary token in it becomes that token: the text is cut
        one character into each spelling, and every piece after a cut is tokenized as a run of its own."""
        cuts = [m.start() + 1 for m in self._starts.finditer(text)]
        if not cuts:
            builder.plain(text)
            return
        builder.plain(text[:cuts[0]])
        for start, end in zip(cuts, cuts[1:] + [len(text)]):
            builder.plain_apart(text[start:end])
