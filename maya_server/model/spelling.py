"""An assistant turn spelled again with the ids the model generated for it.

Why: an engine's prompt cache holds the ids it generated, not a tokenization of
their text. A model may write a text with ids that tokenizing the text again
would not give (sampling picks `" hel" "lo"` where the tokenizer writes
`" hello"`), and the turn's history then differs from the cache from that
token on. Spelled with its own ids, the continuation's prompt is id for id
what the engine already holds.

Where it is safe: the generated text must appear, whole, inside the span the
family wrote for that turn, and the ids must keep the span's control structure:
each control segment the region covers is met, in order, by the same control
ids, and the plain text between is what the ids between decode to. So a
spelling can never turn plain text into a control token the prompt did not
already have there, nor move one. Text cut at the region's ends is tokenized
as its own run: the engine read the generation prompt that way too.

Which ids belong to a turn is the caller's `Recall` (the generation service
remembers its own generations, `pipeline/spellings.py`).
"""

from __future__ import annotations

from typing import Callable, Sequence

from .tokenizer import Prompt, Segment, Tokenizer

Recall = Callable[[object], Sequence[int] | None]
"""An assistant turn → the ids the model generated for it, if they are still known."""


def respelled(prompt: Prompt, tokenizer: Tokenizer, recall: Recall) -> Prompt:
    """`prompt` with each assistant turn whose ids `recall` knows spelled with them, where they fit."""
    recalled = [(span, recall(span.turn)) for span in prompt.assistant_spans]
    recalled = [(span, ids) for span, ids in recalled if ids]
    if not recalled:
        return prompt
    control_ids = {i for seg in prompt.segments if seg.control for i in tokenizer.encode(seg.text, special=True)}
    segments = list(prompt.segments)
    for span, ids in reversed(recalled):  # from the end, so the earlier spans' indices still hold
        spelled = _spelled_span(segments[span.start:span.end], tuple(ids), tokenizer, control_ids)
        if spelled is not None:
            segments[span.start:span.end] = spelled
    return Prompt(tuple(segments))


def _spelled_span(span: list[Segment], ids: tuple[int, ...], tokenizer: Tokenizer,
                  control_ids: set[int]) -> list[Segment] | None:
    """The span's segments with the region the ids spell replaced by one spelled segment; None when they do not
    fit (not found in the span, a control segment cut, the control structure not kept)."""
    if any(seg.media or seg.ids is not None for seg in span):
        return None
    text = tokenizer.decode(ids)
    start = "".join(seg.text for seg in span).rfind(text) if text else -1  # the turn ends with what was generated
    if start < 0:
        return None
    cut = _cut(span, start, start + len(text))
    if cut is None:
        return None
    before, region, after = cut
    if _structure(region, tokenizer) != _spelled_structure(ids, tokenizer, control_ids):
        return None
    return before + [Segment(text, ids=ids)] + after


def _cut(span: list[Segment], start: int, end: int) -> tuple[list[Segment], list[Segment], list[Segment]] | None:
    """The span's segments before, inside and after the text offsets [start, end); plain segments are cut
    where needed, a control segment never (None)."""
    before: list[Segment] = []
    region: list[Segment] = []
    after: list[Segment] = []
    offset = 0
    for seg in span:
        low, high = offset, offset + len(seg.text)
        offset = high
        if seg.control and (low < start < high or low < end < high):
            return None
        for part, lo, hi in ((before, low, min(high, start)), (region, max(low, start), min(high, end)),
                             (after, max(low, end), high)):
            if lo < hi:
                part.append(seg if (lo, hi) == (low, high) else Segment(seg.text[lo - low:hi - low], seg.control))
    return before, region, after


Structure = list[tuple[bool, object]]
"""(True, control ids) and (False, plain text), alternating: what a region is made of."""


def _structure(region: list[Segment], tokenizer: Tokenizer) -> Structure:
    structure: Structure = []
    for seg in region:
        if seg.control:
            _extend(structure, True, tuple(tokenizer.encode(seg.text, special=True)))
        else:
            _extend(structure, False, seg.text)
    return structure


def _spelled_structure(ids: tuple[int, ...], tokenizer: Tokenizer, control_ids: set[int]) -> Structure:
    structure: Structure = []
    plain: list[int] = []
    for token in ids:
        if token in control_ids:
            if plain:
                _extend(structure, False, tokenizer.decode(plain))
                plain = []
            _extend(structure, True, (token,))
        else:
            plain.append(token)
    if plain:
        _extend(structure, False, tokenizer.decode(plain))
    return structure


def _extend(structure: Structure, control: bool, value) -> None:
    """Append, joining a piece of the same kind (adjacent control segments, plain text split in two)."""
    if not value:
        return
    if structure and structure[-1][0] == control:
        structure[-1] = (control, structure[-1][1] + value)
    else:
        structure.append((control, value))
