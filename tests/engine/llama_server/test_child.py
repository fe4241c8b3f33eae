"""The child process's edges without a model: what it inherits, and what Maya says when it dies while loading."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from maya_server.engine.llama_server.child import (
    CHILD_ENVIRONMENT,
    LlamaServerOptions,
    LlamaServerProcess,
    child_environment,
)
from maya_server.engine_setup import crash_advice
from maya_server.errors import EngineStartError

from tests.llama_server import free_port


def fake_llama_server(path: Path, body: str) -> Path:
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return path


def test_the_child_inherits_only_what_it_needs():
    environ = {"PATH": "/usr/bin", "HOME": "/home/u", "LANG": "C.UTF-8", "CUDA_VISIBLE_DEVICES": "1",
               "MAYA_API_KEYS": "sk-secret", "MAYA_UPSTREAM_KEY": "k", "LLAMA_ARG_N_PREDICT": "1", "AWS_SECRET": "x"}
    assert child_environment(environ) == {"PATH": "/usr/bin", "HOME": "/home/u", "LANG": "C.UTF-8",
                                          "CUDA_VISIBLE_DEVICES": "1"}
    assert not any(name.startswith(("MAYA_", "LLAMA_ARG_")) for name in CHILD_ENVIRONMENT)


def test_a_real_child_sees_no_key_in_its_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("MAYA_API_KEYS", "sk-very-secret")
    dump = tmp_path / "environ"
    binary = fake_llama_server(tmp_path / "llama-server", f"env > {dump}\nexit 3\n")
    with pytest.raises(EngineStartError):
        LlamaServerProcess(LlamaServerOptions(binary=binary, model="m.gguf", slots=1, ctx=512)).start()
    seen = dump.read_text()
    assert "PATH=" in seen and "sk-very-secret" not in seen and "MAYA_" not in seen


def test_operator_flags_come_after_mayas_own(tmp_path):
    argv = tmp_path / "argv"
    binary = fake_llama_server(tmp_path / "llama-server", f'printf "%s\\n" "$@" > {argv}\nexit 3\n')
    options = LlamaServerOptions(binary=binary, model="m.gguf", slots=1, ctx=512, extra_args=("--no-repack", "-fa", "on"))
    with pytest.raises(EngineStartError):
        LlamaServerProcess(options).start()
    words = argv.read_text().split("\n")
    assert words[-4:-1] == ["--no-repack", "-fa", "on"] and words.index("--model") < words.index("--no-repack")


def test_the_child_runs_without_flash_attention_and_an_operator_can_turn_it_on(tmp_path):
    """Maya's CPU build decodes a long context faster without it (`FLASH_ATTENTION`); llama-server keeps the last
    `--flash-attn` it is given, so the operator's, which come after Maya's, win."""
    argv = tmp_path / "argv"
    binary = fake_llama_server(tmp_path / "llama-server", f'printf "%s\\n" "$@" > {argv}\nexit 3\n')
    for extra, last in (((), "off"), (("--flash-attn", "on"), "on")):
        options = LlamaServerOptions(binary=binary, model="m.gguf", slots=1, ctx=512, extra_args=extra)
        with pytest.raises(EngineStartError):
            LlamaServerProcess(options).start()
        words = argv.read_text().split("\n")
        given = [words[i + 1] for i, word in enumerate(words) if word == "--flash-attn"]
        assert given[0] == "off" and given[-1] == last


def test_a_crash_while_loading_says_what_happened_and_what_to_try(tmp_path):
    binary = fake_llama_server(tmp_path / "llama-server", 'echo "load_tensors: loading model tensors"\nkill -SEGV $$\n')
    with pytest.raises(EngineStartError) as caught:
        LlamaServerProcess(LlamaServerOptions(binary=binary, model="m.gguf", slots=1, ctx=512)).start()
    message = str(caught.value)
    assert "exited (signal SIGSEGV) while loading the model" in message
    assert "load_tensors: loading model tensors" in message          # its last log lines
    assert caught.value.returncode == -signal.SIGSEGV                # the fact; the edge adds what to try
    assert "--engine-arg=--no-repack" in crash_advice(caught.value.returncode)


def test_advice_fits_the_signal():
    assert crash_advice(None) == "" and crash_advice(1) == ""        # an ordinary exit: its log says why
    assert "another CPU" not in crash_advice(-11) and "--no-repack" in crash_advice(-11)
    assert "delete ~/.cache/maya/llama-server-*" in crash_advice(-4)  # SIGILL: built for another CPU


def test_the_cli_reports_a_crash_as_a_crash_not_a_bad_setting(tmp_path):
    """`maya` with no flags, on a machine whose cached llama-server dies while loading: exit 2, a message
    that names the signal and the way out, and no "invalid configuration"."""
    environ = {**os.environ, "MAYA_LLAMA_SERVER_CACHE": str(tmp_path)}
    binary = subprocess.run([sys.executable, "-c", "from maya_server.engine.llama_server.build import cached_binary; "
                             "print(cached_binary())"], env=environ, capture_output=True, text=True, check=True)
    target = Path(binary.stdout.strip())
    target.parent.mkdir(parents=True)
    fake_llama_server(target, 'echo "ggml_backend_amx: crashing"\nkill -SEGV $$\n')
    result = subprocess.run([sys.executable, "-m", "maya_server", "--port", str(free_port())], env=environ,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert "maya: the engine did not start: llama-server exited (signal SIGSEGV)" in result.stderr
    assert "ggml_backend_amx: crashing" in result.stderr and "--engine-arg=--no-repack" in result.stderr
    assert "invalid configuration" not in result.stderr and "Traceback" not in result.stderr
