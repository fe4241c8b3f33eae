"""A model directory's chat template, read as the model ships it.

Why here: reading the template is a fact about the model's files, which an
engine reports; which family it names is decided at the edge
(`families/detection.py`, called from `engine_setup.py`).
"""

from __future__ import annotations

import json
from pathlib import Path


def template_from_model_dir(directory: str | Path) -> str | None:
    """The `chat_template` of a model directory's `tokenizer_config.json` (or its `chat_template.jinja`)."""
    directory = Path(directory)
    jinja = directory / "chat_template.jinja"
    if jinja.is_file():
        return jinja.read_text(encoding="utf-8", errors="replace")
    try:
        config = json.loads((directory / "tokenizer_config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    template = config.get("chat_template") if isinstance(config, dict) else None
    if isinstance(template, list):  # several named templates: the default one
        template = next((t.get("template") for t in template if isinstance(t, dict) and t.get("name") == "default"), None)
    return template if isinstance(template, str) else None
