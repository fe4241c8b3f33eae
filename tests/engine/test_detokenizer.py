"""The incremental detokenizer over random mixes of the hard cases: its pieces always join to the whole decode.

Decoding is the embedded engine's: the GGUF's own vocabulary (`GgufVocabulary`), ids from SmolLM2's tokenizer."""

from __future__ import annotations

import random

import pytest

from maya_server.config import default_model_path
from maya_server.engine.detokenizer import IncrementalDetokenizer
from maya_server.model.gguf_metadata import read_gguf_metadata
from maya_server.model.gguf_vocabulary import GgufVocabulary

from maya_server.model.hf_tokenizer import HfTokenizer

from tests.families.official import extract_tokenizer
from tests.gguf_model_dir import smollm2_tokenizer

PIECES = list("abc XYZ  \n\t日本語ünï🎉🐉,.-_") + ["<|im_start|>", "<|im_end|>", " the", "12345", "  "]


class VocabularyDecoding:
    """SmolLM2's ids, decoded by the GGUF's vocabulary as the embedded engine decodes them."""

    def __init__(self) -> None:
        self._ids = smollm2_tokenizer()
        self._vocabulary = GgufVocabulary(read_gguf_metadata(default_model_path()))

    def encode(self, text, *, special):
        return self._ids.encode(text, special=special)

    def decode(self, ids):
        return self._vocabulary.decode(ids)


@pytest.fixture(scope="module")
def tokenizer():
    return VocabularyDecoding()


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



@pytest.mark.parametrize("model", ["glm-4.7-flash", "deepseek-v4", "qwen-3", "deepseek-r1-distill-llama-8b"])
def test_byte_level_tokenizers_stream_their_bytes_exactly(tmp_path, model):
    """The fast path (each id's bytes through an incremental UTF-8 decoder) gives the tokenizer's own decode for
    random runs of any ids, added tokens and cut characters included."""
    tokenizer = HfTokenizer.from_file(extract_tokenizer(model, tmp_path))
    size = tokenizer._full.get_vocab_size(with_added_tokens=True)
    rng = random.Random(3)
    for _ in range(200):
        ids = [rng.randrange(size) for _ in range(rng.randrange(1, 30))]
        detokenizer = IncrementalDetokenizer(tokenizer)
        assert "".join(detokenizer.push(i) for i in ids) + detokenizer.flush() == tokenizer.decode(ids)


def test_a_tokenizer_without_byte_pieces_takes_the_window_path():
    class WordPieces:
        token_bytes = staticmethod(lambda token_id: None)

        def decode(self, ids):
            return " ".join(f"w{i}" for i in ids)

    detokenizer = IncrementalDetokenizer(WordPieces())
    assert "".join(detokenizer.push(i) for i in (1, 2, 3)) + detokenizer.flush() == "w1 w2 w3"
