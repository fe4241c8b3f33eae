"""Upstream chunks → `GeneratedToken`s: decode ids, stop on turn-ending ids, count them.

Pure (no I/O), so the rules are testable without an upstream:

- Chunks with ids: each id is one token, decoded with our own tokenizer; an
  id in `stop_ids` ends the turn and is never yielded; `max_tokens` is kept
  even if the upstream overshoots.
- Chunks with text only: the text is the token (whole characters: upstreams
  hold back partial ones), cut before any stop token's text.
- The upstream's final `completion_tokens`, where it sends one, replaces the
  count of tokens taken: it is the engine's own count, the one an
  OpenAI-compatible server reports, and it includes the turn-ending token
  that Maya never yields (vLLM, SGLang and llama-server all count it).
- `cached_tokens` comes from the upstream's usage or llama-server's timings.

llama-server sends no chunk for a token that ends inside a character (U+2028 is two
SmolLM2 tokens, an emoji often three): that token's id never arrives, and the next
chunk carries only the id that completes the character, with the character's whole
text. With `text_mends_ids` (llama-server), a chunk whose text is not what its ids
decode to is such a chunk: its text is taken as the token's, and the final usage gives
the real count. (A control token's text is empty there, so it is never mistaken for one.)

A read of several plain token events (`wire.token_run`) may be fed whole (`takes_whole`, `feed_run`):
one decode for all its ids and one piece, the same text as its events fed one by one; a read that ends the turn,
or whose text would have to mend ids event by event, is fed one by one.

The counts are the engine's own (`counts()`, for `Engine.generate`): the ids
taken until the final usage replaces them, not the pieces yielded (a character held back at the end comes as one
more piece of the last id). `counts_news` says when `generate` must be told.

After we end the turn, a couple more events are read for the upstream's own
finish and usage; if the upstream goes on generating, `ended_by_us` tells the
engine to close the request. Once the upstream has finished, the remaining
events are read only for their usage.
"""

from __future__ import annotations

from typing import AbstractSet

from ...errors import UpstreamError
from ...model.tokenizer import Tokenizer
from ..base import Counts, EngineFinishReason, GeneratedToken
from ..detokenizer import IncrementalDetokenizer
from .wire import TokenRun, UpstreamChunk

UNKNOWN_ID = -1
"""The id of a token whose upstream sent text only."""
GRACE_EVENTS = 2
"""Events still read after we ended the turn, for the upstream's own finish and usage (llama-server sends
the end-of-generation token, then its finish with the usage); an upstream still generating is then cut off."""


class TokenStream:
    def __init__(self, tokenizer: Tokenizer, stop_ids: AbstractSet[int], max_tokens: int, *,
                 text_mends_ids: bool = False) -> None:
        self._tokenizer = tokenizer
        self._text_mends_ids = text_mends_ids
        self._ids_missing = False
        self._stop_ids = stop_ids
        self._stop_texts = tuple(t for t in (tokenizer.decode([i]) for i in sorted(stop_ids)) if t)
        self._max_tokens = max_tokens
        self.generated_tokens = 0
        self.cached_tokens: int | None = None
        self._detokenizer = IncrementalDetokenizer(tokenizer)
        self._ours: EngineFinishReason | None = None
        self._upstream: str | None = None
        self._upstream_count: int | None = None
        self._last_id = UNKNOWN_ID
        self._events_after_stop = 0
        self.text_only = False
        self._counts_given = False
        self._cached_given: int | None = None

    @property
    def finish_reason(self) -> str | None:
        return self._ours or self._upstream

    @property
    def ended_by_us(self) -> bool:
        """We ended the turn and the upstream, given its grace, has not: time to close the request."""
        return self._ours is not None and self._upstream is None and self._events_after_stop >= GRACE_EVENTS

    def feed(self, chunk: UpstreamChunk) -> list[GeneratedToken]:
        if chunk.cached_tokens is not None:
            self.cached_tokens = chunk.cached_tokens
        if chunk.completion_tokens is not None:
            self._upstream_count = chunk.completion_tokens
        tokens: list[GeneratedToken] = []
        if self._ours is not None:
            self._events_after_stop += 1
        elif self._upstream is None:
            tokens = self._from_ids(chunk.token_ids, chunk.text) if chunk.token_ids is not None \
                else self._from_text(chunk.text)
        if chunk.finish_reason is not None and self._upstream is None:
            self._upstream = chunk.finish_reason
        if self.finish_reason is not None:
            tail = self._detokenizer.flush()  # text held back for a character the turn ended inside
            if tail:
                tokens.append(GeneratedToken(self._last_id, tail, ()))
        return tokens

    def takes_whole(self, run: TokenRun) -> bool:
        """Whether a read's run of token events (`wire.token_run`) goes down the stream whole: it has ids,
        the turn goes on, none of them ends it (a stop id, `max_tokens`) and, where the text mends the ids, each
        event had ids and text of its own (`aligned`). Otherwise its events are fed one by one."""
        ids = run.ids
        return (bool(ids) and self._ours is None and self._upstream is None and self._stop_ids.isdisjoint(ids)
                and self.generated_tokens + len(ids) <= self._max_tokens
                and (run.aligned or not self._text_mends_ids))

    def feed_run(self, run: TokenRun) -> GeneratedToken:
        """A run that `takes_whole` let through, as one piece (`id` its last id, `ids` all of them, as `together`
        makes one of a read's tokens): the text that feeding its events one by one gives, without an object per id.
        With `text_mends_ids` that is the run's own text: each event's is either what its ids decode to or what
        mends them (an event without text, a control token's, keeps its decoded tag, and one without ids adds
        nothing: `takes_whole` leaves such a run to be fed one by one)."""
        ids = run.ids
        decoded = self._detokenizer.push_all(ids)
        self.generated_tokens += len(ids)
        self._last_id = ids[-1]
        return GeneratedToken(ids[-1], run.text if self._mends(decoded, run.text) else decoded, ids)

    def counts(self) -> Counts:
        """The counts so far: ids taken (text chunks until `finish` gives the upstream's count), cached prompt."""
        return Counts(cached_tokens=self.cached_tokens, generated_tokens=self.generated_tokens)

    def counts_news(self, pieces: int) -> Counts | None:
        """The counts `Engine.generate` must learn now that `pieces` tokens have gone down the stream; None when it
        knows them already.

        `generate` counts each piece as one token until it is given the engine's own count. While every id came
        as a piece of its own (one token per event, the slow engine's case) that is the same count, and the news
        is only a new cached count: no `Counts` a token, one step less down the pipeline for each. Once several
        ids went as one piece (`together`), or an id as none, `generate` holds the engine's count from then on,
        and it is kept current at every step."""
        if self._counts_given or self.generated_tokens != pieces:
            self._counts_given = True
            self._cached_given = self.cached_tokens
            return self.counts()
        if self.cached_tokens != self._cached_given:
            self._cached_given = self.cached_tokens
            return Counts(cached_tokens=self.cached_tokens)
        return None

    def finish(self) -> EngineFinishReason:
        """The finish reason once the stream is over; an upstream that stopped without one broke off."""
        if self._upstream_count is not None:  # the engine's own count, as its usage reports it
            self.generated_tokens = self._upstream_count
        if self._ours is not None:
            return self._ours
        if self._upstream is None:
            raise UpstreamError("the upstream engine ended the stream before the generation finished")
        return "length" if self._upstream == "length" else "stop"

    def _from_ids(self, ids: tuple[int, ...] | list[int], text: str) -> list[GeneratedToken]:
        tokens = []
        for token_id in ids:
            if token_id in self._stop_ids:
                self._ours = "stop"
                break
            if self.generated_tokens >= self._max_tokens:
                self._ours = "length"
                break
            self.generated_tokens += 1
            self._last_id = token_id
            tokens.append(GeneratedToken(token_id, self._detokenizer.push(token_id)))
        return self._mended(tokens, text)

    def _mended(self, tokens: list[GeneratedToken], text: str) -> list[GeneratedToken]:
        """`tokens` as decoded, or, when ids before them never came, with the chunk's own text."""
        if not self._text_mends_ids or not tokens or self._ours is not None:
            return tokens
        decoded = tokens[0].text if len(tokens) == 1 else "".join([token.text for token in tokens])
        if not self._mends(decoded, text):
            return tokens
        return [GeneratedToken(t.id, "") for t in tokens[:-1]] + [GeneratedToken(tokens[-1].id, text)]

    def _mends(self, decoded: str, text: str) -> bool:
        """Whether the upstream's `text` stands for ids that decode to `decoded` (`text_mends_ids`: ids before them
        never came). Then the ids' count is the upstream's, and the detokenizer, which held the orphaned bytes,
        starts afresh."""
        if not self._text_mends_ids or not text or decoded == text:
            return False
        self._ids_missing = True
        self._detokenizer = IncrementalDetokenizer(self._tokenizer)
        return True

    def _from_text(self, text: str) -> list[GeneratedToken]:
        self.text_only = True
        cut = min((i for i in (text.find(t) for t in self._stop_texts) if i >= 0), default=-1)
        if cut >= 0:
            text, self._ours = text[:cut], "stop"
        if not text:
            return []
        self.generated_tokens += 1
        return [GeneratedToken(UNKNOWN_ID, text)]
