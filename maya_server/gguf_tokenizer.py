"""Our own tokenizer for a GGUF model, built from the vocabulary inside the file.

Maya renders prompts to token ids itself (so a user's text can never become a
control token) and decodes generated ids itself (so reasoning and tool tags are
exact whatever the engine's special-token settings). For a GGUF run by the
embedded llama-server there is no `tokenizer.json` beside it, but the file
carries the vocabulary (`tokenizer.ggml.tokens`, `.merges`, `.token_type`) and
names llama.cpp's pre-tokenizer (`tokenizer.ggml.pre`). For the byte-level BPE
pre-tokenizers below we write the equivalent `tokenizers` configuration; any
other needs `--tokenizer DIR` (the model's own `tokenizer.json`). Either way
the engine checks the result against llama-server's own `/tokenize` at start-up.
"""

from __future__ import annotations

import json

from tokenizers import Tokenizer as RustTokenizer

from .errors import UnsupportedVocabulary
from .hf_tokenizer import HfTokenizer

CONTROL = 3
"""llama.cpp's token type for control (special) tokens."""
_BYTE_LEVEL = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
PRE_TOKENIZERS: dict[str, dict] = {
    # GPT-2's split (what ByteLevel's regex is)
    "gpt2": _BYTE_LEVEL,
    # SmolLM: every digit alone, then GPT-2's split
    "smollm": {"type": "Sequence", "pretokenizers": [{"type": "Digits", "individual_digits": True}, _BYTE_LEVEL]},
}


def tokenizer_json(metadata: dict[str, object]) -> dict:
    """The `tokenizer.json` content equivalent to a GGUF's byte-level BPE vocabulary."""
    model, pre = metadata.get("tokenizer.ggml.model"), metadata.get("tokenizer.ggml.pre")
    if model != "gpt2" or pre not in PRE_TOKENIZERS:
        raise UnsupportedVocabulary(
            f"Maya cannot rebuild this GGUF's tokenizer (model {model!r}, pre-tokenizer {pre!r}); "
            "give --tokenizer DIR, the model's directory with its tokenizer.json"
        )
    tokens: list[str] = metadata["tokenizer.ggml.tokens"]
    types: list[int] = metadata["tokenizer.ggml.token_type"]
    merges = [pair.split(" ", 1) for pair in metadata["tokenizer.ggml.merges"]]
    added = [
        {"id": i, "content": token, "single_word": False, "lstrip": False, "rstrip": False,
         "normalized": False, "special": True}
        for i, (token, kind) in enumerate(zip(tokens, types)) if kind == CONTROL
    ]
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": None,
        "pre_tokenizer": PRE_TOKENIZERS[pre],
        "post_processor": None,
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": {token: i for i, token in enumerate(tokens)}, "merges": merges},
    }


def gguf_tokenizer(metadata: dict[str, object]) -> HfTokenizer:
    return HfTokenizer(RustTokenizer.from_str(json.dumps(tokenizer_json(metadata), ensure_ascii=False)))
