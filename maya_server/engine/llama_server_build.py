"""llama.cpp's `llama-server`, built once from a pinned registry source and cached outside the repo.

Maya's default engine is `llama-server` run as a child process, and PyPI (the
one registry a fresh machine is sure to reach) ships no binary of it, but the
llama-cpp-python sdist carries llama.cpp's source (`vendor/llama.cpp`). So the
first `make serve` or `make test` downloads that sdist with pip and builds the
one `llama-server` target (about 5 minutes on two cores), printing its progress.
The binary is kept under `~/.cache/maya/llama-server-VERSION-KEY/` (override the
root with `MAYA_LLAMA_SERVER_CACHE`); later runs find it there. Concurrent
builders take turns on a lock file.

Which CPU code it may run. ggml builds for the machine it is built on
(`-march=native`), which is the fastest choice, with one exception: its AMX
kernels (Intel Sapphire Rapids and later) crashed llama-server with SIGSEGV
while it loaded a model on a Sapphire Rapids VM, so every AMX instruction set is
switched off at compile time (`AVOIDED_CPU_FEATURES`, handed to the compiler as
`-mno-…`; an explicit `-mno-` wins over what `-march=native` implies). The
safety is then a property of the build's command line, which a test checks on
any machine, not of the CPU the tests happened to run on. Because a native
binary may use instructions another CPU lacks, the cache KEY hashes the CPU's
feature flags with the build options: a home directory moved to another
machine rebuilds instead of dying with SIGILL.

    python -m maya_server.engine.llama_server_build    # prints the binary's path, building it if needed
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import platform
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from collections import deque
from pathlib import Path

LLAMA_CPP_SOURCE_VERSION = "0.3.36"
"""The llama-cpp-python sdist whose `vendor/llama.cpp` we build: the pinned engine, and the cache key."""
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
    "-DLLAMA_OPENSSL=OFF",  # Maya talks to its child over a private socket; no TLS needed
    "-DGGML_NATIVE=ON",  # the build machine's instruction sets, less AVOIDED_CPU_FEATURES
)
AVOIDED_CPU_FEATURES = ("amx-tile", "amx-int8", "amx-bf16")
"""x86 instruction sets ggml must not use whatever the CPU offers: its AMX path crashed on a Sapphire Rapids VM."""
_PROGRESS = re.compile(r"^\[\s*(\d+)%\]|^\[(\d+)/(\d+)\]")
"""cmake's Makefile progress (`[ 42%] Building …`) or Ninja's (`[12/345] …`)."""
PROGRESS_STEP = 10


def cmake_options() -> tuple[str, ...]:
    """The configure options: `CMAKE_OPTIONS`, plus compiler flags that switch off `AVOIDED_CPU_FEATURES` on x86."""
    if not _is_x86():
        return CMAKE_OPTIONS
    flags = " ".join(f"-mno-{feature}" for feature in AVOIDED_CPU_FEATURES)
    return (*CMAKE_OPTIONS, f"-DCMAKE_C_FLAGS={flags}", f"-DCMAKE_CXX_FLAGS={flags}")


def cached_binary() -> Path:
    """Where the binary lives once built (it may not exist yet): keyed by the pinned version, the build options
    and this CPU's features, so a native binary is never run on a CPU it was not built for."""
    root = os.environ.get("MAYA_LLAMA_SERVER_CACHE") or str(Path.home() / ".cache" / "maya")
    key = hashlib.sha256("\n".join([*cmake_options(), _cpu_features()]).encode()).hexdigest()[:12]
    return Path(root) / f"llama-server-{LLAMA_CPP_SOURCE_VERSION}-{key}" / BINARY_NAME


def _is_x86() -> bool:
    return platform.machine().lower() in ("x86_64", "amd64", "i386", "i686")


def _cpu_features() -> str:
    """The CPU's feature flags (Linux's /proc/cpuinfo), else the machine's name."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as cpuinfo:
            for line in cpuinfo:
                name, _, value = line.partition(":")
                if name.strip() in ("flags", "Features"):
                    return " ".join(sorted(value.split()))
    except OSError:
        pass
    return platform.machine()


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
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="maya-llama-server-") as work:
        work_dir = Path(work)
        source = _fetch_source(LLAMA_CPP_SOURCE_VERSION, work_dir)
        build = work_dir / "build"
        _say("configuring llama-server (cmake)")
        _run(["cmake", "-S", str(source), "-B", str(build), *_generator(), *cmake_options()])
        jobs = str(os.cpu_count() or 2)
        _say(f"compiling llama-server with {jobs} jobs (about 5 minutes on two cores; cached afterwards)")
        _run(["cmake", "--build", str(build), "--target", BINARY_NAME, "--config", "Release", "-j", jobs],
             progress=True)
        built = next(build.rglob(BINARY_NAME))
        staged = binary.with_suffix(".partial")
        shutil.copy2(built, staged)
        staged.replace(binary)  # atomic: a half-copied file is never taken for the binary
    _say(f"built {binary} in {time.monotonic() - started:.0f}s")


def _fetch_source(version: str, work_dir: Path) -> Path:
    """Download the sdist with pip (PyPI is reachable; no other host need be) and unpack its llama.cpp tree."""
    _say(f"downloading llama.cpp's source (the llama-cpp-python {version} sdist, 77 MB)")
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


def _run(command: list[str], *, progress: bool = False) -> None:
    """Run one build step; its output is kept for the error report, and with `progress` its
    percentage is printed every `PROGRESS_STEP` percent."""
    tail: deque[str] = deque(maxlen=200)
    shown = -PROGRESS_STEP
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert process.stdout is not None
    for line in process.stdout:
        tail.append(line)
        percent = _percent(line) if progress else None
        if percent is not None and percent >= shown + PROGRESS_STEP:
            shown = percent - percent % PROGRESS_STEP
            _say(f"  llama-server build {shown}%")
    if process.wait() != 0:
        sys.stderr.write("".join(tail))
        raise RuntimeError(f"building llama-server failed: {' '.join(command[:4])} … exited {process.returncode}")


def _percent(line: str) -> int | None:
    match = _PROGRESS.match(line)
    if match is None:
        return None
    if match.group(1) is not None:
        return int(match.group(1))
    return 100 * int(match.group(2)) // max(1, int(match.group(3)))


def _say(message: str) -> None:
    print(f"maya: {message}", file=sys.stderr, flush=True)


def main() -> int:
    try:
        print(ensure_binary())
    except (RuntimeError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
