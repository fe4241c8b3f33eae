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

Which GPU backends. Each one whose toolchain is found (`llama_server/backends.py`:
CUDA with cuBLAS, HIP, Vulkan, Metal on macOS) is built too, and the cache key
includes them. On x86-64 Linux a build with a GPU backend loads its backends at
run time (`GGML_BACKEND_DL`): the cache entry is `llama-server` beside its
libraries (`libggml-cpu.so`, `libggml-vulkan.so`, …, found through an `$ORIGIN`
rpath), and a backend whose driver is missing is skipped when the server starts,
so the same entry runs on the CPU of a machine without the GPU. ggml refuses
`-march=native` with run-time loading, so that CPU backend is built for this CPU's
instruction sets named one by one (`cpu_feature_options`: AVX2, AVX-512, … as
/proc/cpuinfo lists them), AMX never among them and `-mno-amx-*` still given. A
CPU-only build is the single static file as before (same options, same key).
`backends.json` beside the binary records what was built and why the rest was
skipped, for the start-up messages (`built_backends`).

    python -m maya_server.engine.llama_server.build    # prints the binary's path, building it if needed
"""

from __future__ import annotations

import fcntl
import hashlib
import json
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

from .backends import BackendPlan, plan_backends

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
RUNTIME_LOADING_OPTIONS = (
    "-DGGML_BACKEND_DL=ON",  # each backend a library loaded at start-up; one whose driver is missing is skipped
    "-DCMAKE_BUILD_WITH_INSTALL_RPATH=ON",
    "-DCMAKE_INSTALL_RPATH=$ORIGIN",  # the binary finds libllama/libggml beside it in the cache, wherever that is
)
CPU_FEATURE_OPTIONS = (
    ("SSE42", ("sse4_2",)), ("AVX", ("avx",)), ("F16C", ("f16c",)), ("FMA", ("fma",)), ("BMI2", ("bmi2",)),
    ("AVX2", ("avx2",)), ("AVX_VNNI", ("avx_vnni",)),
    ("AVX512", ("avx512f", "avx512cd", "avx512vl", "avx512dq", "avx512bw")),
    ("AVX512_VBMI", ("avx512vbmi",)), ("AVX512_VNNI", ("avx512_vnni",)), ("AVX512_BF16", ("avx512_bf16",)),
)
"""ggml's x86 instruction-set options and the /proc/cpuinfo flags each needs: the run-time-loaded CPU backend is
built for the sets this CPU has. AMX is deliberately absent (`AVOIDED_CPU_FEATURES`)."""
MANIFEST = "backends.json"


def cmake_options(plan: BackendPlan | None = None) -> tuple[str, ...]:
    """The configure options: `CMAKE_OPTIONS`, plus compiler flags that switch off `AVOIDED_CPU_FEATURES` on x86,
    plus the GPU backends of `plan` (this machine's, by default). On x86-64 Linux with a GPU backend the backends
    are loaded at run time, and the CPU backend is built for this CPU's instruction sets by name."""
    plan = plan_backends() if plan is None else plan
    options = CMAKE_OPTIONS
    if runtime_loading(plan):
        options = tuple(_replace_option(o, {"BUILD_SHARED_LIBS": "ON", "GGML_NATIVE": "OFF"}) for o in options)
        options = (*options, *RUNTIME_LOADING_OPTIONS, *cpu_feature_options(_cpu_features()))
    if _is_x86():
        flags = " ".join(f"-mno-{feature}" for feature in AVOIDED_CPU_FEATURES)
        options = (*options, f"-DCMAKE_C_FLAGS={flags}", f"-DCMAKE_CXX_FLAGS={flags}")
    return (*options, *plan.options())


def runtime_loading(plan: BackendPlan) -> bool:
    """Whether the build loads its backends at run time: x86-64 Linux with a GPU backend. (ggml's run-time loading
    of a native CPU backend is x86-only here; elsewhere a GPU backend is linked in, as on macOS.)"""
    return bool(plan.built) and _is_x86() and sys.platform.startswith("linux")


def cpu_feature_options(features: str) -> tuple[str, ...]:
    """`-DGGML_AVX2=ON`, … for the instruction sets in `features` (/proc/cpuinfo's flags), OFF for the rest and
    for AMX."""
    present = set(features.split())
    options = [f"-DGGML_{name}={'ON' if set(needs) <= present else 'OFF'}" for name, needs in CPU_FEATURE_OPTIONS]
    return (*options, "-DGGML_AMX_TILE=OFF", "-DGGML_AMX_INT8=OFF", "-DGGML_AMX_BF16=OFF")


def _replace_option(option: str, values: dict[str, str]) -> str:
    name = option.removeprefix("-D").split("=", 1)[0]
    return f"-D{name}={values[name]}" if name in values else option


def cached_binary(plan: BackendPlan | None = None) -> Path:
    """Where the binary lives once built (it may not exist yet): keyed by the pinned version, the build options
    (the backends among them) and this CPU's features, so a native binary is never run on a CPU it was not built
    for."""
    root = os.environ.get("MAYA_LLAMA_SERVER_CACHE") or str(Path.home() / ".cache" / "maya")
    key = hashlib.sha256("\n".join([*cmake_options(plan), _cpu_features()]).encode()).hexdigest()[:12]
    return Path(root) / f"llama-server-{LLAMA_CPP_SOURCE_VERSION}-{key}" / BINARY_NAME


def built_backends(binary: Path) -> dict | None:
    """What the build of `binary` recorded: `{"backends": ["cpu", "vulkan"], "skipped": {name: why}}`, or None for a
    binary Maya did not build (or one built before the record was kept)."""
    try:
        return json.loads((binary.parent / MANIFEST).read_text())
    except (OSError, ValueError):
        return None


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
    plan = plan_backends()
    binary = cached_binary(plan)
    if _is_executable(binary):
        return binary
    binary.parent.mkdir(parents=True, exist_ok=True)
    with open(binary.parent / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # a concurrent build waits here, then finds the binary
        if not _is_executable(binary):
            _build(binary, plan)
    return binary


def _is_executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


BUILD_MINUTES = {"cpu": 5, "vulkan": 10, "cuda": 60, "hip": 60}
"""Rough minutes each backend adds on two cores, for the message only. CPU: about 5, measured. Vulkan: its build
took 1,221 s of CPU time (20 min) with the CPU backend and the libraries, 43.5 min wall on a 2-core VM shared with
other builds; about 10 more minutes on two free cores (docs/pending-gpu.md). CUDA and HIP: not measured here, a
guess (llama.cpp's kernels)."""


def _build(binary: Path, plan: BackendPlan) -> None:
    started = time.monotonic()
    for line in plan.report():
        _say(line)
    with tempfile.TemporaryDirectory(prefix="maya-llama-server-") as work:
        work_dir = Path(work)
        source = _fetch_source(LLAMA_CPP_SOURCE_VERSION, work_dir)
        build = work_dir / "build"
        _say("configuring llama-server (cmake)")
        _run(["cmake", "-S", str(source), "-B", str(build), *_generator(), *cmake_options(plan)])
        jobs = str(os.cpu_count() or 2)
        minutes = sum(BUILD_MINUTES.get(name, 0) for name in plan.names)
        _say(f"compiling llama-server ({', '.join(plan.names)}) with {jobs} jobs (about {minutes} minutes on two "
             "cores; cached afterwards)")
        _run(["cmake", "--build", str(build), "--target", BINARY_NAME, "--config", "Release", "-j", jobs],
             progress=True)
        built = next(build.rglob(BINARY_NAME))
        if runtime_loading(plan):
            for library in sorted(built.parent.glob("lib*.so*")):  # libllama, libggml*, the backends; links as links
                shutil.copy2(library, binary.parent / library.name, follow_symlinks=False)
        manifest = {"backends": list(plan.names), "skipped": plan.skipped, "runtime_loading": runtime_loading(plan)}
        (binary.parent / MANIFEST).write_text(json.dumps(manifest, indent=1))
        staged = binary.with_suffix(".partial")
        shutil.copy2(built, staged)
        staged.replace(binary)  # atomic and last: a half-copied entry is never taken for the binary
    _say(f"built {binary} ({', '.join(plan.names)}) in {time.monotonic() - started:.0f}s")


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
    progress_of = BuildProgress()
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert process.stdout is not None
    for line in process.stdout:
        tail.append(line)
        shown = progress_of.feed(line) if progress else None
        if shown is not None:
            _say(f"  llama-server build {shown}%")
    if process.wait() != 0:
        sys.stderr.write("".join(tail))
        raise RuntimeError(f"building llama-server failed: {' '.join(command[:4])} … exited {process.returncode}")


class BuildProgress:
    """The build's percentage, every `PROGRESS_STEP` percent. A nested build (the Vulkan backend builds its shader
    generator as a project of its own) prints its own `[1/2]`, which is not the build's: only steps counted
    against the largest total seen are taken."""

    def __init__(self) -> None:
        self.shown = -PROGRESS_STEP
        self.total = 0

    def feed(self, line: str) -> int | None:
        """The percentage to print for `line`, if it reaches the next step."""
        step = _progress(line)
        if step is None or step[1] < self.total:
            return None
        self.total = step[1]
        percent = 100 * step[0] // max(1, step[1])
        if percent < self.shown + PROGRESS_STEP:
            return None
        self.shown = percent - percent % PROGRESS_STEP
        return self.shown


def _progress(line: str) -> tuple[int, int] | None:
    """(done, total) of a Makefile (`[ 42%]`: out of 100) or Ninja (`[12/345]`) progress line."""
    match = _PROGRESS.match(line)
    if match is None:
        return None
    if match.group(1) is not None:
        return int(match.group(1)), 100
    return int(match.group(2)), int(match.group(3))


def _say(message: str) -> None:
    print(f"maya: {message}", file=sys.stderr, flush=True)


def main() -> int:
    try:
        binary = ensure_binary()
        built = built_backends(binary) or {"backends": ["cpu"], "skipped": {}}
        _say(f"llama-server's backends: {', '.join(built['backends'])}"
             + "".join(f"; skipped {name}: {why}" for name, why in built.get("skipped", {}).items()))
        print(binary)
    except (RuntimeError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
