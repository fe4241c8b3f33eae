"""Configuring the upstream engine: flags and MAYA_* variables, validation, and a clean start-up failure."""

from __future__ import annotations

import subprocess
import sys

import pytest

from maya_server.cli import load
from maya_server.errors import ConfigError

from tests.llama_server import free_port


def _load(argv, environ=None):
    return load(argv, "maya", "glm", environ=environ or {})


def test_upstream_settings_from_flags_and_environment(tokenizer_dir):
    config = _load(
        ["--engine", "upstream", "--upstream-url", "http://gpu1:8000/", "--tokenizer", tokenizer_dir,
         "--upstream-slots", "32", "--upstream-connect-timeout", "2.5"],
        {"MAYA_UPSTREAM_KEY": "sk-x", "MAYA_UPSTREAM_READ_TIMEOUT": "90", "MAYA_UPSTREAM_MODEL": "glm"},
    )
    assert config.upstream_url == ("http://gpu1:8000",)  # one URL: one replica, the single upstream engine
    assert (config.upstream_slots, config.upstream_connect_timeout, config.upstream_read_timeout) == (32, 2.5, 90.0)
    assert (config.upstream_key, config.upstream_model) == ("sk-x", "glm")
    assert config.ctx is None  # the upstream's own context unless --ctx says otherwise
    assert "sk-x" not in repr(config)
    assert config.served_model_name == tokenizer_dir.rstrip("/").rsplit("/", 1)[-1]


@pytest.mark.parametrize(
    ("argv", "environ", "field"),
    [
        (["--engine", "upstream"], {}, "upstream_url"),
        (["--engine", "upstream", "--upstream-url", "http://gpu1:8000"], {}, "tokenizer"),
        (["--engine", "upstream", "--upstream-url", "http://gpu1:8000", "--tokenizer", "/no/such/dir"], {}, "tokenizer"),
        (["--upstream-url", "gpu1:8000"], {}, "upstream_url"),
        (["--upstream-url", "http://user:secret@gpu1:8000"], {}, "upstream_url"),
        (["--upstream-slots", "0"], {}, "upstream_slots"),
        ([], {"MAYA_UPSTREAM_READ_TIMEOUT": "0"}, "upstream_read_timeout"),
        ([], {"MAYA_UPSTREAM_CONNECT_TIMEOUT": "soon"}, "upstream_connect_timeout"),
    ],
)
def test_invalid_upstream_settings_name_the_field(argv, environ, field):
    with pytest.raises(ConfigError) as caught:
        _load(argv, {"MAYA_ENGINE": "scripted", **environ})
    assert caught.value.name == field
    assert "secret" not in str(caught.value)


def test_an_unreachable_upstream_stops_start_up_with_one_line(tokenizer_dir):
    port = free_port()  # nothing listens there
    result = subprocess.run(
        [sys.executable, "-m", "maya_server", "--engine", "upstream", "--upstream-url", f"http://127.0.0.1:{port}",
         "--tokenizer", tokenizer_dir, "--upstream-key", "sk-never-printed", "--upstream-connect-timeout", "2"],
        capture_output=True, text=True, timeout=60,
    )
    assert result.returncode == 2
    assert "Traceback" not in result.stderr and "sk-never-printed" not in result.stderr + result.stdout
    assert f"cannot connect to the upstream engine at http://127.0.0.1:{port}" in result.stderr
