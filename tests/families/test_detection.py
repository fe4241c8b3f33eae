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


# DeepSeek-V4.1 ships no chat template: its config.json `model_type` and its vocabulary tell it from V4.

V41_BY_VOCABULARY = "vocabulary: <｜System｜> at 128799, <｜deepseek_image｜> at 129264"
V41_BY_MODEL_TYPE = "config.json model_type deepseek_v41"


@pytest.fixture(scope="module")
def deepseek_vocabularies(tmp_path_factory):
    """{release: its tokenizer.json as Maya's upstream engine reads it}."""
    from maya_server.model.hf_tokenizer import HfTokenizer
    from tests.deepseek_models import RELEASES, tokenizer_file

    directory = tmp_path_factory.mktemp("deepseek")
    return {release: HfTokenizer.from_file(tokenizer_file(directory, release)) for release in RELEASES}


def _texts(tokenizer):
    return lambda token_id: tokenizer.decode([token_id]) or None


def deepseek_template() -> str:
    """A DeepSeek template (DeepSeek-V3.1's), which names deepseek-v4: what a converter may put in a V4.1 GGUF."""
    return template_from_model_dir(DATA / "deepseek-v3.1")


def test_a_v41_config_json_names_deepseek_v41_and_says_so(tmp_path):
    from maya_server.families.detection import Detection, detect_family
    from maya_server.model.model_config import model_type_from_dir

    (tmp_path / "config.json").write_text('{"model_type": "deepseek_v41", "vocab_size": 129280}')
    assert model_type_from_dir(tmp_path) == "deepseek_v41"
    assert detect_family(None, model_type_from_dir(tmp_path)) == Detection("deepseek-v4.1", V41_BY_MODEL_TYPE)
    assert detect_family(deepseek_template(), "deepseek_v41") == Detection("deepseek-v4.1", V41_BY_MODEL_TYPE)
    assert detect_family(None, "deepseek_v4") == Detection(None)   # V4's own: not V4.1


def test_a_config_json_that_says_nothing_is_nothing(tmp_path):
    from maya_server.model.model_config import model_type_from_dir

    assert model_type_from_dir(None) is None and model_type_from_dir(tmp_path) is None
    for text in ("{not json", "[1, 2]", '{"model_type": 41}'):
        (tmp_path / "config.json").write_text(text)
        assert model_type_from_dir(tmp_path) is None


def test_a_v41_vocabulary_names_deepseek_v41_with_no_template_or_v4s(deepseek_vocabularies):
    from maya_server.families.detection import Detection, detect_family

    v41 = _texts(deepseek_vocabularies["deepseek-v4.1"])
    assert detect_family(None, None, v41) == Detection("deepseek-v4.1", V41_BY_VOCABULARY)
    assert detect_family(deepseek_template(), None, v41) == Detection("deepseek-v4.1", V41_BY_VOCABULARY)


def test_v4s_vocabulary_stays_v4(deepseek_vocabularies):
    from maya_server.families.detection import Detection, detect_family

    v4 = _texts(deepseek_vocabularies["deepseek-v4"])
    assert (v4(128799), v4(129264)) == ("<｜place▁holder▁no▁799｜>", "<｜image2｜>")
    assert detect_family(None, None, v4) == Detection(None)   # maya-ds4's default, deepseek-v4, then serves it
    assert detect_family(deepseek_template(), None, v4) == Detection("deepseek-v4", "from the model's chat template")
    assert detect_family(deepseek_template(), "deepseek_v4", v4).family == "deepseek-v4"


def test_one_of_the_two_tokens_is_not_v41s_vocabulary():
    from maya_server.families.detection import detect_family

    assert detect_family(None, None, {128799: "<｜System｜>"}.get).family is None
    assert detect_family(None, None, {129264: "<｜deepseek_image｜>"}.get).family is None


def test_a_template_of_another_family_wins_over_v41s_vocabulary(deepseek_vocabularies):
    """A fine-tune that kept V4.1's vocabulary but was trained on ChatML or GLM's format says so in its template."""
    from maya_server.families.detection import detect_family

    v41 = _texts(deepseek_vocabularies["deepseek-v4.1"])
    assert detect_family("<|im_start|>{{ m }}", "deepseek_v41", v41).family == "chatml"
    glm = (Path(__file__).parent / "templates" / "glm-5.1.jinja").read_text()
    assert detect_family(glm, None, v41).family == "glm-5.1"


@pytest.mark.parametrize(("release", "template", "family", "reason"), [
    ("deepseek-v4.1", None, "deepseek-v4.1", V41_BY_VOCABULARY),
    ("deepseek-v4.1", "deepseek", "deepseek-v4.1", V41_BY_VOCABULARY),
    ("deepseek-v4", None, None, None),
    ("deepseek-v4", "deepseek", "deepseek-v4", "from the model's chat template"),
])
def test_a_ggufs_vocabulary_tells_v41_from_v4(tmp_path, release, template, family, reason):
    """Read as the embedded engine reads a GGUF: its header's `tokenizer.ggml.tokens`, decoded by llama.cpp's rules."""
    from maya_server.families.detection import Detection, detect_family
    from maya_server.model.gguf_vocabulary import GgufVocabulary
    from tests.deepseek_models import vocabulary_gguf

    path = vocabulary_gguf(tmp_path / f"{release}.gguf", release,
                           template=deepseek_template() if template else None)
    metadata = read_gguf_metadata(path)
    vocabulary = GgufVocabulary(metadata)
    found = detect_family(metadata.get("tokenizer.chat_template"), None, _texts(vocabulary))
    assert found == Detection(family, reason)
