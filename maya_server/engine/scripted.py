"""The scripted engine: replays prepared completions token by token.

A legitimate engine for deterministic protocol tests (and demos): each request
gets the next scripted completion (the last one repeats), written as the raw
model text, reasoning and tool-call syntax included. It tokenizes with
`ScriptTokenizer`, a real if simple vocabulary built as text arrives. What it
was asked is not kept here: the server never reads it (the tests' own
`tests/scripted.py` records it).

Script entries are strings, or objects `{"text": ..., "fail_after": N}` that
raise an engine failure after N tokens, or `{"pieces": [...]}`: the tokens as
the model wrote them, one id each piece (a tag as its special token), which
may split a text where the tokenizer would not (a model's sampling does).

A prompt that already ends with the beginning of its entry (a turn cut short, written back to be continued: a
background task taken over from a replica that stopped) gets the rest of the entry, as a deterministic model
would write it.
"""

from __future__ import annotations

import asyncio
import re
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import AsyncIterator, Sequence

import orjson

from ..errors import EngineError
from .base import (
    DEFAULT_CTX, Counts, Engine, Finish, GeneratedToken, Generation, SamplingParams, StreamItem, reusable_prefix_length,
)

# Special-looking tags (<|user|>, </think>, <｜Assistant｜>, [gMASK]) stay one token;
# other text splits into words with their leading space, at most 8 characters each.
_TOKEN_PATTERN = re.compile(r"<[^<>\s]{1,48}>|\[[A-Za-z]{2,12}\]|\s*[^\s<\[]{1,8}|\s+|.", re.DOTALL)
_SPECIAL_PATTERN = re.compile(r"<[^<>\s]{1,48}>|\[[A-Za-z]{2,12}\]")


VOCABULARY_LIMIT = 65_536
"""Pieces the scripted vocabulary may learn: every prompt passes through it, so unbounded growth
would be a memory leak any client could drive. Past it, a new piece is spelled by its characters,
and a character never seen is the one unknown token."""
UNKNOWN_PIECE = "\ufffd"


class ScriptTokenizer:
    """A vocabulary that grows as it sees text, up to `limit` pieces; ids are stable within one tokenizer."""

    def __init__(self, limit: int = VOCABULARY_LIMIT) -> None:
        self.limit = limit
        self._pieces: list[str] = [UNKNOWN_PIECE]
        self._ids: dict[tuple[str, bool], int] = {(UNKNOWN_PIECE, False): 0}
        self._growing = threading.Lock()

    @property
    def size(self) -> int:
        return len(self._pieces)

    def _id(self, piece: str, special: bool) -> int | None:
        key = (piece, special)
        found = self._ids.get(key)
        if found is None:
            with self._growing:  # large prompts are tokenized in worker threads
                found = self._ids.get(key)
                if found is None and len(self._pieces) < self.limit:
                    found = self._ids[key] = len(self._pieces)
                    self._pieces.append(piece)
        return found

    def _plain_ids(self, piece: str) -> list[int]:
        found = self._id(piece, False)
        if found is not None:
            return [found]
        return [self._id(ch, False) or 0 for ch in piece]  # the vocabulary is full: spell it out

    def encode(self, text: str, *, special: bool) -> list[int]:
        ids = []
        for match in _TOKEN_PATTERN.finditer(text):
            piece = match.group(0)
            is_special = special and _SPECIAL_PATTERN.fullmatch(piece) is not None
            if not is_special and _SPECIAL_PATTERN.fullmatch(piece):
                for ch in piece:  # plain text never forms a control token
                    ids.extend(self._plain_ids(ch))
            elif is_special:
                found = self._id(piece, True)
                ids.append(found if found is not None else 0)
            else:
                ids.extend(self._plain_ids(piece))
        return ids

    def decode(self, ids: Sequence[int]) -> str:
        return "".join(self._pieces[i] for i in ids)

    def piece_id(self, piece: str) -> int:
        """One id for `piece` as a model would write it: a tag as its special token, other text as one piece."""
        found = self._id(piece, _SPECIAL_PATTERN.fullmatch(piece) is not None)
        return found if found is not None else 0


@dataclass(frozen=True)
class ScriptEntry:
    text: str
    fail_after: int | None = None
    pieces: tuple[str, ...] | None = None
    """The tokens as written, when the entry spells them (their join is `text`)."""

    @classmethod
    def parse(cls, raw: object) -> "ScriptEntry":
        if isinstance(raw, str):
            return cls(raw)
        if isinstance(raw, dict) and isinstance(raw.get("pieces"), list) and raw["pieces"] \
                and all(isinstance(p, str) and p for p in raw["pieces"]):
            return cls("".join(raw["pieces"]), pieces=tuple(raw["pieces"]))
        if isinstance(raw, dict) and isinstance(raw.get("text"), str):
            fail_after = raw.get("fail_after")
            if fail_after is not None and (not isinstance(fail_after, int) or fail_after < 0):
                raise ValueError("fail_after must be a nonnegative integer")
            return cls(raw["text"], fail_after)
        raise ValueError("script entries must be strings, {\"text\": ..., \"fail_after\": N} or "
                         "{\"pieces\": [non-empty strings]} objects")

    def ids(self, tokenizer: "ScriptTokenizer") -> list[int]:
        """The entry's generated ids: the tokenizer's, or one id a piece as the entry spells them."""
        if self.pieces is None:
            return tokenizer.encode(self.text, special=True)
        return [tokenizer.piece_id(piece) for piece in self.pieces]


class ScriptedEngine(Engine):
    name = "scripted"
    images_refusal = "the scripted test engine takes no images"

    def __init__(self, script: Sequence[object], *, context_size: int = DEFAULT_CTX, delay: float = 0.0, slots: int = 1) -> None:
        if not script:
            raise ValueError("the script needs at least one completion")
        self.entries = [ScriptEntry.parse(item) for item in script]
        self.context_size = context_size
        self.delay = delay
        self.slots = slots
        self.tokenizer = ScriptTokenizer()
        for entry in self.entries:  # the script's own pieces come first, so a full vocabulary never garbles it
            entry.ids(self.tokenizer)
        self._last: tuple[str | None, list[int]] = (None, [])
        """The last prompt's cache salt and ids: one slot, reused only by a prompt of the same salt."""

    @classmethod
    def from_file(cls, path: str, **kwargs) -> "ScriptedEngine":
        data = orjson.loads(Path(path).read_bytes())
        if not isinstance(data, list):
            raise ValueError(f"{path} must hold a JSON list of completions")
        return cls(data, **kwargs)

    def _next_entry(self) -> ScriptEntry:
        return self.entries.pop(0) if len(self.entries) > 1 else self.entries[0]

    async def _stream(self, generation: Generation) -> AsyncIterator[StreamItem]:
        entry = self._next_entry()
        salt, last_ids = self._last
        cached = reusable_prefix_length(last_ids, generation.prompt_ids) if salt == generation.cache_salt else 0
        self._last = (generation.cache_salt, list(generation.prompt_ids))
        yield Counts(prompt_tokens=len(generation.prompt_ids), cached_tokens=cached)
        for generated, (token_id, text) in enumerate(self._rest(entry, generation.prompt_ids)):
            if generation.cancelled:
                return
            if entry.fail_after is not None and generated >= entry.fail_after:
                raise EngineError("the scripted engine failed as its script asked")
            finish = _finish_before(token_id, generated, generation.params)
            if finish is not None:
                yield finish
                return
            await asyncio.sleep(self.delay)
            yield GeneratedToken(token_id, text)
        yield Finish("stop")

    def _rest(self, entry: ScriptEntry, prompt_ids: Sequence[int]) -> list[tuple[int, str]]:
        """The entry's tokens after what the prompt already ends with of it: all of them for the usual prompt; a
        token the prompt ends inside of is written from there on (as a model goes on from a cut mid-token)."""
        ids = entry.ids(self.tokenizer)
        pieces = [(token_id, self.tokenizer.decode([token_id])) for token_id in ids]
        tail = prompt_ids[-(2 * len(ids) + 8):]  # enough to hold any beginning of the entry, not the whole prompt
        written = _written(self.tokenizer.decode(tail), entry.text)
        rest, start = [], 0
        for token_id, text in pieces:
            end = start + len(text)
            if end > written:
                if start >= written:
                    rest.append((token_id, text))
                else:  # the prompt ends inside this token
                    rest += [(i, self.tokenizer.decode([i])) for i in self.tokenizer.encode(text[written - start:],
                                                                                          special=True)]
            start = end
        return rest


def _written(prompt: str, text: str) -> int:
    """How many of the entry's first characters the prompt ends with (0: none, the usual prompt). Only a
    beginning with some visible text of its own counts: a prompt that ends with the tag the entry opens with
    (a generation prompt's `<think>`) has not begun writing it."""
    if not prompt:
        return 0
    last = prompt[-1]
    for count in range(len(text), 0, -1):
        if text[count - 1] == last and prompt.endswith(text[:count]) and \
                _SPECIAL_PATTERN.sub("", text[:count]).strip():
            return count
    return 0


def _finish_before(token_id: int, generated: int, params: SamplingParams) -> Finish | None:
    """How the sequence ends before `token_id`, the next token after `generated` ones: a stop id, `max_tokens`."""
    if token_id in params.stop_token_ids:
        return Finish("stop")
    if generated >= params.max_tokens:
        return Finish("length")
    return None
