"""The real `llama-server`, built once from llama-cpp-python's sdist and cached outside the repo.

The upstream-engine tests need a real OpenAI-compatible server that accepts
token-id prompts; llama.cpp's `llama-server` does, and the llama-cpp-python
sdist we already depend on carries its source (`vendor/llama.cpp`). Building
it takes minutes on two cores, so the binary is kept under
`~/.cache/maya/llama-server-VERSION/` (override the root with
`MAYA_LLAMA_SERVER_CACHE`), keyed by the pinned llama-cpp-python version, and
later runs find it there. `make test` runs this module first; with the binary
cached it is a no-op.

    python -m tests.llama_server_binary    # prints the binary's path, building it if needed
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BINARY_NAME = "llama-server"
CMAKE_OPTIONS = (
    "-DCMAKE_BUILD_TYPE=Release",
    "-DBUILD_SHARED_LIBS=OFF",  # one self-contained file in the cache, no shared libraries beside it
    "-DLLAMA_BUILD_SERVER=ON",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
    "-DLLAMA_BUILD_APP=OFF",
    "-DLLAMA_BUILD_UI=OFF",
    "-DLLAMA_USE_PREBUILT_UI=OFF",  # on by default: it would fetch the web UI from a hub at build time
    "-DLLAMA_OPENSSL=OFF",  # plain HTTP on loopback is all the tests need
)


def llama_cpp_version() -> str:
    """The llama-cpp-python version pinned in pyproject.toml: the cache key."""
    text = (REPO / "pyproject.toml").read_text()
    match = re.search(r'"llama-cpp-python==([^"]+)"', text)
    if match is None:
        raise RuntimeError("pyproject.toml does not pin llama-cpp-python==VERSION")
    return match.group(1)


def cache_dir(version: str | None = None) -> Path:
    root = os.environ.get("MAYA_LLAMA_SERVER_CACHE") or str(Path.home() / ".cache" / "maya")
    return Path(root) / f"llama-server-{version or llama_cpp_version()}"


def cached_binary() -> Path:
    """Where the binary lives once built (it may not exist yet)."""
    return cache_dir() / BINARY_NAME


def ensure_binary() -> Path:
    """The cached binary, building it first when it is missing (one builder at a time)."""
    binary = cached_binary()
    if _is_executable(binary):
        return binary
    binary.parent.mkdir(parents=True, exist_ok=True)
    with open(binary.parent / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # a concurrent build waits here, then finds the binary
        if not _is_executable(binary):
            _build(binary)
    return binary


def _is_executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def _build(binary: Path) -> None:
    version = llama_cpp_version()
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="maya-llama-server-") as work:
        work_dir = Path(work)
        source = _fetch_source(version, work_dir)
        build = work_dir / "build"
        _run(["cmake", "-S", str(source), "-B", str(build), *_generator(), *CMAKE_OPTIONS])
        jobs = str(os.cpu_count() or 2)
        _run(["cmake", "--build", str(build), "--target", BINARY_NAME, "--config", "Release", "-j", jobs])
        built = next(build.rglob(BINARY_NAME))
        staged = binary.with_suffix(".partial")
        shutil.copy2(built, staged)
        staged.replace(binary)  # atomic: a half-copied file is never taken for the binary
    print(f"built {binary} in {time.monotonic() - started:.0f}s", file=sys.stderr)


def _fetch_source(version: str, work_dir: Path) -> Path:
    """Download the sdist with pip (PyPI is reachable; no other host is) and unpack its llama.cpp tree."""
    print(f"downloading llama-cpp-python {version} sdist for llama-server", file=sys.stderr)
    _run([sys.executable, "-m", "pip", "download", "--quiet", f"llama-cpp-python=={version}",
          "--no-binary", ":all:", "--no-deps", "-d", str(work_dir)])
    archive = next(work_dir.glob("llama_cpp_python-*.tar.gz"))
    prefix = f"{archive.name.removesuffix('.tar.gz')}/vendor/llama.cpp/"
    with tarfile.open(archive) as tar:
        members = [m for m in tar.getmembers() if m.name.startswith(prefix)]
        tar.extractall(work_dir, members=members, filter="data")
    return work_dir / prefix


def _generator() -> list[str]:
    """Ninja when it is on PATH (or in the venv beside this Python), else cmake's default Makefiles."""
    ninja = shutil.which("ninja") or shutil.which("ninja", path=str(Path(sys.executable).parent))
    return ["-G", "Ninja", f"-DCMAKE_MAKE_PROGRAM={ninja}"] if ninja else []


def _run(command: list[str]) -> None:
    result = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if result.returncode != 0:
        sys.stderr.write(result.stdout[-8000:])
        raise RuntimeError(f"building llama-server failed: {' '.join(command[:4])} … exited {result.returncode}")


def main() -> int:
    try:
        print(ensure_binary())
    except (RuntimeError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
