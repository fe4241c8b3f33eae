"""A GGUF's vocabulary as llama.cpp reads it: each token id's bytes, and the ids of the special tokens by text.

The embedded engine lets llama-server split text into tokens (its own
tokenizer, whatever the model's pre-tokenizer), but Maya still needs two
things locally, on every streamed token and every prompt:

- the text of a generated id, exactly as llama.cpp's `token_to_piece` gives it
  with special tokens rendered (so reasoning and tool tags reach the parsers);
- the id of a control token the family writes (`<|user|>`, `[gMASK]`), so
  control tokens are placed by id and never parsed out of client text.

Both come from the file's `tokenizer.ggml.tokens` and `.token_type` by the
rules of llama.cpp's `token_to_piece` (`src/llama-vocab.cpp`):

- NORMAL tokens of a byte-level BPE vocabulary (`tokenizer.ggml.model` `gpt2`)
  are GPT-2's byte-to-character mapping undone; BPE vocabularies whose
  pre-tokenizer escapes whitespace (Gemma 4's, `ESCAPED_BPE_PRE`) and
  SentencePiece-style ones (`llama`, `t5`, `bert`) write a space as U+2581;
- BYTE tokens (`<0x0A>`) are that one byte;
- CONTROL, USER_DEFINED and UNKNOWN tokens are their text as written;
- UNUSED and undefined tokens are empty.
"""

from __future__ import annotations

from typing import Sequence

from ..errors import UnsupportedVocabulary

NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6
"""llama.cpp's token types (`tokenizer.ggml.token_type`)."""
BYTE_LEVEL_MODELS = ("gpt2", "hybriddna", "whitespace")
ESCAPED_BPE_PRE = ("gemma4", "granite-embed-multi-311m", "sarvam-moe")
"""BPE pre-tokenizers whose vocabulary writes spaces as U+2581 (llama.cpp's `escape_whitespaces`)."""
ESCAPED_MODELS = ("llama", "t5", "bert", "gemma4")
VERBATIM_MODELS = ("gpt2", "llama")
"""Tokenizers llama.cpp runs on the text as it is (byte-level BPE; SentencePiece with byte fallback): no
normalizer drops or shortens a character, so every token stands for exactly its piece's bytes. T5's (a
normalizer that can drop and fold characters) and BERT's (an unknown word is one `[UNK]`) are not."""
SPACE_MARK = "\u2581"


def _byte_level_table() -> dict[str, int]:
    """GPT-2's printable stand-ins for the 256 byte values, reversed: character → byte."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    table = {chr(b): b for b in printable}
    extra = 0
    for b in range(256):
        if b not in printable:
            table[chr(256 + extra)] = b
            extra += 1
    return table


_BYTE_LEVEL = _byte_level_table()


class GgufVocabulary:
    """Example::

        vocabulary = GgufVocabulary(read_gguf_metadata("GLM-5.1.gguf"))
        vocabulary.special_id("<|user|>")      # its id
        vocabulary.decode([id_1, id_2])         # the text llama-server would stream for them
    """

    def __init__(self, metadata: dict[str, object]) -> None:
        model = metadata.get("tokenizer.ggml.model")
        tokens = metadata.get("tokenizer.ggml.tokens")
        if not isinstance(tokens, list) or not tokens:
            raise UnsupportedVocabulary("the GGUF has no tokenizer.ggml.tokens vocabulary")
        if model in BYTE_LEVEL_MODELS and metadata.get("tokenizer.ggml.pre") not in ESCAPED_BPE_PRE:
            self._normal = unmap_byte_level
        elif model in (*BYTE_LEVEL_MODELS, *ESCAPED_MODELS):
            self._normal = _unescape_spaces
        else:
            raise UnsupportedVocabulary(f"Maya cannot decode a {model!r} vocabulary")
        types = metadata.get("tokenizer.ggml.token_type")
        self._tokens: list[str] = tokens
        self._types: list[int] = types if isinstance(types, list) and len(types) == len(tokens) else [NORMAL] * len(tokens)
        self._pieces: list[bytes | None] = [None] * len(tokens)
        self._special = {
            token: i for i, (token, kind) in enumerate(zip(self._tokens, self._types))
            if kind in (CONTROL, USER_DEFINED, UNKNOWN)
        }
        self._verbatim = model in VERBATIM_MODELS

    def max_token_bytes(self) -> int | None:
        """The most bytes of text one token stands for (its longest piece), where the tokenizer keeps the text
        as it is (`VERBATIM_MODELS`); None where it may not. A text of `n` bytes then takes at least
        `n / max_token_bytes` tokens, whatever its split."""
        if not self._verbatim:
            return None
        return max((len(self.piece(i)) for i in range(len(self._tokens))), default=None) or None

    def __len__(self) -> int:
        return len(self._tokens)

    def special_id(self, text: str) -> int | None:
        """The id of the control or added token written `text`, or None when no such token exists."""
        return self._special.get(text)

    def is_special(self, token_id: int) -> bool:
        """Whether the id is a control, added or unknown token (written as its text)."""
        return 0 <= token_id < len(self._types) and self._types[token_id] in (CONTROL, USER_DEFINED, UNKNOWN)

    def piece(self, token_id: int) -> bytes:
        """The bytes of one token (empty for an id outside the vocabulary, as for unused tokens)."""
        if not 0 <= token_id < len(self._pieces):
            return b""
        piece = self._pieces[token_id]
        if piece is None:
            piece = self._pieces[token_id] = self._make_piece(token_id)
        return piece

    def decode(self, ids: Sequence[int]) -> str:
        """The text of the ids (a character cut by the end of the ids is U+FFFD)."""
        return b"".join(self.piece(i) for i in ids).decode("utf-8", errors="replace")

    def _make_piece(self, token_id: int) -> bytes:
        token, kind = self._tokens[token_id], self._types[token_id]
        if kind == NORMAL:
            return self._normal(token)
        if kind == BYTE:
            return _byte_token(token)
        if kind in (CONTROL, USER_DEFINED, UNKNOWN):
            return token.encode("utf-8")
        return b""


def unmap_byte_level(token: str) -> bytes:
    """A byte-level BPE token's bytes (GPT-2's printable stand-ins undone)."""
    # a character outside the 256 stand-ins cannot come from the converter; it is kept as its own UTF-8
    return b"".join(bytes((_BYTE_LEVEL[c],)) if c in _BYTE_LEVEL else c.encode("utf-8") for c in token)


def _unescape_spaces(token: str) -> bytes:
    return token.replace(SPACE_MARK, " ").encode("utf-8")


def _byte_token(token: str) -> bytes:
    """`<0xAB>` → b"\\xab"."""
    try:
        return bytes((int(token[3:5], 16),))
    except ValueError:
        return token.encode("utf-8")
