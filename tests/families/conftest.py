from __future__ import annotations

import pytest

from maya_server.model.hf_tokenizer import HfTokenizer

from tests.families.official import extract_tokenizer


class ModelFiles:
    """Tokenizers extracted once per session; `ours` is our HfTokenizer, `file` the path."""

    def __init__(self, directory) -> None:
        self._directory = directory
        self._files: dict = {}
        self._ours: dict = {}

    def file(self, model: str):
        if model not in self._files:
            self._files[model] = extract_tokenizer(model, self._directory)
        return self._files[model]

    def ours(self, model: str) -> HfTokenizer:
        if model not in self._ours:
            self._ours[model] = HfTokenizer.from_file(self.file(model))
        return self._ours[model]


@pytest.fixture(scope="session")
def model_files(tmp_path_factory) -> ModelFiles:
    return ModelFiles(tmp_path_factory.mktemp("tokenizers"))
