"""The tokenizer boundary: turn rendered prompts into token ids.

A prompt is a list of segments. Control segments (special tokens the family
wrote: role markers, BOS, tool tags) are tokenized with special-token parsing;
every other segment, user text above all, is tokenized as plain text, so a user
who types `<|im_end|>` never closes a turn. A media segment is where an image
goes: it has no token ids of its own (the engine puts the image's embeddings
there), only a position in the ids. A spelled segment carries the ids the
model generated for its text (`spelling.py`) and is used as they are.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator, Protocol, Sequence


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
    ids: tuple[int, ...] | None = None
    """The ids the model generated for `text` (`spelling.py`): a run of its own, not tokenized again."""
    apart: bool = False
    """Plain text that starts a run of its own: the text before it is not merged with it, so a token spelled
    across the boundary is never read (`control_text.ControlVocabulary.write_client`)."""


@dataclass(frozen=True)
class AssistantSpan:
    """Where the family wrote one assistant turn (`segments[start:end]`); `turn` is what its spelling is
    recalled by."""

    start: int
    end: int
    turn: object


@dataclass(frozen=True)
class Prompt:
    """A rendered prompt: control and plain segments in order, and where its assistant turns are."""

    segments: tuple[Segment, ...]
    assistant_spans: tuple[AssistantSpan, ...] = ()

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
        for text, control, spelled in _runs(self.segments):
            if text is None:
                media.append(len(ids))
            elif spelled is not None:
                ids.extend(spelled)
            else:
                ids.extend(tokenizer.encode(text, special=control))
        return ids, tuple(media)

    def plain_text_spells_control(self, tokenizer: Tokenizer) -> bool:
        """Whether some plain run would tokenize differently with special-token parsing on, i.e. it spells
        one of the model's control tokens. Harmless while prompts travel as ids; an engine that takes a
        prompt only as text (llama-server's multimodal prompt) would read that spelling as the token."""
        return any(
            tokenizer.encode(text, special=True) != tokenizer.encode(text, special=False)
            for text, control, _ in _runs(self.segments) if text is not None and not control
        )


def _runs(segments: Sequence[Segment]) -> list[tuple[str | None, bool, tuple[int, ...] | None]]:
    """(text, control, spelled ids) per run: adjacent plain segments merged, a media segment's text None, a
    spelled segment a run of its own."""
    runs: list[tuple[str | None, bool, tuple[int, ...] | None]] = []
    mergeable = False
    for seg in segments:
        if seg.media:
            runs.append((None, False, None))
            mergeable = False
        elif not seg.text:
            continue
        elif seg.ids is not None:
            runs.append((seg.text, False, seg.ids))
            mergeable = False
        elif mergeable and not seg.control and not seg.apart:
            runs[-1] = (runs[-1][0] + seg.text, False, None)
        else:
            runs.append((seg.text, seg.control, None))
            mergeable = not seg.control
    return runs


class PromptBuilder:
    """Collects segments; family renderers write through it."""

    def __init__(self) -> None:
        self._segments: list[Segment] = []
        self._spans: list[AssistantSpan] = []

    def control(self, text: str) -> "PromptBuilder":
        self._segments.append(Segment(text, True))
        return self

    def plain(self, text: str) -> "PromptBuilder":
        self._segments.append(Segment(text, False))
        return self

    def plain_apart(self, text: str) -> "PromptBuilder":
        """Plain text that the plain text before it is not merged with (`Segment.apart`)."""
        self._segments.append(Segment(text, apart=True))
        return self

    def media(self, text: str) -> "PromptBuilder":
        """An image's place, written where the family's template puts its image token `text`."""
        self._segments.append(Segment(text, media=True))
        return self

    @contextmanager
    def assistant(self, turn: object) -> Iterator["PromptBuilder"]:
        """Mark what is written inside as the assistant turn `turn`, so its generated ids can be recalled."""
        start = len(self._segments)
        yield self
        self._spans.append(AssistantSpan(start, len(self._segments), turn))

    def build(self) -> Prompt:
        return Prompt(tuple(self._segments), tuple(self._spans))
