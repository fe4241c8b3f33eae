"""The tokenizer boundary: turn rendered prompts into token ids.

A prompt is a list of segments. Control segments (special tokens the family
wrote: role markers, BOS, tool tags) are tokenized with special-token parsing;
every other segment, user text above all, is tokenized as plain text, so a user
who types `<|im_end|>` never closes a turn. A media segment is where an image
goes: it has no token ids of its own (the engine puts the image's embeddings
there), only a position in the ids.
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
    media: bool = False
    """An image's place; `text` is the family's image token, kept for `Prompt.text` only."""


@dataclass(frozen=True)
class Prompt:
    """A rendered prompt: control and plain segments in order."""

    segments: tuple[Segment, ...]

    @property
    def text(self) -> str:
        return "".join(s.text for s in self.segments)

    def token_ids(self, tokenizer: Tokenizer) -> list[int]:
        """Tokenize run by run: adjacent plain segments are merged first, as the model would see them."""
        return self.tokenize(tokenizer)[0]

    def tokenize(self, tokenizer: Tokenizer) -> tuple[list[int], tuple[int, ...]]:
        """The ids and, for each media segment in order, the index in the ids where its image goes."""
        ids: list[int] = []
        media: list[int] = []
        for text, control in self._runs():
            if text is None:
                media.append(len(ids))
            else:
                ids.extend(tokenizer.encode(text, special=control))
        return ids, tuple(media)

    def plain_text_spells_control(self, tokenizer: Tokenizer) -> bool:
        """Whether some plain run would tokenize differently with special-token parsing on, i.e. it spells
        one of the model's control tokens. Harmless while prompts travel as ids; an engine that takes a
        prompt only as text (llama-server's multimodal prompt) would read that spelling as the token."""
        return any(
            tokenizer.encode(text, special=True) != tokenizer.encode(text, special=False)
            for text, control in self._runs() if text is not None and not control
        )

    def _runs(self) -> list[tuple[str | None, bool]]:
        runs: list[tuple[str | None, bool]] = []
        for seg in self.segments:
            if seg.media:
                runs.append((None, False))
            elif not seg.text:
                continue
            elif runs and runs[-1][0] is not None and runs[-1][1] == seg.control and not seg.control:
                runs[-1] = (runs[-1][0] + seg.text, False)
            else:
                runs.append((seg.text, seg.control))
        return runs


class PromptBuilder:
    """Collects segments; family renderers write through it."""

    def __init__(self) -> None:
        self._segments: list[Segment] = []

    def control(self, text: str) -> "PromptBuilder":
        self._segments.append(Segment(text, True))
        return self

    def plain(self, text: str) -> "PromptBuilder":
        self._segments.append(Segment(text, False))
        return self

    def media(self, text: str) -> "PromptBuilder":
        """An image's place, written where the family's template puts its image token `text`."""
        self._segments.append(Segment(text, media=True))
        return self

    def build(self) -> Prompt:
        return Prompt(tuple(self._segments))
