"""`HfTokenizer` over a tiny byte-level BPE built in the test (no model download): special tokens are matched
only with `special=True` (never in client text), non-special added tokens are matched either way, no BOS/EOS
is added, decoding keeps special tokens, `token_bytes` gives each token's raw bytes (so joined pieces are the
text's UTF-8) and None for a decoder that is not byte-level, and a directory without `tokenizer.json` is a
FileNotFoundError."""

from __future__ import annotations

import pytest
from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, processors
from tokenizers.pre_tokenizers import ByteLevel

from maya_server.model.hf_tokenizer import HfTokenizer

SPECIAL, ADDED, ACCENTED = "<|user|>", "<think>", "<réponse>"


def _byte_level(bos=False) -> Tokenizer:
    alphabet = ByteLevel.alphabet()
    tokenizer = Tokenizer(models.BPE(vocab={c: i for i, c in enumerate(sorted(alphabet))}, merges=[]))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.add_special_tokens([AddedToken(SPECIAL, special=True), AddedToken("<s>", special=True)])
    tokenizer.add_tokens([AddedToken(ADDED, special=False), AddedToken(ACCENTED, special=False)])
    if bos:
        tokenizer.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 257)])
    return tokenizer


@pytest.fixture(scope="module")
def tokenizer() -> HfTokenizer:
    return HfTokenizer(_byte_level())


def test_a_special_token_is_one_id_only_when_special(tokenizer):
    special_id = tokenizer.token_id(SPECIAL)
    assert special_id is not None and tokenizer.encode(SPECIAL, special=True) == [special_id]
    plain = tokenizer.encode(SPECIAL, special=False)
    assert special_id not in plain and len(plain) == len(SPECIAL)


def test_a_non_special_added_token_is_matched_either_way(tokenizer):
    added_id = tokenizer.token_id(ADDED)
    assert tokenizer.encode(ADDED, special=False) == [added_id] == tokenizer.encode(ADDED, special=True)


def test_no_bos_or_eos_is_added():
    tokenizer = HfTokenizer(_byte_level(bos=True))
    assert tokenizer.encode("a", special=True) == tokenizer.encode("a", special=False) == [tokenizer.token_id("a")]


def test_decode_keeps_special_tokens_and_round_trips_unicode(tokenizer):
    text = f"{SPECIAL}hé ✓{ADDED}"
    assert tokenizer.decode(tokenizer.encode(text, special=True)) == text


def test_token_bytes_join_to_the_texts_utf8(tokenizer):
    text = f"hé ✓ {ADDED}{SPECIAL}{ACCENTED}"
    ids = tokenizer.encode(text, special=True)
    assert b"".join(tokenizer.token_bytes(i) for i in ids) == text.encode("utf-8")
    assert tokenizer.token_bytes(tokenizer.token_id(SPECIAL)) == SPECIAL.encode()
    # an added token is its text's UTF-8, not byte-level stand-ins undone ('é' is the stand-in for 0xE9)
    assert tokenizer.token_bytes(tokenizer.token_id(ACCENTED)) == ACCENTED.encode("utf-8")
    assert tokenizer.token_bytes(10 ** 6) == b""  # an id outside the vocabulary has no bytes


def test_token_bytes_is_none_for_a_decoder_that_is_not_byte_level():
    tokenizer = Tokenizer(models.WordLevel(vocab={"a": 0, "[UNK]": 1}, unk_token="[UNK]"))
    tokenizer.decoder = decoders.WordPiece()
    assert HfTokenizer(tokenizer).token_bytes(0) is None


def test_token_id_is_none_for_text_that_is_not_one_token(tokenizer):
    assert tokenizer.token_id("not one token") is None


def test_from_model_dir_reads_tokenizer_json_or_says_it_is_missing(tmp_path):
    with pytest.raises(FileNotFoundError, match="no tokenizer.json"):
        HfTokenizer.from_model_dir(tmp_path)
    _byte_level().save(str(tmp_path / "tokenizer.json"))
    loaded = HfTokenizer.from_model_dir(tmp_path)
    assert loaded.encode(SPECIAL, special=True) == [loaded.token_id(SPECIAL)]
