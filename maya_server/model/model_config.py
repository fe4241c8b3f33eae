"""A model folder's `config.json` `model_type`: the architecture name the model's authors give it.

Why here: like its chat template (`chat_template.py`), it is a fact about the
model's files that an engine reports; which family it means is decided at the
edge (`families/detection.py`, called from `engine_setup.py`). DeepSeek-V4.1
ships no chat template, and its `model_type` (`deepseek_v41`) is one of the two
facts that tell it from V4.
"""

from __future__ import annotations

import json
from pathlib import Path


def model_type_from_dir(directory: str | Path | None) -> str | None:
    """The `model_type` of `directory`'s `config.json`; None without a folder, a readable file or a string there."""
    if directory is None:
        return None
    try:
        config = json.loads((Path(directory) / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    model_type = config.get("model_type") if isinstance(config, dict) else None
    return model_type if isinstance(model_type, str) else None
