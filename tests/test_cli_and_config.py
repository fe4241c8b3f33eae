"""Configuration: flags > environment > config file (whose env block acts as environment)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from maya_server.cli import load
from maya_server.errors import ConfigError
from maya_server.engine_setup import resolve_family


def _load(argv, environ=None):
    return load(argv, "maya", "glm", environ=environ or {})


def test_flags_override_environment_override_file(tmp_path):
    path = tmp_path / "maya.json"
    path.write_text(json.dumps({"port": 9000, "ctx": 1024, "threads": 2, "engine": "scripted",
                                "env": {"MAYA_CTX": "2048", "MAYA_PORT": "9100"}}))
    config = _load(["--config", str(path), "--port", "9200"], {"MAYA_PORT": "9300", "MAYA_THREADS": "3"})
    assert config.port == 9200          # flag beats everything
    assert config.threads == 3          # exported variable beats the file
    assert config.ctx == 2048           # the file's env block beats the file's own key
    assert config.environ["MAYA_CTX"] == "2048"


def test_repeatable_keys_and_origins():
    config = _load(["--engine", "scripted", "--api-key", "a", "--api-key", "b", "--cors-origin", "*"])
    assert config.api_keys == ("a", "b")
    assert config.cors_origins == ("*",)


def test_keys_from_environment_and_file(tmp_path):
    assert _load(["--engine", "scripted"], {"MAYA_API_KEYS": "a, b"}).api_keys == ("a", "b")
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"engine": "scripted", "api_key": "solo", "cors_origins": ["https://x.example"]}))
    config = _load(["--config", str(path)])
    assert config.api_keys == ("solo",)
    assert config.cors_origins == ("https://x.example",)


def test_embedded_engine_settings_from_flags_and_environment():
    defaults = _load(["--engine", "scripted"])
    assert (defaults.slots, defaults.gpu_layers, defaults.cache_ram_mib, defaults.ctx) == (4, None, 2048, None)
    config = _load(["--engine", "scripted", "--slots", "2", "--gpu-layers", "0"],
                   {"MAYA_SLOTS": "8", "MAYA_CACHE_RAM_MIB": "0"})
    assert (config.slots, config.gpu_layers, config.cache_ram_mib) == (2, 0, 0)


def test_family_defaults_per_command_until_the_template_says_otherwise():
    maya = load(["--engine", "scripted"], "maya", "glm", environ={})
    ds4 = load(["--engine", "scripted"], "maya-ds4", "deepseek-v4", environ={})
    assert (maya.family, maya.family_explicit) == ("glm", False)
    assert (ds4.family, ds4.family_explicit) == ("deepseek-v4", False)
    assert resolve_family(maya, "chatml").family == "chatml"
    assert resolve_family(ds4, None).family == "deepseek-v4"


def test_an_explicit_family_that_contradicts_the_template_names_both():
    config = _load(["--engine", "scripted", "--family", "glm"])
    assert config.family_explicit
    with pytest.raises(ConfigError) as caught:
        resolve_family(config, "chatml")
    assert caught.value.name == "family"
    assert "glm" in str(caught.value) and "chatml" in str(caught.value) and "--force-family" in str(caught.value)
    assert resolve_family(config, "glm").family == "glm"
    assert resolve_family(_load(["--engine", "scripted", "--family", "glm-4.7"]), "glm").family == "glm-4.7"
    forced = _load(["--engine", "scripted", "--family", "glm", "--force-family"])
    assert resolve_family(forced, "chatml").family == "glm"
    assert _load(["--engine", "scripted"], {"MAYA_FAMILY": "chatml"}).family_explicit


@pytest.mark.parametrize(
    ("argv", "environ", "field"),
    [
        (["--ctx", "abc"], {}, "ctx"),
        (["--port", "70000"], {}, "port"),
        (["--threads", "-1"], {}, "threads"),
        ([], {"MAYA_CTX": "0"}, "ctx"),
        (["--slots", "0"], {}, "slots"),
        ([], {"MAYA_CACHE_RAM_MIB": "lots"}, "cache_ram_mib"),
        ([], {"MAYA_FORCE_FAMILY": "maybe"}, "force_family"),
        ([], {"MAYA_ENGINE": "turbo"}, "engine"),
        (["--model", "/no/such/model.gguf", "--engine", "llamacpp"], {}, "model"),
        (["--host", "0.0.0.0"], {}, "host"),
    ],
)
def test_invalid_values_name_the_field(argv, environ, field):
    environ = {"MAYA_ENGINE": "scripted", **environ}
    with pytest.raises(ConfigError) as caught:
        _load(argv, environ)
    assert caught.value.name == field


def test_unknown_config_file_key_is_named(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"engine": "scripted", "prot": 1}))
    with pytest.raises(ConfigError) as caught:
        _load(["--config", str(path)])
    assert caught.value.name == "prot"


def test_binding_beyond_loopback_is_allowed_with_a_key():
    config = _load(["--engine", "scripted", "--host", "0.0.0.0", "--api-key", "k"])
    assert config.host == "0.0.0.0"


def _run_cli(*args):
    return subprocess.run([sys.executable, "-m", "maya_server", *args], capture_output=True, text=True, timeout=60)


def test_cli_exits_2_with_a_clear_message_and_no_traceback():
    result = _run_cli("--ctx", "lots", "--engine", "scripted")
    assert result.returncode == 2
    assert "ctx" in result.stderr
    assert "Traceback" not in result.stderr


def test_cli_refuses_to_bind_publicly_without_a_key(tmp_path):
    script = tmp_path / "script.json"
    script.write_text('["hi"]')
    result = _run_cli("--host", "0.0.0.0", "--engine", "scripted", "--script", str(script))
    assert result.returncode == 2
    assert "refusing to listen on 0.0.0.0 without an API key" in result.stderr
    assert "Traceback" not in result.stderr


def test_cli_rejects_a_config_file_that_is_not_json(tmp_path):
    path = tmp_path / "broken.json"
    path.write_text("{port: 1")
    result = _run_cli("--config", str(path))
    assert result.returncode == 2
    assert "config" in result.stderr and "Traceback" not in result.stderr


def test_cli_refuses_a_model_file_that_is_not_gguf(tmp_path):
    model = tmp_path / "model.gguf"
    model.write_bytes(b"not a model")
    result = _run_cli("--model", str(model))
    assert result.returncode == 2
    assert "model" in result.stderr and "is not a GGUF file" in result.stderr and "Traceback" not in result.stderr
