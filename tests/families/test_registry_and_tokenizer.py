"""The family registry and HfTokenizer."""

from __future__ import annotations

import shutil

import pytest

from maya_server.families import FAMILY_NAMES, get_family
from maya_server.families.glm import GlmFamily
from maya_server.model.hf_tokenizer import HfTokenizer


def test_registry_names():
    assert {"glm", "deepseek-v4", "chatml"} <= set(FAMILY_NAMES)
    for name in FAMILY_NAMES:
        family = get_family(name)
        assert family.stop_texts and callable(family.render) and callable(family.parser)
    assert get_family("glm").variant == "5.1"
    assert get_family("glm-5").variant == "4.7"


def test_unknown_names_list_the_valid_ones():
    with pytest.raises(ValueError, match="glm, glm-4.7"):
        get_family("llama")
    with pytest.raises(ValueError, match="4.7, 5.1, 5.2"):
        GlmFamily("4.5")


def test_special_flag_decides_control_tokens(model_files):
    tokenizer = model_files.ours("glm-4.7-flash")
    user_id = tokenizer.token_id("<|user|>")
    assert tokenizer.encode("<|user|>", special=True) == [user_id]
    assert user_id not in tokenizer.encode("<|user|>", special=False)
    assert tokenizer.encode("<tool_call>", special=False) == [tokenizer.token_id("<tool_call>")]  # not special
    assert tokenizer.token_id("not one token") is None
    assert tokenizer.decode(tokenizer.encode("a <|user|> b", special=True)) == "a <|user|> b"


def test_no_bos_is_added(model_files):
    tokenizer = model_files.ours("deepseek-v4")
    bos = tokenizer.token_id("<｜begin▁of▁sentence｜>")
    assert bos not in tokenizer.encode("Hello", special=True)
    assert tokenizer.encode("<｜begin▁of▁sentence｜>Hello", special=True)[0] == bos


def test_plain_text_encodes_like_the_full_tokenizer(model_files):
    tokenizer = model_files.ours("qwen-3")
    sample = "  Ünïcødé 你好 🎉\n\n\tcode(x) {y}  "
    assert tokenizer.encode(sample, special=False) == tokenizer.encode(sample, special=True)


def test_from_model_dir(model_files, tmp_path):
    shutil.copy(model_files.file("qwen-3"), tmp_path / "tokenizer.json")
    loaded = HfTokenizer.from_model_dir(tmp_path)
    assert loaded.encode("hi", special=False) == model_files.ours("qwen-3").encode("hi", special=False)
    with pytest.raises(FileNotFoundError):
        HfTokenizer.from_model_dir(tmp_path / "missing")
