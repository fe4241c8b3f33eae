"""`read_gguf_metadata` over GGUF headers written byte by byte here (no model file needed), and
`training_context`. Pins every value type of GGUF v2/v3 (scalars, strings, nested arrays), UTF-8
keys and values, and that anything not GGUF, too old or cut short is a ValueError, never a
struct.error or KeyError that would crash start-up with a traceback."""

from __future__ import annotations

import struct

import pytest

from maya_server.model.gguf_metadata import read_gguf_metadata, training_context

SCALARS = {"u8": (0, "<B", 200), "i8": (1, "<b", -5), "u16": (2, "<H", 60000), "i16": (3, "<h", -300),
           "u32": (4, "<I", 4_000_000_000), "i32": (5, "<i", -7), "f32": (6, "<f", 0.5), "bool": (7, "<?", True),
           "u64": (10, "<Q", 2**40), "i64": (11, "<q", -(2**40)), "f64": (12, "<d", 0.1)}


def string(text: str) -> bytes:
    data = text.encode("utf-8")
    return struct.pack("<Q", len(data)) + data


def gguf(pairs: list[tuple[str, int, bytes]], version: int = 3) -> bytes:
    """A GGUF header: magic, version, tensor count 0, then the key/type/value triples."""
    head = b"GGUF" + struct.pack("<IQQ", version, 0, len(pairs))
    return head + b"".join(string(key) + struct.pack("<I", kind) + value for key, kind, value in pairs)


def write(tmp_path, data: bytes):
    path = tmp_path / "model.gguf"
    path.write_bytes(data + b"\x00" * 64)  # tensor data follows the header; it must not be read
    return path


def test_every_scalar_type_reads_back(tmp_path):
    pairs = [(name, kind, struct.pack(fmt, value)) for name, (kind, fmt, value) in SCALARS.items()]
    metadata = read_gguf_metadata(write(tmp_path, gguf(pairs)))
    assert metadata == {name: pytest.approx(value) for name, (_, _, value) in SCALARS.items()}
    assert metadata["bool"] is True and isinstance(metadata["u64"], int)


def test_strings_and_nested_arrays_read_back(tmp_path):
    tokens = struct.pack("<IQ", 8, 3) + string("<s>") + string("ünï") + string("✓")
    nested = struct.pack("<IQ", 9, 2) + struct.pack("<IQ", 5, 1) + struct.pack("<i", 1) + struct.pack("<IQ", 5, 0)
    metadata = read_gguf_metadata(write(tmp_path, gguf([
        ("general.name", 8, string("Tiny ✓")), ("tokenizer.ggml.tokens", 9, tokens), ("nested", 9, nested),
    ], version=2)))
    assert metadata == {"general.name": "Tiny ✓", "tokenizer.ggml.tokens": ["<s>", "ünï", "✓"], "nested": [[1], []]}


@pytest.mark.parametrize("data, words", [
    (b"GGML" + b"\x00" * 40, "is not a GGUF file"),
    (b"", "is not a GGUF file"),
    (gguf([], version=1), "GGUF version 1 is not supported"),
    (b"GGUF\x03\x00", "unreadable GGUF header (error)"),  # cut short in the version
    (gguf([("k", 4, struct.pack("<I", 7))])[:-2], "unreadable GGUF header (error)"),  # cut short in a value
    (gguf([("k", 99, b"\x00" * 8)]), "unreadable GGUF header (KeyError)"),  # an unknown value type
    (gguf([("k", 8, struct.pack("<Q", 2) + b"\xff\xfe")]), "unreadable GGUF header (UnicodeDecodeError)"),
])
def test_a_file_that_is_not_readable_gguf_is_a_value_error(tmp_path, data, words):
    path = tmp_path / "model.gguf"
    path.write_bytes(data)
    with pytest.raises(ValueError) as caught:
        read_gguf_metadata(path)
    assert words in str(caught.value)


def test_a_string_value_cut_short_is_a_value_error(tmp_path):
    path = tmp_path / "model.gguf"
    path.write_bytes(gguf([("general.name", 8, string("long value"))])[:-3])
    with pytest.raises(ValueError):
        read_gguf_metadata(path)


def test_an_absurd_string_length_is_a_value_error(tmp_path):
    path = tmp_path / "model.gguf"
    path.write_bytes(b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + struct.pack("<Q", 2**63 + 5) + b"k")
    with pytest.raises(ValueError):
        read_gguf_metadata(path)


@pytest.mark.parametrize("metadata, expected", [
    ({"general.architecture": "llama", "llama.context_length": 8192}, 8192),
    ({"general.architecture": "qwen3", "llama.context_length": 8192}, None),  # another architecture's key
    ({"general.architecture": "llama", "llama.context_length": 0}, None),
    ({"general.architecture": "llama", "llama.context_length": "8192"}, None),
    ({"llama.context_length": 8192}, None),
    ({}, None),
])
def test_training_context_is_the_architectures_positive_context_length(metadata, expected):
    assert training_context(metadata) == expected
