"""Codex CLI (`@openai/codex`, pinned in package.json) completes a tool round trip against Maya, offline.

`codex exec` with docs/clients.md's `config.toml` (`codex_config.toml`, only its base_url
pointed at the test's Maya) in a temporary CODEX_HOME: the scripted GLM model calls
Codex's `exec_command` tool, Codex runs the command and sends its output back, and the
model's answer is what `codex exec` prints. Codex's first request is large (~40 KB of
instructions and tool schemas), so the test server gets a large context.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.chat.test_families_through_chat import glm_call

from tests.clients.node_packages import ensure_installed

CONFIG = Path(__file__).with_name("codex_config.toml")
README_BASE_URL = "http://127.0.0.1:8080/v1"
MARKER = "maya-codex-ok"
SCRIPT = [glm_call("exec_command", cmd=f"echo {MARKER}"), f"The command printed {MARKER}."]

pytestmark = pytest.mark.skipif(shutil.which("node") is None, reason="the Node clients need Node.js")


def test_codex_exec_runs_a_tool_round_trip(maya, tmp_path):
    server, recorder = maya(SCRIPT, api_keys=("codex-test-key",))
    home, work = tmp_path / "codex-home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    config = CONFIG.read_text()
    recipe = config.split("\n", 1)[1]  # all but the comment naming this file
    assert README_BASE_URL in recipe and recipe in Path(__file__).parents[2].joinpath("docs", "clients.md").read_text()
    (home / "config.toml").write_text(config.replace(README_BASE_URL, server.url + "/v1"))
    codex = ensure_installed() / ".bin" / "codex"
    result = subprocess.run(
        [str(codex), "exec", "--skip-git-repo-check", f"Run: echo {MARKER}"], cwd=work, stdin=subprocess.DEVNULL,
        capture_output=True, text=True, timeout=180,
        env={**os.environ, "CODEX_HOME": str(home), "MAYA_API_KEY": "codex-test-key"},
    )
    assert result.returncode == 0, result.stderr[-4000:]
    assert result.stdout.strip().endswith(f"The command printed {MARKER}.")
    assert server.engine.calls == 2
    first, second = (e.request_json() for e in recorder.of("/v1/responses"))
    assert first["stream"] is True and first["reasoning"] == {"effort": "none"}
    assert all(tool["type"] == "function" for tool in first["tools"])
    assert len(first["client_metadata"]["x-codex-turn-metadata"]) > 512  # accepted, never echoed
    outputs = [item for item in second["input"] if item.get("type") == "function_call_output"]
    assert len(outputs) == 1 and MARKER in str(outputs[0]["output"])
    assert MARKER in server.engine.last_prompt_text  # the command's output reached the model
    assert all(e.status == 200 for e in recorder.exchanges)
