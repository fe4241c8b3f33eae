"""A model directory (just `tokenizer.json`) for SmolLM2, for `--engine upstream --tokenizer DIR` tests.

The tests have no hub to fetch SmolLM2's `tokenizer.json`, so they write the
`tokenizers` configuration equivalent to the GGUF's byte-level BPE vocabulary
(`smollm` pre-tokenizer: every digit alone, then GPT-2's split);
`tests/engine/llama_server/test_engine.py` proves it equal to llama-server's `/tokenize`.
Maya itself never rebuilds a tokenizer: the embedded engine asks llama-server.
"""

from __future__ import annotations

import json
from pathlib import Path

from tokenizers import Tokenizer as RustTokenizer

from maya_server.config import default_model_path
from maya_server.model.gguf_metadata import read_gguf_metadata
from maya_server.model.hf_tokenizer import HfTokenizer

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
        raise ValueError(f"only SmolLM2-style vocabularies are rebuilt here (model {model!r}, pre-tokenizer {pre!r})")
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


def smollm2_tokenizer(gguf_path: str | Path | None = None) -> HfTokenizer:
    """SmolLM2's tokenizer (the shipped model's unless `gguf_path`), for tests and benches without a child."""
    content = tokenizer_json(read_gguf_metadata(gguf_path or default_model_path()))
    return HfTokenizer(RustTokenizer.from_str(json.dumps(content, ensure_ascii=False)))


def write_model_dir(gguf_path: str | Path, directory: str | Path) -> Path:
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    content = tokenizer_json(read_gguf_metadata(gguf_path))
    (directory / "tokenizer.json").write_text(json.dumps(content, ensure_ascii=False))
    return directory
