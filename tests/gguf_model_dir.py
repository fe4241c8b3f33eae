"""A model directory (just `tokenizer.json`) for SmolLM2, for `--engine upstream --tokenizer DIR` tests.

The tests have no hub to fetch SmolLM2's `tokenizer.json`; the one Maya builds
from the GGUF's own vocabulary is proven equal to llama-server's `/tokenize`.
"""

from __future__ import annotations

import json
from pathlib import Path

from maya_server.gguf_metadata import read_gguf_metadata
from maya_server.gguf_tokenizer import tokenizer_json


def write_model_dir(gguf_path: str | Path, directory: str | Path) -> Path:
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    content = tokenizer_json(read_gguf_metadata(gguf_path))
    (directory / "tokenizer.json").write_text(json.dumps(content, ensure_ascii=False))
    return directory
