"""The family test models (tests/family_models.py) are what llama.cpp makes of the real models' tokenizers.

Each file is loaded in the real llama-server (built by maya_server/engine/llama_server/build.py):
it must load, report the chat template written into it (or llama.cpp's ChatML
fallback when none was), carry the converter's pre-tokenizer name, token types
and special ids, tokenize exactly as the family's HF tokenizer.json does,
special tokens included, detokenize back to the text, and end a generation on
exactly the tokens a real GGUF of the family ends on. One llama-server per
model (about 5 s each with the files cached; the first run builds them, ~20 s
in all, plus one `pip download` of llama.cpp's source for DeepSeek-V4's template).
"""

from __future__ import annotations

import functools
import struct
from pathlib import Path

import pytest
from tokenizers import Tokenizer

from tests.family_models import CHECK_TEXT, FAMILY_MODELS, family_chat_template, family_model, hf_tokenizer
from tests.llama_server import LlamaServer

pytestmark = pytest.mark.slow

CHATML_FALLBACK = (
    "{%- for message in messages -%}\n"
    "  {{- '<|im_start|>' + message.role + '\n' + message.content + '<|im_end|>\n' -}}\n"
    "{%- endfor -%}\n"
    "{%- if add_generation_prompt -%}\n"
    "  {{- '<|im_start|>assistant\n' -}}\n"
    "{%- endif -%}"
)
"""llama.cpp's CHATML_TEMPLATE_SRC (common/chat.cpp): what /props reports for a model with no template."""

# What llama.cpp's converter writes for the real models (see the docstring of tests/family_models.py).
_GLM = {"pre": "glm4", "n_vocab": 154880, "bos": 154822, "eos": 154820, "eot": 154827, "eom": 154829,
        "unk": 154820, "pad": 154820, "add_bos": False, "add_eos": False}
_DEEPSEEK_V4 = {"pre": "joyai-llm", "n_vocab": 129280, "bos": 0, "eos": 1, "pad": 1, "add_bos": False, "add_eos": False}
EXPECTED = {
    "glm-5.1": _GLM,
    "glm-4.7-flash": _GLM,
    "deepseek-v4": _DEEPSEEK_V4,
    "deepseek-v4-notemplate": _DEEPSEEK_V4,
    "qwen3": {"pre": "qwen2", "n_vocab": 151936, "bos": 151643, "eos": 151645, "pad": 151643,
              "add_bos": False, "add_eos": False},
    "llama3": {"pre": "llama-bpe", "n_vocab": 128256, "bos": 128000, "eos": 128001, "pad": 128001,
               "add_bos": False, "add_eos": False},
}
NORMAL, CONTROL, USER_DEFINED, UNUSED = 1, 3, 4, 5
_GLM_TYPES = {"<|endoftext|>": CONTROL, "[gMASK]": CONTROL, "<sop>": CONTROL, "<|user|>": CONTROL,
              "<|code_prefix|>": CONTROL, "<|image|>": CONTROL,        # not marked special, but look it
              "<think>": USER_DEFINED, "</tool_call>": USER_DEFINED, "/nothink": USER_DEFINED,
              "[PAD154879]": UNUSED, "Ġhello": NORMAL}
TOKEN_TYPES = {
    "glm-5.1": _GLM_TYPES,
    "glm-4.7-flash": _GLM_TYPES,
    "deepseek-v4": {"<｜begin▁of▁sentence｜>": CONTROL, "<｜User｜>": CONTROL, "<｜tool▁sep｜>": CONTROL,
                    "<|EOT|>": CONTROL, "<｜/td｜>": CONTROL, "<think>": USER_DEFINED, "｜DSML｜": USER_DEFINED,
                    "<dsml:": USER_DEFINED, "<｜/table>｜": USER_DEFINED, "Ġhello": NORMAL},
    "qwen3": {"<|im_start|>": CONTROL, "<|im_end|>": CONTROL, "<|fim_prefix|>": CONTROL, "<tool_call>": USER_DEFINED,
              "<think>": USER_DEFINED, "[PAD151669]": UNUSED, "[PAD151935]": UNUSED, "Ġhello": NORMAL},
    "llama3": {"<｜begin▁of▁sentence｜>": CONTROL, "<｜User｜>": CONTROL, "<|eot_id|>": CONTROL,
               "<|reserved_special_token_2|>": CONTROL, "<think>": USER_DEFINED, "</think>": USER_DEFINED,
               "Ġhello": NORMAL},
}
"""Token types the converter gives (CONTROL: special or special-looking added tokens; USER_DEFINED: other
added ones; UNUSED: the [PAD…] fill up to config.json's vocab_size)."""

_ID_KEYS = {"bos": "bos_token_id", "eos": "eos_token_id", "eot": "eot_token_id", "eom": "eom_token_id",
            "unk": "unknown_token_id", "pad": "padding_token_id"}

END_OF_GENERATION = {
    # family: (tokens that end a generation in llama-server, control tokens that do not)
    "glm": (["<|endoftext|>", "<|user|>", "<|observation|>"], ["<|assistant|>", "[gMASK]"]),
    "deepseek": (["<｜end▁of▁sentence｜>"], ["<｜User｜>", "<｜Assistant｜>"]),
    "qwen": (["<|im_end|>", "<|endoftext|>"], ["<|im_start|>"]),
    "llama": (["<｜end▁of▁sentence｜>", "<|eot_id|>", "<|eom_id|>"], ["<｜User｜>"]),
}
"""GLM's `<|user|>` and `<|observation|>` end a turn only because the converter writes them as eot/eom."""

# All NFC: Qwen's tokenizer.json normalizes to NFC and llama.cpp does not, so decomposed accents
# ("e\u0301") tokenize differently there; that gap is llama.cpp's, not these files'.
COMMON_TEXTS = [
    "Hello, world!",
    "  leading, internal   and trailing spaces   \n\n\n\ttabs\t\tand\r\nCRLF\n",
    "digits 7 42 123 1234 1234567 3.14159 2024-06-01 0x1F 1e-9",
    "中文混合English文本，日本語のテキストとカタカナ、한국어 텍스트",
    "emoji 🚀🦙🦙 😶\u200d🌫️ ✅ 👩🏽\u200d💻 flags 🇫🇷",
    "I've been 'told he's there, 'RE you sure? We'Ve a'lL",
    "def f(x):\n    return {'a': [x ** 2, None]}  # comment\n\n",
    "Ünïcödé çàfé naïve — “quotes” … ½ ∑ ≠",
    CHECK_TEXT,
]
FAMILY_TEXTS = {
    "glm": [
        "[gMASK]<sop><|user|>\nhi<|assistant|><think>",
        "[gMASK]<sop><|system|>\nYou are helpful.<|user|>\nWhat is 2+2?<|assistant|>\n<think>hmm</think>4<|endoftext|>",
        "<tool_call>get_weather<arg_key>city</arg_key><arg_value>Paris</arg_value></tool_call><|observation|>"
        "<tool_response>{\"t\": 21}</tool_response>/nothink",
    ],
    "deepseek": [
        "<｜begin▁of▁sentence｜><｜User｜>hi<｜Assistant｜><think>",
        "<｜begin▁of▁sentence｜>sys<｜User｜>2+2?<｜Assistant｜></think>4<｜end▁of▁sentence｜>",
        "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>f<｜tool▁sep｜>{}<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
        "｜DSML｜<dsml:invoke name=\"get_weather\">x</dsml:invoke><｜/table>｜",
    ],
    "qwen": [
        "<|im_start|>user\nhi<|im_end|>",
        "<|im_start|>system\nsys<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\nHello<|im_end|><|endoftext|>",
        "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call><tool_response>ok</tool_response>",
    ],
    "llama": [
        "<｜begin▁of▁sentence｜><｜User｜>hi<｜Assistant｜><think>\n",
        "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|><｜end▁of▁sentence｜>",
    ],
}


def _family(name: str) -> str:
    return next(key for key in FAMILY_TEXTS if name.startswith(key))


def _texts(name: str) -> list[str]:
    return FAMILY_TEXTS[_family(name)] + COMMON_TEXTS


@pytest.fixture(scope="module", params=FAMILY_MODELS)
def model(request, tmp_path_factory):
    """(name, GGUF path, the llama-server on it): one server per model, started once."""
    name = request.param
    path = family_model(name)
    log = tmp_path_factory.mktemp("llama-server") / f"{name}.log"
    try:
        server = LlamaServer(str(path), ctx=2048, parallel=1, threads=2, log_path=log)
    except RuntimeError as exc:
        raise AssertionError(f"llama-server did not load {name}: {exc}\n{log.read_text(errors='replace')[-4000:]}")
    yield name, path, server
    server.stop()


@functools.lru_cache(maxsize=1)
def _hf(name: str) -> Tokenizer:
    return hf_tokenizer(name)


def test_it_loads_with_the_template_written(model):
    name, _path, server = model
    with server.http() as client:
        assert client.get("/health").status_code == 200
        props = client.get("/props").json()
    expected = family_chat_template(name)
    assert props["chat_template"] == (CHATML_FALLBACK if expected is None else _as_lexed(expected))


def _as_lexed(template: str) -> str:
    """The source /props reports: llama.cpp's jinja lexer (common/jinja/lexer.cpp) turns CRLF and CR into LF
    and drops one trailing newline, as Jinja does by default; the GGUF keeps the template unchanged."""
    template = template.replace("\r\n", "\n").replace("\r", "\n")
    return template[:-1] if template.endswith("\n") else template


def test_metadata_is_the_converters(model):
    name, path, _server = model
    metadata = _read_metadata(path)
    expected = EXPECTED[name]
    assert metadata["general.architecture"] == "llama"
    assert metadata["tokenizer.ggml.model"] == "gpt2"
    assert metadata["tokenizer.ggml.pre"] == expected["pre"]
    tokens, types = metadata["tokenizer.ggml.tokens"], metadata["tokenizer.ggml.token_type"]
    assert len(tokens) == len(types) == expected["n_vocab"]
    for kind, key in _ID_KEYS.items():
        assert metadata.get(f"tokenizer.ggml.{key}") == expected.get(kind), kind
    assert metadata["tokenizer.ggml.add_bos_token"] is expected["add_bos"]
    assert metadata["tokenizer.ggml.add_eos_token"] is expected["add_eos"]
    assert metadata.get("tokenizer.chat_template") == family_chat_template(name)
    type_of = dict(zip(tokens, types))
    for text, token_type in TOKEN_TYPES[name.split("-notemplate")[0]].items():
        assert type_of[text] == token_type, text
    assert all(token_type == UNUSED for token, token_type in zip(tokens, types) if token.startswith("[PAD"))
    assert types.count(UNUSED) == expected["n_vocab"] - len(_hf(name).get_vocab(with_added_tokens=True))


def _read_metadata(path) -> dict[str, object]:
    """The GGUF key/values (arrays as lists), read here rather than with the writer's own package."""
    data = Path(path).read_bytes()
    if data[:4] != b"GGUF":
        raise AssertionError(f"{path} is not GGUF")
    scalars = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
    pos = 24   # magic, version u32, tensor count u64, kv count u64

    def string() -> str:
        nonlocal pos
        (length,) = struct.unpack_from("<Q", data, pos)
        pos += 8 + length
        return data[pos - length:pos].decode("utf-8")

    def value(value_type: int):
        nonlocal pos
        if value_type == 8:
            return string()
        if value_type == 9:
            item_type, count = struct.unpack_from("<IQ", data, pos)
            pos += 12
            return [value(item_type) for _ in range(count)]
        (result,) = struct.unpack_from(scalars[value_type], data, pos)
        pos += struct.calcsize(scalars[value_type])
        return result

    (kv_count,) = struct.unpack_from("<Q", data, 16)
    metadata = {}
    for _ in range(kv_count):
        key = string()
        (value_type,) = struct.unpack_from("<I", data, pos)
        pos += 4
        metadata[key] = value(value_type)
    return metadata


def test_tokenize_matches_hf(model):
    name, _path, server = model
    hf = _hf(name)
    with server.http() as client:
        for text in _texts(name):
            got = client.post("/tokenize", json={"content": text, "parse_special": True, "add_special": False}).json()
            assert got["tokens"] == hf.encode(text, add_special_tokens=False).ids, text


def test_detokenize_gives_the_text_back(model):
    name, _path, server = model
    hf = _hf(name)
    with server.http() as client:
        for text in _texts(name):
            ids = hf.encode(text, add_special_tokens=False).ids
            assert client.post("/detokenize", json={"tokens": ids}).json()["content"] == text, text


def test_end_of_generation_is_the_converters(model):
    """Forcing one token (logit bias) either ends the generation at once or runs to n_predict."""
    name, _path, server = model
    hf = _hf(name)
    ending, not_ending = END_OF_GENERATION[_family(name)]
    with server.http() as client:
        for text in ending + not_ending:
            token_id = hf.token_to_id(text)
            assert token_id is not None, text
            answer = client.post("/completion", json={
                "prompt": "hi", "n_predict": 3, "temperature": 0, "cache_prompt": False,
                "logit_bias": [[token_id, 100]],
            }).json()
            ends = text in ending
            assert (answer["stop_type"], answer["tokens_predicted"]) == (("eos", 1) if ends else ("limit", 3)), text
