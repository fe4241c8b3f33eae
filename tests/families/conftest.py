from __future__ import annotations

import pytest

from maya_server.model.hf_tokenizer import HfTokenizer

from tests.families.official import extract_tokenizer, v41_tokenizer_file


class ModelFiles:
    """Tokenizers extracted once per session; `ours` is our HfTokenizer, `file` the path (`deepseek-v4.1`: derived
    from V4's, `official.v41_tokenizer_file`)."""

    def __init__(self, directory) -> None:
        self._directory = directory
        self._files: dict = {}
        self._ours: dict = {}

    def file(self, model: str):
        if model not in self._files:
            derive = v41_tokenizer_file if model == "deepseek-v4.1" else lambda d: extract_tokenizer(model, d)
            self._files[model] = derive(self._directory)
        return self._files[model]

    def ours(self, model: str) -> HfTokenizer:
        if model not in self._ours:
            self._ours[model] = HfTokenizer.from_file(self.file(model))
        return self._ours[model]


@pytest.fixture(scope="session")
def model_files(tmp_path_factory) -> ModelFiles:
    return ModelFiles(tmp_path_factory.mktemp("tokenizers"))
