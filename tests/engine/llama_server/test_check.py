"""`--llama-server PATH`: the operator's own llama-server, refused at start-up (exit 2, naming what is missing) when it
lacks a flag or a field Maya relies on, and served like the built one when it is the same llama-server."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from maya_server.engine.llama_server.build import ensure_binary
from maya_server.engine.llama_server.check import check_flags
from maya_server.errors import EngineOptionError

from tests.embedded import embedded_server
from tests.fake_llama_server import fake_binary
from tests.llama_server import free_port


def _maya(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "maya_server", "--port", str(free_port()), *args],
                          capture_output=True, text=True, timeout=120)


def test_a_llama_server_without_the_flags_maya_gives_is_refused_naming_them(tmp_path):
    old = fake_binary(tmp_path / "llama-server", omit_flags=("--cache-ram", "--slot-prompt-similarity"))
    result = _maya("--llama-server", str(old))
    assert result.returncode == 2, result.stderr
    assert "maya: invalid configuration: llama_server" in result.stderr
    assert f"{old} is a llama-server without what Maya needs" in result.stderr
    assert "--cache-ram (the RAM prompt cache (--cache-ram-mib))" in result.stderr
    assert "--slot-prompt-similarity (Maya's own slot choice)" in result.stderr
    assert "--flash-attn" not in result.stderr and "Traceback" not in result.stderr


def test_a_host_that_binds_no_unix_socket_is_refused(tmp_path):
    binary = tmp_path / "llama-server"
    help_text = subprocess.run([str(fake_binary(binary)), "--help"], capture_output=True, text=True).stdout
    check_flags(binary)  # the fake with nothing left out offers every flag
    binary.write_text("#!/bin/sh\ncat <<'EOF'\n" + help_text.replace(".sock", "") + "\nEOF\n")
    with pytest.raises(EngineOptionError, match=r"--host binding a Unix socket \(a path ending in \.sock\)"):
        check_flags(binary)
    with pytest.raises(EngineOptionError, match=r"--mmproj \(the multimodal projector"):
        binary.write_text("#!/bin/sh\ncat <<'EOF'\n" + help_text.replace("--mmproj", "") + "\nEOF\n")
        check_flags(binary, mmproj=True)


def test_a_llama_server_whose_answers_lack_fields_maya_reads_is_refused_naming_them(tmp_path):
    """It takes every flag and starts, but its `/completion` sends no ids, no progress and ignores `id_slot`, and its
    `/tokenize` ignores `parse_special`: Maya exits 2 before serving, naming each."""
    fake = fake_binary(tmp_path / "llama-server",
                       omit_fields=("return_tokens", "return_progress", "id_slot", "parse_special"))
    result = _maya("--llama-server", str(fake))
    assert result.returncode == 2, result.stderr
    assert f"{fake} started, but llama-server lacks what Maya needs" in result.stderr
    for missing in ("/tokenize's parse_special", "/completion's return_tokens (each event's tokens)",
                    "/completion's return_progress (prompt_progress events)", "/completion's id_slot"):
        assert missing in result.stderr
    assert "Traceback" not in result.stderr


def test_a_missing_binary_is_a_setting_error(tmp_path):
    result = _maya("--llama-server", str(tmp_path / "nowhere"))
    assert result.returncode == 2
    assert f"invalid configuration: llama_server: {tmp_path / 'nowhere'} is not a file" in result.stderr
    result = subprocess.run([sys.executable, "-m", "maya_server", "--port", str(free_port())], capture_output=True,
                            text=True, timeout=120, env={**os.environ, "MAYA_LLAMA_SERVER": str(tmp_path / "nowhere")})
    assert result.returncode == 2 and "is not a file" in result.stderr


def _answer(server) -> tuple[str, str, str]:
    """A temperature-0 Chat answer, and a streamed Responses answer's text and last event (how many deltas carry it
    depends on timing: Maya relays the tokens that arrived meanwhile together)."""
    client = server.client()
    chat = client.chat.completions.create(model="x", messages=[{"role": "user", "content": "Name three colours."}],
                                          temperature=0, max_tokens=24, seed=1)
    with client.responses.stream(model="x", input="Count to five.", temperature=0, max_output_tokens=16) as stream:
        events = list(stream)
    text = "".join(event.delta for event in events if event.type == "response.output_text.delta")
    return chat.choices[0].message.content, text, events[-1].type


@pytest.mark.slow
def test_a_copy_of_the_built_llama_server_serves_exactly_as_the_built_one(tmp_path):
    """The cache entry copied elsewhere (the binary with its libraries, where the build has them) and given with
    --llama-server passes every check, the token self-check among them, and answers as the built one does."""
    built = ensure_binary()
    copy = tmp_path / "own"
    shutil.copytree(built.parent, copy, symlinks=True, ignore=shutil.ignore_patterns(".lock", "backends.json"))
    with embedded_server() as server:
        expected = _answer(server)
        assert server.http().get("/v1/status").json()["engine"]["llama_server"]["built_by_maya"] is True
    with embedded_server(llama_server=str(copy / "llama-server")) as server:
        assert _answer(server) == expected
        placement = server.http().get("/v1/status").json()["engine"]["llama_server"]
        assert placement["binary"] == str(copy / "llama-server")
        assert placement["built_by_maya"] is False and placement["backends"] is None
    assert expected[2] in ("response.completed", "response.incomplete") and expected[0] and expected[1]
