"""The family comes from the model's own chat template: the real templates of each family's models."""

from __future__ import annotations

from pathlib import Path

import pytest

from maya_server.config import default_model_path
from maya_server.families.detection import family_from_template
from maya_server.model.chat_template import template_from_model_dir
from maya_server.model.gguf_metadata import read_gguf_metadata, training_context

from tests.families.official import DATA


@pytest.mark.parametrize(("model_dir", "family"), [
    ("glm-4.7-flash", "glm-4.7"), ("glm-5", "glm-4.7"), ("glm-5.1", "glm-5.1"), ("glm-5.2", "glm-5.2"),
    ("glm-4.5v", "glm-4.7"), ("glm-4-32b-0414", "glm"),
    ("deepseek-v3.1", "deepseek-v4"), ("deepseek-r1", "deepseek-v4"),
    ("qwen-2.5", "chatml"), ("qwen-3", "chatml"),
    ("deepseek-v4", None),   # DeepSeek ships V4's encoding as Python, no template: maya-ds4's default applies
    ("minimax-m3", None),    # a family Maya does not speak
])
def test_the_family_of_real_model_directories(model_dir, family):
    assert family_from_template(template_from_model_dir(DATA / model_dir)) == family


@pytest.mark.parametrize(("template_file", "family"), [
    ("glm-4.7-flash", "glm-4.7"), ("glm-5", "glm-4.7"), ("glm-5.1", "glm-5.1"), ("glm-5.2", "glm-5.2"),
    ("glm-5.3-flash", "glm-5.3"),
])
def test_the_family_of_each_kept_official_template(template_file, family):
    template = (Path(__file__).parent / "templates" / f"{template_file}.jinja").read_text()
    assert family_from_template(template) == family


def test_the_default_gguf_names_chatml_and_its_training_context():
    metadata = read_gguf_metadata(default_model_path())
    assert family_from_template(metadata["tokenizer.chat_template"]) == "chatml"
    assert training_context(metadata) == 8192


def test_no_template_or_an_unreadable_directory_says_nothing(tmp_path):
    assert family_from_template(None) is None and family_from_template("") is None
    assert template_from_model_dir(tmp_path) is None
    (tmp_path / "tokenizer_config.json").write_text("{not json")
    assert template_from_model_dir(tmp_path) is None


def test_a_file_that_is_not_gguf_is_refused(tmp_path):
    path = tmp_path / "model.gguf"
    path.write_bytes(b"GGUF\x03\x00\x00\x00\x01")   # cut short inside the header
    with pytest.raises(ValueError):
        read_gguf_metadata(path)
    path.write_bytes(b"PK\x03\x04")
    with pytest.raises(ValueError):
        read_gguf_metadata(path)
