"""SIGTERM with open streams, and the scripted engine's bounded vocabulary."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import httpx

from maya_server.engine.scripted import ScriptTokenizer
from maya_server.http.shutdown import SHUTDOWN_CODE

from tests.server import wait_for


def start_maya(tmp_path, *extra: str) -> tuple[subprocess.Popen, str]:
    script = tmp_path / "script.json"
    script.write_text(json.dumps(["tick " * 2000]))
    process = subprocess.Popen(
        [sys.executable, "-m", "maya_server", "--engine", "scripted", "--family", "chatml", "--script", str(script),
         "--script-delay", "0.01", "--port", "0", *extra],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )
    for line in process.stderr:
        found = re.search(r"running on http://(127\.0\.0\.1:\d+)", line)
        if found:
            return process, "http://" + found.group(1)
    raise AssertionError(f"maya did not start (exit {process.wait()})")


def read_until_stopped(url: str, path: str, body: dict, started: list) -> list[str]:
    with httpx.Client(base_url=url, timeout=30) as http, http.stream("POST", path, json=body) as answer:
        lines = []
        for line in answer.iter_lines():
            if line.startswith("data: "):
                lines.append(line[6:])
                if len(lines) == 1:  # the second stream waits for the one engine slot
                    started.append(path)
        return lines


def test_sigterm_ends_open_streams_with_a_terminal_event_and_exits_0(tmp_path):
    process, url = start_maya(tmp_path, "--max-queue", "8")
    try:
        started: list = []
        requests = [("/v1/responses", {"input": "hi", "stream": True}),
                    ("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}], "stream": True})]
        with ThreadPoolExecutor(2) as pool:
            streams = [pool.submit(read_until_stopped, url, path, body, started) for path, body in requests]
            assert wait_for(lambda: len(started) == 2, 20)
            job = httpx.post(url + "/v1/responses", json={"input": "hi", "background": True, "store": True}).json()
            process.send_signal(signal.SIGTERM)
            responses_lines, chat_lines = (f.result(timeout=20) for f in streams)
        assert process.wait(timeout=20) == 0
    finally:
        process.kill()
    last = json.loads(responses_lines[-1])
    assert last["type"] == "error" and last["code"] == SHUTDOWN_CODE
    numbers = [json.loads(line)["sequence_number"] for line in responses_lines]
    assert numbers == list(range(len(numbers)))
    assert json.loads(chat_lines[-1])["error"]["code"] == SHUTDOWN_CODE
    assert job["status"] == "queued"


def test_the_scripted_vocabulary_is_bounded():
    tokenizer = ScriptTokenizer(limit=1000)
    script_ids = tokenizer.encode("the script", special=True)
    for n in range(5000):
        tokenizer.encode(f"unique{n} words{n}", special=False)
    assert tokenizer.size == 1000
    assert tokenizer.decode(script_ids) == "the script"
    assert tokenizer.decode(tokenizer.encode("unique1 words1", special=False)) == "unique1 words1"
