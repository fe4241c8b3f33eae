"""Token ids → text, one id at a time, with multi-byte characters kept whole.

Why decode ourselves when an upstream engine sends text too: engines drop or
keep special tokens by their own flags (llama-server renders control tokens as
empty text unless started with `--special`), while our family parsers need
every reasoning and tool tag exactly as the model produced it. Decoding the ids
with the model directory's own tokenizer gives the same text whatever the
engine's settings.

Byte-level vocabularies split one character over several tokens, and
decoding a lone piece of it gives U+FFFD. So each new id is decoded together
with a few already-emitted ids before it (their text is known), and text is
released only once it no longer ends in a partial character; a run that never
completes (a model emitting invalid UTF-8) is released after `MAX_PENDING`
tokens rather than held forever. The window of emitted ids grows to
`2 × CONTEXT_TOKENS` before it is cut back, so its text is usually the last
decode's and one decode a token is the rule (this runs for every streamed token).

Faster still where the tokenizer knows each token's bytes (`token_bytes`: the
GGUF vocabulary, a byte-level BPE `tokenizer.json`): the text is then the
pieces' bytes joined, as llama.cpp and byte-level decoders make it, so each id's
bytes go through Python's incremental UTF-8 decoder, which holds a cut
character's bytes by itself (invalid bytes become U+FFFD at once).
"""

from __future__ import annotations

import codecs
import os

from ..model.tokenizer import Tokenizer

CONTEXT_TOKENS = 4
"""Already-emitted ids decoded in front of new ones, so joins (leading spaces, byte merges) decode as in the whole text."""
MAX_PENDING = 8
REPLACEMENT = "\ufffd"


class IncrementalDetokenizer:
    """Example::

        detokenizer = IncrementalDetokenizer(tokenizer)
        pieces = [detokenizer.push(i) for i in ids]   # "" while a character is incomplete
        pieces.append(detokenizer.flush())            # whatever is still held back
        "".join(pieces) == tokenizer.decode(ids)
    """

    def __init__(self, tokenizer: Tokenizer) -> None:
        self._tokenizer = tokenizer
        self._token_bytes = getattr(tokenizer, "token_bytes", None)
        if self._token_bytes is not None and self._token_bytes(0) is None:
            self._token_bytes = None  # this tokenizer's text is more than its pieces joined
        self._utf8 = codecs.getincrementaldecoder("utf-8")("replace")
        self._context: list[int] = []
        self._context_text = ""
        self._pending: list[int] = []

    def push(self, token_id: int) -> str:
        """The text that `token_id` completes ("" while it ends inside a character)."""
        if self._token_bytes is not None:
            return self._utf8.decode(self._token_bytes(token_id))
        self._pending.append(token_id)
        text = self._tokenizer.decode(self._context + self._pending)
        if text.endswith(REPLACEMENT) and len(self._pending) < MAX_PENDING:
            return ""
        return self._release(text)

    def push_all(self, token_ids: list[int]) -> str:
        """The text that `token_ids` complete, as `push` gives it id by id (one decode for all of them where
        the tokenizer knows each token's bytes)."""
        if self._token_bytes is not None:
            return self._utf8.decode(b"".join(map(self._token_bytes, token_ids)))
        return "".join([self.push(token_id) for token_id in token_ids])

    def flush(self) -> str:
        """Release the held-back ids at the end of the stream."""
        if self._token_bytes is not None:
            return self._utf8.decode(b"", final=True)
        if not self._pending:
            return ""
        return self._release(self._tokenizer.decode(self._context + self._pending))

    def _release(self, text: str) -> str:
        # The context's text is a prefix of the new text, except after a forced release of a broken
        # character; then only what differs is new.
        if text.startswith(self._context_text):
            piece = text[len(self._context_text):]
        else:
            piece = text[len(os.path.commonprefix([self._context_text, text])):]
        window = self._context + self._pending
        self._pending = []
        if len(window) <= 2 * CONTEXT_TOKENS:
            self._context, self._context_text = window, text
        else:
            self._context = window[-CONTEXT_TOKENS:]
            self._context_text = self._tokenizer.decode(self._context)
        return piece
