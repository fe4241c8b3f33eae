"""The tokenizer boundary: turn rendered prompts into token ids.

A prompt is a list of segments. Control segments (special tokens the dialect
wrote: role markers, BOS, tool tags) are tokenized with special-token parsing;
every other segment, user text above all, is tokenized as plain text, so a user
who types `<|im_end|>` never closes a turn.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, Sequence


class Tokenizer(Protocol):
    def encode(self, text: str, *, special: bool) -> list[int]:
        """Token ids of `text`, without BOS; `special` parses special tokens in it."""

    def decode(self, ids: Sequence[int]) -> str:
        """Text of the ids, special tokens rendered as their text."""


@dataclass(frozen=True)
class Segment:
    text: str
    control: bool = False


@dataclass(frozen=True)
class Prompt:
    """A rendered prompt: control and plain segments in order."""

    segments: tuple[Segment, ...]

    @property
    def text(self) -> str:
        return "".join(s.text for s in self.segments)

    def token_ids(self, tokenizer: Tokenizer) -> list[int]:
        """Tokenize run by run: adjacent plain segments are merged first, as the model would see them."""
        ids: list[int] = []
        for text, control in self._runs():
            ids.extend(tokenizer.encode(text, special=control))
        return ids

    def _runs(self) -> list[tuple[str, bool]]:
        runs: list[tuple[str, bool]] = []
        for seg in self.segments:
            if not seg.text:
                continue
            if runs and runs[-1][1] == seg.control and not seg.control:
                runs[-1] = (runs[-1][0] + seg.text, False)
            else:
                runs.append((seg.text, seg.control))
        return runs


class PromptBuilder:
    """Collects segments; dialect renderers write through it."""

    def __init__(self) -> None:
        self._segments: list[Segment] = []

    def control(self, text: str) -> "PromptBuilder":
        self._segments.append(Segment(text, True))
        return self

    def plain(self, text: str) -> "PromptBuilder":
        self._segments.append(Segment(text, False))
        return self

    def build(self) -> Prompt:
        return Prompt(tuple(self._segments))
