"""Every shell and Python example in README.md runs, as written, against a Maya this test starts.

The blocks are read from the README itself, so editing an example changes what is tested. The only
change made to them is the address: the README's `http://127.0.0.1:8080` becomes this server's. Maya
runs the scripted engine (the real model would make the suite slow; its own tests are
tests/engine/). A block whose info string has a second word is not run, and that word says why
(`EXEMPT`); the prose beside it says so too."""

from __future__ import annotations

import contextlib
import io
import json
import re
import shlex
import subprocess
from pathlib import Path

import pytest

from tests.server import RunningServer, scripted_config
from tests.scripted import RecordingScriptedEngine

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
README_URL = "http://127.0.0.1:8080"
FENCE = re.compile(r"^```([^\n]*)\n(.*?)^```$", re.M | re.S)
RUN = {"sh", "python"}
COPYABLE_LIMIT = 256
"""The most tokens a README example may let the model write: on the shipped model an example without a limit
generated for minutes."""
EXEMPT = {
    "make": "the two commands themselves (`make serve`, `make test`)",
    "your-model": "needs a GGUF of your own",
    "gpu": "needs a GPU engine",
}


def blocks(text: str) -> list[tuple[str, str, str]]:
    """(language, the reason it is not run or "", code) of each fenced block, in order."""
    found = []
    for match in FENCE.finditer(text):
        words = match.group(1).split()
        found.append((words[0] if words else "", " ".join(words[1:]), match.group(2)))
    return found


EXAMPLES = blocks(README.read_text())
SHELL = [code for language, exempt, code in EXAMPLES if language == "sh" and not exempt]
PYTHON = [code for language, exempt, code in EXAMPLES if language == "python" and not exempt]


@pytest.fixture(scope="module")
def maya():
    server = RunningServer(scripted_config(), RecordingScriptedEngine(["The capital of France is Paris."]))
    yield server
    server.stop()


def local(code: str, server: RunningServer) -> str:
    return code.replace(README_URL, server.url)


def limits_since(server: RunningServer, before: int) -> list[int]:
    """The output limit of each generation since the engine had `before` (the room left in the context when
    the request set none)."""
    return [params.max_tokens for params in list(server.engine.params)[before:]]


def test_the_readme_has_runnable_examples_of_both_kinds():
    assert len(SHELL) >= 2 and len(PYTHON) >= 4
    assert all(README_URL in code for code in SHELL)


def test_every_block_not_run_says_why():
    for language, exempt, code in EXAMPLES:
        if language in RUN and exempt:
            assert exempt in EXEMPT, f"an unknown reason not to run a {language} block: {exempt!r}"
        if exempt == "make":
            assert all(shlex.split(line)[0] == "make" for line in code.splitlines() if line.strip())


@pytest.mark.parametrize("index", range(len(SHELL)))
def test_the_shell_example_runs(maya, index):
    before = len(maya.engine.params)
    result = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", local(SHELL[index], maya)],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    answer = json.loads(result.stdout)
    assert answer["object"] in ("chat.completion", "response"), answer
    text = (answer["choices"][0]["message"]["content"] if answer["object"] == "chat.completion"
            else answer["output"][0]["content"][0]["text"])
    assert text == "The capital of France is Paris."
    assert 0 < max(limits_since(maya, before)) <= COPYABLE_LIMIT, SHELL[index]


def test_the_python_examples_run_in_order(maya):
    """In one namespace, as a reader pastes them into one session (the Responses block uses the Chat block's
    `client`)."""
    namespace: dict = {"__name__": "readme"}
    for code in PYTHON:
        printed = io.StringIO()
        before = len(maya.engine.params)
        with contextlib.redirect_stdout(printed):
            exec(compile(local(code, maya), str(README), "exec"), namespace)
        assert "The capital of France is Paris." in printed.getvalue(), code
        assert 0 < max(limits_since(maya, before)) <= COPYABLE_LIMIT, code
