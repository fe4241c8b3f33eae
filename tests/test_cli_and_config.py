"""Configuration: flags > environment > config file (whose env block acts as environment)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from maya_server.cli import load
from maya_server.config import ConfigError


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


def test_kv_state_limits_from_flags_and_environment():
    defaults = _load(["--engine", "scripted"])
    assert (defaults.kv_states, defaults.kv_states_mib) == (8, 256)
    config = _load(["--engine", "scripted", "--kv-states", "0"], {"MAYA_KV_STATES": "3", "MAYA_KV_STATES_MIB": "64"})
    assert (config.kv_states, config.kv_states_mib) == (0, 64)


def test_the_registry_bounds_the_embedded_engines_kv_states(monkeypatch):
    from maya_server.config import ServerConfig
    from maya_server.engine import llamacpp, registry

    seen = {}
    monkeypatch.setattr(llamacpp, "LlamaCppEngine", lambda model, **options: seen.update(options))
    registry.create_engine(ServerConfig(model="m.gguf", kv_states=3, kv_states_mib=2))
    states = seen["kv_states"]
    assert (states.max_entries, states.max_bytes) == (3, 2 * 2**20)


def test_family_defaults_per_command():
    assert load(["--engine", "scripted"], "maya", "glm", environ={}).family == "glm"
    assert load(["--engine", "scripted"], "maya-ds4", "deepseek-v4", environ={}).family == "deepseek-v4"


@pytest.mark.parametrize(
    ("argv", "environ", "field"),
    [
        (["--ctx", "abc"], {}, "ctx"),
        (["--port", "70000"], {}, "port"),
        (["--threads", "-1"], {}, "threads"),
        ([], {"MAYA_CTX": "0"}, "ctx"),
        (["--kv-states", "-1"], {}, "kv_states"),
        ([], {"MAYA_KV_STATES_MIB": "lots"}, "kv_states_mib"),
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
