"""Which of llama.cpp's GPU backends the llama-server build includes: each one whose toolchain this machine has.

The build (`llama_server/build.py`) always has the CPU backend. A GPU backend
is added when everything its configure step needs is found, because a missing
piece would only fail minutes into the build, or worse, on `make test`:

- CUDA: `nvcc` and the toolkit's cuBLAS (`cublas_v2.h` and `libcublas.so`),
  which llama.cpp's CUDA backend links. A toolkit without cuBLAS (an `nvcc`
  alone, as some images ship) is skipped with that reason. With `nvidia-smi`
  answering, only the GPUs present are compiled for (`CMAKE_CUDA_ARCHITECTURES`),
  else llama.cpp's portable default set of architectures (a longer build).
- HIP (AMD ROCm): `hipcc` and the ROCm BLAS libraries (hipBLAS, rocBLAS).
- Vulkan: `glslc` (the shader compiler), the Vulkan C++ headers and loader
  library (`vulkan/vulkan.hpp`, `libvulkan.so`; Debian's `libvulkan-dev`), and
  the SPIR-V headers (`spirv-headers`). Debian's `glslc libvulkan-dev
  spirv-headers` give all of them (`make vulkan`); Mesa's `mesa-vulkan-drivers`
  adds lavapipe, a Vulkan device on the CPU that tests use. The headers must
  define what the pinned llama.cpp uses (`vulkan_headers.py`): Debian 12's are
  too old, and `make vulkan` then unpacks Debian 13's into Maya's cache, which
  the build takes (`-DVulkan_INCLUDE_DIR`).
- Metal on macOS is llama.cpp's default there; nothing to add.

`MAYA_LLAMA_SERVER_BACKENDS` narrows the choice: `auto` (the default: every
backend found), `cpu` (the CPU only), or a comma list such as `vulkan` or
`cuda,vulkan` (each must be found, else the build stops saying what is missing).

Every decision comes with its reason, which the build prints: which backends it
builds, and why it skips the others.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from ...errors import BackendUnavailable
from . import vulkan_headers

GPU_BACKENDS = ("cuda", "hip", "vulkan", "metal")
BACKENDS_VARIABLE = "MAYA_LLAMA_SERVER_BACKENDS"
SYSTEM_PREFIXES = ("/usr", "/usr/local")
"""Where system headers and libraries are looked for (besides a toolkit's own root)."""
LIBRARY_DIRS = ("lib", "lib64", "lib/x86_64-linux-gnu", "lib/aarch64-linux-gnu")


@dataclass(frozen=True)
class Backend:
    name: str
    options: tuple[str, ...]
    """The cmake options that add it."""
    reason: str
    """What was found (printed when it is built)."""


@dataclass(frozen=True)
class BackendPlan:
    """The GPU backends to build (the CPU backend is always built) and why each other one is skipped."""

    built: tuple[Backend, ...] = ()
    skipped: dict[str, str] = field(default_factory=dict)

    @property
    def names(self) -> tuple[str, ...]:
        return ("cpu", *(backend.name for backend in self.built))

    def options(self) -> tuple[str, ...]:
        return tuple(option for backend in self.built for option in backend.options)

    def report(self) -> list[str]:
        """The lines the build prints: what it builds, what it skips and why."""
        lines = [f"building llama-server with backends: {', '.join(self.names)}"]
        lines += [f"  {backend.name}: {backend.reason}" for backend in self.built]
        lines += [f"  skipping {name}: {why}" for name, why in self.skipped.items()]
        return lines


def plan_backends(wanted: str | None = None) -> BackendPlan:
    """Which GPU backends to build on this machine. `wanted` is `MAYA_LLAMA_SERVER_BACKENDS` (default `auto`)."""
    wanted = (wanted if wanted is not None else os.environ.get(BACKENDS_VARIABLE, "")).strip().lower() or "auto"
    asked = None if wanted == "auto" else {name.strip() for name in wanted.split(",") if name.strip()} - {"cpu"}
    unknown = (asked or set()) - set(GPU_BACKENDS)
    if unknown:
        raise BackendUnavailable(f"{BACKENDS_VARIABLE}={wanted}: unknown backend {', '.join(sorted(unknown))} "
                                 f"(choose from auto, cpu, {', '.join(GPU_BACKENDS)})")
    built: list[Backend] = []
    skipped: dict[str, str] = {}
    for name in GPU_BACKENDS:
        if asked is not None and name not in asked:
            skipped[name] = f"not in {BACKENDS_VARIABLE}={wanted}"
            continue
        found = _DETECTORS[name]()
        if isinstance(found, Backend):
            built.append(found)
        elif asked is not None:
            raise BackendUnavailable(f"{BACKENDS_VARIABLE}={wanted} asks for {name}, but {found}")
        else:
            skipped[name] = found
    return BackendPlan(tuple(built), skipped)


def _cuda() -> Backend | str:
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        return "nvcc not found on PATH (install the CUDA toolkit, with cuBLAS, for NVIDIA GPUs)"
    roots = _existing([os.environ.get("CUDA_PATH"), os.environ.get("CUDA_HOME"),
                       str(Path(os.path.realpath(nvcc)).parent.parent),
                       *(p for prefix in SYSTEM_PREFIXES for p in [prefix, *sorted(glob.glob(f"{prefix}/cuda*"))])])
    header = _find(roots, ("include", "targets/*/include"), "cublas_v2.h")
    library = _find(roots, (*LIBRARY_DIRS, "targets/*/lib"), "libcublas.so*")
    if header is None or library is None:
        return (f"nvcc found at {nvcc} but cuBLAS is missing (no {'cublas_v2.h' if header is None else 'libcublas.so'}"
                f" in {', '.join(roots)}); llama.cpp's CUDA backend needs it")
    options = ["-DGGML_CUDA=ON", f"-DCMAKE_CUDA_COMPILER={nvcc}"]
    architectures = _cuda_architectures()
    if architectures:
        options.append(f"-DCMAKE_CUDA_ARCHITECTURES={architectures}")
    return Backend("cuda", tuple(options), f"nvcc at {nvcc}, cuBLAS at {Path(library).parent}"
                   + (f", for this machine's GPUs (sm {architectures})" if architectures else
                      ", no GPU answered nvidia-smi: llama.cpp's portable set of architectures"))


def _cuda_architectures() -> str:
    """The compute capabilities of the GPUs present (`89;90`), or "" when nvidia-smi is missing or sees none."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return ""
    try:
        out = subprocess.run([smi, "--query-gpu=compute_cap", "--format=csv,noheader"], capture_output=True,
                             text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return ""
    caps = sorted({line.strip().replace(".", "") for line in out.splitlines() if line.strip().replace(".", "").isdigit()})
    return ";".join(caps)


def _hip() -> Backend | str:
    hipcc = shutil.which("hipcc")
    if hipcc is None:
        return "hipcc not found on PATH (install ROCm, with hipBLAS and rocBLAS, for AMD GPUs)"
    roots = _existing([os.environ.get("ROCM_PATH"), os.environ.get("HIP_PATH"),
                       str(Path(os.path.realpath(hipcc)).parent.parent), "/opt/rocm", *SYSTEM_PREFIXES])
    missing = [name for name, patterns in (("hipBLAS", ("hipblas/hipblas.h", "hipblas.h")),
                                           ("rocBLAS", ("rocblas/rocblas.h", "rocblas.h")))
               if not any(_find(roots, ("include",), pattern) for pattern in patterns)]
    if missing:
        return f"hipcc found at {hipcc} but {' and '.join(missing)} missing (looked in {', '.join(roots)})"
    options = ["-DGGML_HIP=ON"]
    clang = _find(roots, ("llvm/bin", "lib/llvm/bin"), "clang")
    if clang is not None:
        options.append(f"-DCMAKE_HIP_COMPILER={clang}")
    return Backend("hip", tuple(options), f"hipcc at {hipcc}, hipBLAS and rocBLAS found")


def _vulkan() -> Backend | str:
    glslc = shutil.which("glslc")
    sdk = os.environ.get("VULKAN_SDK")
    roots = _existing([sdk, *SYSTEM_PREFIXES])
    include_dirs = [os.path.join(root, "include") for root in roots] + [str(vulkan_headers.cached_include_dir())]
    found = [d for d in include_dirs if os.path.isfile(os.path.join(d, "vulkan", "vulkan.hpp"))]
    usable = [d for d in found if vulkan_headers.headers_suffice(d)]
    missing = []
    if glslc is None:
        missing.append("glslc (the shader compiler)")
    if not found:
        missing.append("the Vulkan headers (vulkan/vulkan.hpp)")
    if _find(roots, LIBRARY_DIRS, "libvulkan.so") is None:
        missing.append("the Vulkan loader library (libvulkan.so)")
    if _find(roots, ("include",), "spirv/unified1/spirv.hpp") is None:
        missing.append("the SPIR-V headers")
    if missing:
        return (f"{', '.join(missing)} not found (Debian: apt-get install glslc libvulkan-dev spirv-headers, "
                "or `make vulkan`)")
    if not usable:
        return (f"the Vulkan headers in {found[0]} are too old for llama.cpp's Vulkan backend (no "
                f"{vulkan_headers.REQUIRED_EXTENSION}; Debian 12 ships 1.3.239): `make vulkan` fetches newer ones "
                "into Maya's cache")
    options = ["-DGGML_VULKAN=ON"]
    if usable[0] not in (os.path.join(prefix, "include") for prefix in SYSTEM_PREFIXES):
        options.append(f"-DVulkan_INCLUDE_DIR={usable[0]}")  # the SDK's, or those `make vulkan` fetched
    return Backend("vulkan", tuple(options),
                   f"glslc at {glslc}, Vulkan headers in {usable[0]}, loader and SPIR-V headers found")


def _metal() -> Backend | str:
    if sys.platform != "darwin":
        return "macOS only"
    return Backend("metal", (), "llama.cpp's default on macOS")


_DETECTORS = {"cuda": _cuda, "hip": _hip, "vulkan": _vulkan, "metal": _metal}


def _existing(paths: list[str | None]) -> list[str]:
    seen: list[str] = []
    for path in paths:
        if path and os.path.isdir(path) and os.path.realpath(path) not in map(os.path.realpath, seen):
            seen.append(path)
    return seen


def _find(roots: list[str], subdirs: tuple[str, ...], pattern: str) -> str | None:
    """The first file matching `pattern` in a subdirectory (a glob) of one of `roots`."""
    for root in roots:
        for subdir in subdirs:
            matches = sorted(glob.glob(os.path.join(root, subdir, pattern)))
            if matches:
                return matches[0]
    return None
