"""A GGUF's vocabulary decodes as llama.cpp's `token_to_piece` does, for each kind of vocabulary."""

from __future__ import annotations

import random

import pytest

from maya_server.config import default_model_path
from maya_server.errors import UnsupportedVocabulary
from maya_server.model.gguf_metadata import read_gguf_metadata
from maya_server.model.gguf_vocabulary import BYTE, CONTROL, NORMAL, UNUSED, USER_DEFINED, GgufVocabulary

from tests.gguf_model_dir import smollm2_tokenizer


def test_every_smollm2_token_decodes_as_its_tokenizer_decodes_it():
    vocabulary = GgufVocabulary(read_gguf_metadata(default_model_path()))
    reference = smollm2_tokenizer()
    ids = list(range(len(vocabulary)))
    random.Random(7).shuffle(ids)
    for start in range(0, len(ids), 97):   # runs of ids, so characters cut across tokens join as in a stream
        run = ids[start:start + 97]
        assert vocabulary.decode(run) == reference.decode(run)


def sentencepiece(tokens: list[str], types: list[int], model: str = "llama", pre: str | None = None) -> GgufVocabulary:
    metadata = {"tokenizer.ggml.model": model, "tokenizer.ggml.tokens": tokens, "tokenizer.ggml.token_type": types}
    if pre:
        metadata["tokenizer.ggml.pre"] = pre
    return GgufVocabulary(metadata)


def test_a_sentencepiece_vocabulary_writes_spaces_and_byte_tokens():
    vocabulary = sentencepiece(["<unk>", "<s>", "▁Hello", "▁wor", "ld", "<0xE2>", "<0x82>", "<0xAC>", "<think>", "[PAD5]"],
                               [2, CONTROL, NORMAL, NORMAL, NORMAL, BYTE, BYTE, BYTE, USER_DEFINED, UNUSED])
    assert vocabulary.decode([1, 2, 3, 4]) == "<s> Hello world"
    assert vocabulary.decode([5, 6, 7]) == "€"           # three byte tokens, one character
    assert vocabulary.decode([5, 6]) == "\ufffd"          # cut inside it
    assert vocabulary.decode([8, 9]) == "<think>"         # an added token as written; an unused one is empty
    assert vocabulary.special_id("<think>") == 8 and vocabulary.special_id("▁Hello") is None
    assert vocabulary.is_special(1) and not vocabulary.is_special(2) and not vocabulary.is_special(99)
    assert vocabulary.piece(10_000) == b"" and vocabulary.piece(-1) == b""


def test_byte_level_bpe_undoes_gpt2s_byte_mapping_but_not_in_added_tokens():
    vocabulary = sentencepiece(["Ġhello", "Ċ", "æĹ¥", "<｜User｜>"], [NORMAL, NORMAL, NORMAL, CONTROL], model="gpt2", pre="glm4")
    assert vocabulary.decode([0, 1, 2, 3]) == " hello\n日<｜User｜>"


def test_a_bpe_vocabulary_that_escapes_spaces_is_read_as_sentencepiece():
    vocabulary = sentencepiece(["▁hello", "Ġ"], [NORMAL, NORMAL], model="gpt2", pre="gemma4")
    assert vocabulary.decode([0, 1]) == " helloĠ"


def test_a_vocabulary_maya_cannot_decode_is_refused_by_name():
    with pytest.raises(UnsupportedVocabulary, match="'rwkv'"):
        sentencepiece(["a"], [NORMAL], model="rwkv")
    with pytest.raises(UnsupportedVocabulary):
        GgufVocabulary({"tokenizer.ggml.model": "gpt2"})


def test_missing_token_types_read_as_normal():
    vocabulary = GgufVocabulary({"tokenizer.ggml.model": "gpt2", "tokenizer.ggml.tokens": ["a", "Ġb"]})
    assert vocabulary.decode([0, 1]) == "a b"
