"""A `Tokenizer` over a model directory's `tokenizer.json` (the `tokenizers` package).

`tokenizers` matches every added token (special or not) anywhere in the text it
encodes. For plain text we keep a second tokenizer built from the same file with
`encode_special_tokens` on: special tokens (`<|user|>`, `[gMASK]`) are then
never matched in client text, while non-special added tokens (GLM's
`<tool_call>`, Qwen's `<think>`) still are, as the model's own tokenizer and
llama.cpp's (`/tokenize` without special parsing) both match them. Neither path
adds BOS/EOS: the family writes them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from tokenizers import Tokenizer as _RustTokenizer
from tokenizers.decoders import ByteLevel

from .gguf_vocabulary import unmap_byte_level


class HfTokenizer:
    """Example::

        tokenizer = HfTokenizer.from_model_dir("/models/GLM-4.7-Flash")
        tokenizer.encode("<|user|>", special=True)    # [154827]
        tokenizer.encode("<|user|>", special=False)   # several ordinary tokens
        tokenizer.encode("<think>", special=False)    # [154841]: a non-special added token, as the model reads it
    """

    def __init__(self, tokenizer: _RustTokenizer) -> None:
        self._full = tokenizer
        self._plain = _RustTokenizer.from_str(tokenizer.to_str())
        self._plain.encode_special_tokens = True
        self._byte_level = isinstance(tokenizer.decoder, ByteLevel)
        self._added = {i: t.content for i, t in tokenizer.get_added_tokens_decoder().items()}
        self._pieces: dict[int, bytes] = {}

    @classmethod
    def from_file(cls, path: str | Path) -> "HfTokenizer":
        return cls(_RustTokenizer.from_file(str(path)))

    @classmethod
    def from_model_dir(cls, directory: str | Path) -> "HfTokenizer":
        path = Path(directory) / "tokenizer.json"
        if not path.is_file():
            raise FileNotFoundError(f"no tokenizer.json in {directory}")
        return cls.from_file(path)

    def encode(self, text: str, *, special: bool) -> list[int]:
        tokenizer = self._full if special else self._plain
        return tokenizer.encode(text, add_special_tokens=False).ids

    def decode(self, ids: Sequence[int]) -> str:
        return self._full.decode(list(ids), skip_special_tokens=False)

    def token_bytes(self, token_id: int) -> bytes | None:
        """One token's bytes where the text of ids is their bytes joined (a byte-level BPE: GLM, DeepSeek, Qwen,
        Llama 3); None for other decoders, whose joins are more than that."""
        if not self._byte_level:
            return None
        piece = self._pieces.get(token_id)
        if piece is None:
            added = self._added.get(token_id)
            token = self._full.id_to_token(token_id)
            piece = added.encode("utf-8") if added is not None else unmap_byte_level(token) if token is not None else b""
            self._pieces[token_id] = piece  # at most one entry per token of the vocabulary
        return piece

    def token_id(self, text: str) -> int | None:
        """The id of a single token's text (e.g. a stop text), or None when it is not one token."""
        return self._full.token_to_id(text)
