"""The incremental detokenizer over random mixes of the hard cases: its pieces always join to the whole decode."""

from __future__ import annotations

import random

import pytest

from maya_server.config import default_model_path
from maya_server.engine.detokenizer import IncrementalDetokenizer
from maya_server.gguf_metadata import read_gguf_metadata
from maya_server.gguf_tokenizer import gguf_tokenizer

PIECES = list("abc XYZ  \n\t日本語ünï🎉🐉,.-_") + ["<|im_start|>", "<|im_end|>", " the", "12345", "  "]


@pytest.fixture(scope="module")
def tokenizer():
    return gguf_tokenizer(read_gguf_metadata(default_model_path()))


@pytest.mark.parametrize("seed", range(4))
def test_random_texts_stream_back_exactly(tokenizer, seed):
    rng = random.Random(seed)
    for _ in range(50):
        text = "".join(rng.choice(PIECES) for _ in range(rng.randrange(1, 120)))
        ids = tokenizer.encode(text, special=True)
        detokenizer = IncrementalDetokenizer(tokenizer)
        pieces = [detokenizer.push(i) for i in ids] + [detokenizer.flush()]
        assert "".join(pieces) == tokenizer.decode(ids)
        assert all("\ufffd" not in piece for piece in pieces)

