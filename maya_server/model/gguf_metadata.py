"""The key/value metadata at the head of a GGUF model file, read without touching the tensors.

Maya needs a few facts from the model before its engine starts: the training
context (`<arch>.context_length`, the default `--ctx`) and the vocabulary
(`tokenizer.ggml.*`, for our own tokenizer). The GGUF header is little-endian
typed key/value pairs (v2/v3) ahead of the tensor data, so a plain reader is
enough and loads nothing else.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path
from typing import BinaryIO

_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
_STRING, _ARRAY = 8, 9


def read_gguf_metadata(path: str | Path) -> dict[str, object]:
    """The metadata of a GGUF file; a file that is not GGUF (or is cut short) raises ValueError."""
    with open(path, "rb") as f:
        if f.read(4) != b"GGUF":
            raise ValueError(f"{path} is not a GGUF file")
        try:
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
        except (struct.error, KeyError, UnicodeDecodeError) as exc:
            raise ValueError(f"{path} has an unreadable GGUF header ({type(exc).__name__})") from None


def training_context(metadata: dict[str, object]) -> int | None:
    """The context the model was trained with (`<architecture>.context_length`)."""
    value = metadata.get(f"{metadata.get('general.architecture')}.context_length")
    return value if isinstance(value, int) and value > 0 else None


def _read_string(f: BinaryIO) -> str:
    """A length-prefixed string; a length past the file's end is a cut or corrupt header (checked before reading,
    so a garbage length never asks for more memory than the file holds)."""
    (length,) = struct.unpack("<Q", f.read(8))
    if length > os.fstat(f.fileno()).st_size - f.tell():
        raise struct.error(f"a string of {length} bytes runs past the end of the file")
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
