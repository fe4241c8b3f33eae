"""Which DeepSeek family serves a model: `maya-ds4` picks `deepseek-v4.1` by itself for a V4.1 model (its
config.json `model_type`, its vocabulary), `deepseek-v4` otherwise, and says which and why at start-up and in
`/v1/status` (`family_reason`). `--family deepseek-v4` on a V4.1 model is refused like a contradicted
template, unless `--force-family`.

The model folders are `tests/deepseek_models.py`'s, served through `--engine upstream` in front of a fake vLLM
(`tests/fake_upstream.py`): V4.1 runs on vLLM or SGLang today, the pinned llama.cpp cannot load it.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from maya_server.config import ServerConfig
from maya_server.engine.upstream.engine import UpstreamEngine, UpstreamOptions
from maya_server.engine_setup import check_chat_template, detect_model_family, resolve_family
from maya_server.errors import ConfigError

from maya_server.families.detection import Detection
from maya_server.model.chat_template import template_from_model_dir

from tests.deepseek_models import model_folder
from tests.fake_upstream import FakeUpstream
from tests.families.official import DATA
from tests.llama_server import free_port
from tests.server import wait_for

V41_BY_VOCABULARY = "vocabulary: <｜System｜> at 128799, <｜deepseek_image｜> at 129264"
V41_BY_MODEL_TYPE = "config.json model_type deepseek_v41"
DEFAULT = "the template names none: the default"


@pytest.fixture(scope="module")
def upstream():
    server = FakeUpstream("vllm", None)
    yield server
    server.stop()


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    """{name: a model folder}: V4.1 with and without its config.json, V4 with and without its own."""
    directory = tmp_path_factory.mktemp("deepseek-folders")
    return {
        "v41-config": model_folder(directory / "a", "deepseek-v4.1", model_type="deepseek_v41"),
        "v41-vocabulary": model_folder(directory / "b", "deepseek-v4.1"),
        "v4": model_folder(directory / "c", "deepseek-v4"),
        "v4-config": model_folder(directory / "d", "deepseek-v4", model_type="deepseek_v4"),
    }


# ------------------------------------------------------------------ what the engine reports, what the edge decides

@pytest.mark.parametrize(("folder", "expected"), [
    ("v41-config", Detection("deepseek-v4.1", V41_BY_MODEL_TYPE)),
    ("v41-vocabulary", Detection("deepseek-v4.1", V41_BY_VOCABULARY)),
    ("v4", Detection(None)),
    ("v4-config", Detection(None)),
])
def test_the_upstream_engines_model_folder_names_the_family(upstream, folders, folder, expected):
    engine = UpstreamEngine.connect(UpstreamOptions(url=upstream.url, tokenizer_dir=str(folders[folder])))
    assert detect_model_family(engine) == expected


def test_every_replica_serves_the_first_ones_model_type(upstream, folders):
    from maya_server.engine_setup import create_engine

    second = FakeUpstream("vllm", None)
    try:
        engine = create_engine(ServerConfig(engine="upstream", upstream_url=(upstream.url, second.url),
                                            tokenizer=str(folders["v41-config"])))
        try:
            assert engine.model_type == "deepseek_v41"
            assert detect_model_family(engine) == Detection("deepseek-v4.1", V41_BY_MODEL_TYPE)
        finally:
            engine.shutdown()
    finally:
        second.stop()


def test_without_a_flag_the_models_family_is_served_and_why():
    v41 = Detection("deepseek-v4.1", V41_BY_VOCABULARY)
    config = resolve_family(ServerConfig(family="deepseek-v4", family_explicit=False), v41)
    assert (config.family, config.family_reason) == ("deepseek-v4.1", V41_BY_VOCABULARY)
    config = resolve_family(ServerConfig(family="glm", family_explicit=False), v41)   # `maya` too
    assert (config.family, config.family_reason) == ("deepseek-v4.1", V41_BY_VOCABULARY)
    config = resolve_family(ServerConfig(family="deepseek-v4", family_explicit=False), Detection(None))
    assert (config.family, config.family_reason) == ("deepseek-v4", DEFAULT)
    config = resolve_family(ServerConfig(family="deepseek-v4", family_explicit=False), "deepseek-v4")
    assert (config.family, config.family_reason) == ("deepseek-v4", "from the model's chat template")


def test_family_deepseek_v4_on_a_v41_model_is_refused_naming_why():
    """V4's prompt on V4.1 is what the model was not trained on (its tool calls go unparsed): as with a template
    of another family, start-up stops unless --force-family says the operator means it."""
    config = ServerConfig(family="deepseek-v4", family_explicit=True)
    with pytest.raises(ConfigError) as caught:
        resolve_family(config, Detection("deepseek-v4.1", V41_BY_MODEL_TYPE))
    message = str(caught.value)
    assert caught.value.name == "family"
    assert "--family deepseek-v4 contradicts the model, which is deepseek-v4.1 (config.json model_type deepseek_v41)" \
        in message
    assert "drop --family to use deepseek-v4.1" in message and "--force-family" in message


def test_family_deepseek_v41_on_a_v4_model_is_refused():
    config = ServerConfig(family="deepseek-v4.1", family_explicit=True)
    with pytest.raises(ConfigError) as caught:
        resolve_family(config, Detection("deepseek-v4", "from the model's chat template"))
    assert "contradicts the model's chat template, which is deepseek-v4" in str(caught.value)
    assert resolve_family(config, Detection(None)).family_reason == "as configured"   # nothing says otherwise
    agreed = resolve_family(config, Detection("deepseek-v4.1", V41_BY_VOCABULARY))
    assert (agreed.family, agreed.family_reason) == ("deepseek-v4.1", "as configured")


def test_force_family_serves_v4_on_a_v41_model_and_says_so(caplog):
    config = ServerConfig(family="deepseek-v4", family_explicit=True, force_family=True)
    with caplog.at_level("WARNING", logger="maya"):
        forced = resolve_family(config, Detection("deepseek-v4.1", V41_BY_VOCABULARY))
    assert forced.family == "deepseek-v4"
    assert forced.family_reason == "as configured, with --force-family over the model's deepseek-v4.1"
    [record] = [r for r in caplog.records if "--force-family" in r.getMessage()]
    assert record.levelname == "WARNING" and V41_BY_VOCABULARY in record.getMessage()


def test_a_v41_model_carrying_v4s_template_is_not_checked_against_it():
    """DeepSeek-V4.1 ships no template; a converter's V4 copy in its GGUF is no reference for V4.1's prompts."""
    class Engine:
        chat_template = template_from_model_dir(DATA / "deepseek-v3.1")   # a DeepSeek template: it names deepseek-v4
        tokenizer = None

    check = check_chat_template(ServerConfig(family="deepseek-v4.1"), Engine())
    assert check.result == "skipped" and "V4.1 ships none" in check.detail


# ------------------------------------------------------------------ maya-ds4 as an operator runs it

def run_ds4(*args: str, tmp_path: Path, wait: bool = True) -> tuple[subprocess.Popen, str, Path]:
    """`maya-ds4 ARGS` (this checkout's, as the console script runs it) on a free port, output to a log file;
    returns once /health answers (or, `wait` False, at once)."""
    port = free_port()
    log = tmp_path / f"maya-ds4-{port}.log"
    code = "import sys; from maya_server.cli import main_ds4; sys.argv[0] = 'maya-ds4'; main_ds4()"
    with open(log, "wb") as out:
        process = subprocess.Popen([sys.executable, "-c", code, "--port", str(port), *args],
                                   stdout=out, stderr=subprocess.STDOUT, cwd=Path(__file__).resolve().parent.parent)
    url = f"http://127.0.0.1:{port}"

    def healthy() -> bool:
        assert process.poll() is None, log.read_text()
        try:
            return httpx.get(url + "/health", timeout=1).status_code == 200
        except httpx.TransportError:
            return False

    if wait:
        assert wait_for(healthy, timeout=90)
    return process, url, log


def status_and_output(process, url: str, log: Path) -> tuple[dict, str]:
    """A started maya-ds4's /v1/status and, once it is stopped, its start-up output."""
    try:
        status = httpx.get(url + "/v1/status").json()
    finally:
        process.terminate()
        process.wait(timeout=30)
    return status, log.read_text()


def served(upstream, folder: Path, *flags: str, tmp_path: Path) -> tuple[dict, str]:
    """(/v1/status, the start-up output) of maya-ds4 in front of `upstream` with `folder` as --tokenizer."""
    return status_and_output(*run_ds4("--engine", "upstream", "--upstream-url", upstream.url,
                                      "--tokenizer", str(folder), *flags, tmp_path=tmp_path))


@pytest.mark.parametrize(("folder", "reason"), [("v41-config", V41_BY_MODEL_TYPE),
                                                 ("v41-vocabulary", V41_BY_VOCABULARY)])
def test_maya_ds4_serves_a_v41_model_as_v41_and_says_why(upstream, folders, tmp_path, folder, reason):
    status, output = served(upstream, folders[folder], tmp_path=tmp_path)
    assert (status["family"], status["family_reason"]) == ("deepseek-v4.1", reason)
    assert f"maya-ds4: deepseek-v4.1 family ({reason}); context 4096 tokens" in output
    assert "names no family Maya knows" not in output


def test_maya_ds4_serves_a_v4_model_as_v4(upstream, folders, tmp_path):
    status, output = served(upstream, folders["v4-config"], tmp_path=tmp_path)
    assert (status["family"], status["family_reason"]) == ("deepseek-v4", DEFAULT)
    assert f"maya-ds4: deepseek-v4 family ({DEFAULT}); context 4096 tokens" in output


def test_maya_ds4_refuses_family_deepseek_v4_on_a_v41_model(upstream, folders, tmp_path):
    process, _, log = run_ds4("--engine", "upstream", "--upstream-url", upstream.url,
                              "--tokenizer", str(folders["v41-vocabulary"]), "--family", "deepseek-v4",
                              tmp_path=tmp_path, wait=False)
    assert process.wait(timeout=60) == 2
    output = log.read_text()
    assert ("maya-ds4: invalid configuration: family: --family deepseek-v4 contradicts the model, which is "
            f"deepseek-v4.1 ({V41_BY_VOCABULARY}); drop --family to use deepseek-v4.1, or add --force-family") in output


def test_maya_ds4_with_force_family_serves_v4_on_a_v41_model_and_says_so(upstream, folders, tmp_path):
    status, output = served(upstream, folders["v41-config"], "--family", "deepseek-v4", "--force-family",
                            tmp_path=tmp_path)
    reason = "as configured, with --force-family over the model's deepseek-v4.1"
    assert (status["family"], status["family_reason"]) == ("deepseek-v4", reason)
    assert f"maya-ds4: deepseek-v4 family ({reason})" in output
    assert "WARNING" in output and V41_BY_MODEL_TYPE in output


# ------------------------------------------------------------------ maya-ds4 --model: a GGUF's vocabulary

@pytest.fixture(scope="module")
def v41_gguf(tmp_path_factory):
    from tests.deepseek_models import loadable_gguf

    return loadable_gguf(tmp_path_factory.mktemp("v41-gguf") / "v41.gguf", "deepseek-v4.1")


def embedded(model: Path, *flags: str, tmp_path: Path) -> tuple[dict, str]:
    """(/v1/status, the start-up output) of `maya-ds4 --model MODEL FLAGS` on the embedded llama-server."""
    return status_and_output(*run_ds4("--model", str(model), "--ctx", "2048", "--slots", "1", "--threads", "1",
                                      *flags, tmp_path=tmp_path))


@pytest.mark.slow
def test_maya_ds4_serves_a_gguf_with_v41s_vocabulary_as_v41(v41_gguf, tmp_path):
    status, output = embedded(v41_gguf, tmp_path=tmp_path)
    assert (status["family"], status["family_reason"]) == ("deepseek-v4.1", V41_BY_VOCABULARY)
    assert f"maya-ds4: deepseek-v4.1 family ({V41_BY_VOCABULARY}); context 2048 tokens" in output


@pytest.mark.slow
def test_maya_ds4_on_a_v41_gguf_refuses_family_deepseek_v4_and_forces_it(v41_gguf, tmp_path):
    process, _, log = run_ds4("--model", str(v41_gguf), "--ctx", "2048", "--slots", "1", "--threads", "1",
                              "--family", "deepseek-v4", tmp_path=tmp_path, wait=False)
    assert process.wait(timeout=120) == 2
    assert (f"--family deepseek-v4 contradicts the model, which is deepseek-v4.1 ({V41_BY_VOCABULARY})"
            in log.read_text())
    status, output = embedded(v41_gguf, "--family", "deepseek-v4", "--force-family", tmp_path=tmp_path)
    reason = "as configured, with --force-family over the model's deepseek-v4.1"
    assert (status["family"], status["family_reason"]) == ("deepseek-v4", reason)
    assert f"maya-ds4: deepseek-v4 family ({reason})" in output
