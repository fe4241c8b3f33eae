"""The start-up check of the family against the model's own chat template, with real GGUFs and llama-server.

Tiny GGUFs with GLM's real vocabulary (tests/family_models.py) carry: GLM-5.3-Flash's official template,
which Maya must detect as `glm-5.3` and match token for token; and GLM-5.2's, altered on purpose (its effort
line upper-cased), which Maya still detects as `glm-5.2` but must report: a WARNING at start-up naming the
conversation, the first differing token and the variant, the same in /v1/status, and exit 2 with
`--template-check fatal`.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.embedded import start_cli
from tests.family_models import family_model_with_template

pytestmark = pytest.mark.slow

TEMPLATES = Path(__file__).parent.parent / "families" / "templates"
ALTERED_52 = (TEMPLATES / "glm-5.2.jinja").read_text().replace(
    "Reasoning Effort: {{ effective_reasoning_effort | capitalize }}",
    "Reasoning Effort: {{ effective_reasoning_effort | upper }}")


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    directory = tmp_path_factory.mktemp("template-check")
    return {
        "glm-5.3": family_model_with_template("glm-5.1", (TEMPLATES / "glm-5.3-flash.jinja").read_text(),
                                              directory / "glm-5.3.gguf"),
        "altered": family_model_with_template("glm-5.1", ALTERED_52, directory / "altered-5.2.gguf"),
    }


def serve(model: Path, tmp_path, *args: str) -> tuple[dict, str]:
    process, url = start_cli("--model", str(model), *args, tmp_path=tmp_path)
    try:
        status = httpx.get(url + "/v1/status").json()
    finally:
        process.terminate()
        process.wait(timeout=30)
    return status, (tmp_path / "maya.log").read_text()


def test_glm53s_own_template_is_detected_and_matches(models, tmp_path):
    status, log = serve(models["glm-5.3"], tmp_path)
    assert status["family"] == "glm-5.3"
    check = status["template_check"]
    assert check["result"] == "match" and check["family"] == "glm-5.3" and check["conversations"] >= 10
    assert "WARNING" not in log
    print(f"start-up check against llama-server's tokenizer: {check['elapsed_ms']} ms")


def test_a_template_maya_renders_differently_starts_with_a_warning_shown_in_status(models, tmp_path):
    status, log = serve(models["altered"], tmp_path)
    assert status["family"] == "glm-5.2"
    check = status["template_check"]
    assert check["result"] == "mismatch" and check["family"] == "glm-5.2"
    first = {m["conversation"]: m for m in check["mismatches"]}["system"]
    assert (first["token_index"], first["maya"], first["template"]) == (8, " Max", " MAX")
    warning = next(line for line in log.splitlines() if "WARNING" in line)
    assert "glm-5.2 renderer" in warning and "system: token 8 is ' Max'" in warning and "' MAX'" in warning


def test_template_check_fatal_stops_start_up(models, tmp_path):
    done = subprocess.run([str(Path(sys.executable).parent / "maya"), "--port", "0", "--model", str(models["altered"]),
                           "--template-check", "fatal"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 2
    assert "template_check" in done.stderr and "differently from the glm-5.2 renderer" in done.stderr


def test_template_check_off_looks_at_nothing(models, tmp_path):
    status, log = serve(models["altered"], tmp_path, "--template-check", "off")
    assert status["template_check"]["result"] == "off" and "WARNING" not in log
