"""Sequence 0 of a llama-cpp-python context: the tokens its KV holds, trimming, and copies.

llama-cpp-python records the tokens whose KV the context holds as
`input_ids[:n_tokens]`; `eval` advances `n_tokens` one successfully decoded
batch at a time, so the record stays true when a generation stops anywhere,
mid-prompt included. This adapter is the one place that reads and writes that
bookkeeping, so that after a trim or a restore the KV and the record agree
exactly, and `generate(reset=False)` evaluates only what follows.

A copy is llama.cpp's per-sequence state (`llama_state_seq_get_data`): the KV
cells of seq 0 only. `Llama.save_state()` is not used: it copies the whole
context state plus llama-cpp-python's logits buffer (n_batch × n_vocab floats,
~100 MB for SmolLM2), measured 5-10× slower for the same KV.
Not thread-safe: call from the engine's thread only.
"""

from __future__ import annotations

import ctypes
from array import array

import llama_cpp

SEQ = 0


class LlamaSequence:
    def __init__(self, llama) -> None:
        self._llama = llama

    def tokens(self) -> list[int]:
        """The tokens whose KV the context holds, in order from position 0."""
        return self._llama._input_ids.tolist()

    def keep(self, count: int) -> int:
        """Drop the KV past the first `count` tokens; returns the tokens kept (0 after a
        full clear, for models whose memory cannot be cut partway)."""
        count = min(count, self._llama.n_tokens)
        if count > 0 and self._llama._ctx.kv_cache_seq_rm(SEQ, count, -1):
            self._llama.n_tokens = count
            self._llama._requires_eval = True
            return count
        self.clear()
        return 0

    def clear(self) -> None:
        self._llama.reset()
        self._llama._ctx.kv_cache_seq_rm(SEQ, 0, -1)

    def state_size(self) -> int:
        """Bytes a `save` would copy now."""
        self.keep(self._llama.n_tokens)
        return llama_cpp.llama_state_seq_get_size(self._llama._ctx.ctx, SEQ)

    def save(self) -> ctypes.Array:
        """A copy of the KV of exactly `tokens()` (cells past them are dropped first)."""
        size = self.state_size()
        ctx = self._llama._ctx.ctx
        buffer = (ctypes.c_uint8 * size)()
        if llama_cpp.llama_state_seq_get_data(ctx, buffer, size, SEQ) != size:
            raise RuntimeError("llama_state_seq_get_data copied less than its announced size")
        return buffer

    def restore(self, key: bytes, buffer: ctypes.Array) -> bool:
        """Load a copy made by `save` whose tokens are `key` (packed); False (and an empty
        KV) when llama.cpp refuses it."""
        tokens = array("i")
        tokens.frombytes(key)
        if llama_cpp.llama_state_seq_set_data(self._llama._ctx.ctx, buffer, len(buffer), SEQ) == 0:
            self.clear()
            return False
        self._llama.input_ids[: len(tokens)] = tokens
        self._llama.n_tokens = len(tokens)
        self._llama._requires_eval = True  # a restored KV carries no logits: evaluate before sampling
        return True
