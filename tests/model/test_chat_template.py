"""Reading a model directory's chat template as the model ships it: `chat_template.jinja` wins over
`tokenizer_config.json`, a list of named templates yields the default one, and anything missing, unreadable
or of the wrong shape is no template (None), never an exception."""

from __future__ import annotations

import json

import pytest

from maya_server.model.chat_template import template_from_model_dir


def _config(directory, value):
    (directory / "tokenizer_config.json").write_text(json.dumps(value), encoding="utf-8")


def test_the_template_string_in_tokenizer_config_is_returned(tmp_path):
    _config(tmp_path, {"chat_template": "{{ messages }}", "eos_token": "</s>"})
    assert template_from_model_dir(tmp_path) == "{{ messages }}"
    assert template_from_model_dir(str(tmp_path)) == "{{ messages }}"


def test_a_chat_template_jinja_file_wins_over_the_config(tmp_path):
    _config(tmp_path, {"chat_template": "from config"})
    (tmp_path / "chat_template.jinja").write_text("from jinja ✓", encoding="utf-8")
    assert template_from_model_dir(tmp_path) == "from jinja ✓"


def test_a_jinja_file_with_bad_utf8_is_read_with_replacement(tmp_path):
    (tmp_path / "chat_template.jinja").write_bytes(b"a\xffb")
    assert template_from_model_dir(tmp_path) == "a\ufffdb"


def test_of_several_named_templates_the_default_one_is_returned(tmp_path):
    _config(tmp_path, {"chat_template": [
        {"name": "tool_use", "template": "tools"}, "junk", {"name": "default", "template": "plain"}]})
    assert template_from_model_dir(tmp_path) == "plain"


@pytest.mark.parametrize("value", [
    {"chat_template": [{"name": "tool_use", "template": "tools"}]},
    {"chat_template": 42},
    {"chat_template": None},
    {"eos_token": "</s>"},
    ["not", "a", "dict"],
])
def test_a_config_without_a_usable_template_gives_none(tmp_path, value):
    _config(tmp_path, value)
    assert template_from_model_dir(tmp_path) is None


def test_a_missing_or_malformed_config_gives_none(tmp_path):
    assert template_from_model_dir(tmp_path) is None
    assert template_from_model_dir(tmp_path / "absent") is None
    (tmp_path / "tokenizer_config.json").write_text("{not json", encoding="utf-8")
    assert template_from_model_dir(tmp_path) is None
