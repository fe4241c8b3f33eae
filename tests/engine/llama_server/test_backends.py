"""Which GPU backends the llama-server build takes, checked with fake toolchains (no real compile).

A fake `nvcc`, `hipcc`, `glslc` or `nvidia-smi` is a shell script on a PATH of the test's own, and the headers and
libraries are empty files in a prefix of its own, so the answer does not depend on what this machine has installed.
"""

from __future__ import annotations

import json
import platform
from pathlib import Path

import pytest

from maya_server.engine.llama_server import backends as llama_server_backends, build as llama_server_build
from maya_server.engine.llama_server.backends import plan_backends
from maya_server.errors import BackendUnavailable
from maya_server.engine.llama_server.build import cached_binary, cmake_options


def _tool(bin_dir: Path, name: str, body: str = "exit 0") -> Path:
    bin_dir.mkdir(parents=True, exist_ok=True)
    tool = bin_dir / name
    tool.write_text(f"#!/bin/sh\n{body}\n")
    tool.chmod(0o755)
    return tool


def _file(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("")
    return path


@pytest.fixture
def machine(tmp_path, monkeypatch):
    """A machine with nothing: an empty PATH and system prefix, no toolkit variables, Linux on x86-64."""
    bin_dir, prefix = tmp_path / "bin", tmp_path / "usr"
    bin_dir.mkdir()
    prefix.mkdir()
    monkeypatch.setenv("PATH", str(bin_dir))
    for name in ("CUDA_PATH", "CUDA_HOME", "ROCM_PATH", "HIP_PATH", "VULKAN_SDK", "MAYA_LLAMA_SERVER_BACKENDS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(llama_server_backends, "SYSTEM_PREFIXES", (str(prefix),))
    monkeypatch.setattr(llama_server_backends.sys, "platform", "linux")
    monkeypatch.setattr(llama_server_build.sys, "platform", "linux")
    monkeypatch.setattr(platform, "machine", lambda: "x86_64")
    monkeypatch.setenv("MAYA_LLAMA_SERVER_CACHE", str(tmp_path / "cache"))
    return bin_dir, prefix


def test_a_machine_without_toolchains_builds_the_cpu_only_and_says_why(machine):
    plan = plan_backends()
    assert plan.names == ("cpu",)
    assert "nvcc not found on PATH" in plan.skipped["cuda"]
    assert "hipcc not found on PATH" in plan.skipped["hip"]
    assert "glslc (the shader compiler)" in plan.skipped["vulkan"] and "make vulkan" in plan.skipped["vulkan"]
    assert plan.skipped["metal"] == "macOS only"
    assert plan.report()[0] == "building llama-server with backends: cpu"


def test_nvcc_without_cublas_is_skipped_saying_so(machine, tmp_path, monkeypatch):
    """Like this machine: an nvcc, and a CUDA toolkit without cuBLAS, which llama.cpp's CUDA backend links."""
    bin_dir, _ = machine
    nvcc = _tool(bin_dir, "nvcc")
    monkeypatch.setenv("CUDA_PATH", str(tmp_path / "cuda"))
    _file(tmp_path / "cuda" / "include" / "cuda_runtime.h")
    plan = plan_backends()
    assert "cuda" not in plan.names
    assert plan.skipped["cuda"].startswith(f"nvcc found at {nvcc} but cuBLAS is missing (no cublas_v2.h")
    assert f"  skipping cuda: nvcc found at {nvcc} but cuBLAS is missing" in "\n".join(plan.report())


def test_nvcc_with_cublas_builds_cuda_for_the_gpus_present(machine, tmp_path, monkeypatch):
    bin_dir, _ = machine
    nvcc = _tool(bin_dir, "nvcc")
    _tool(bin_dir, "nvidia-smi", 'echo "9.0"; echo "8.9"')
    monkeypatch.setenv("CUDA_PATH", str(tmp_path / "cuda"))
    _file(tmp_path / "cuda" / "include" / "cublas_v2.h")
    _file(tmp_path / "cuda" / "lib64" / "libcublas.so")
    plan = plan_backends()
    assert plan.names == ("cpu", "cuda")
    options = cmake_options(plan)
    assert "-DGGML_CUDA=ON" in options and f"-DCMAKE_CUDA_COMPILER={nvcc}" in options
    assert "-DCMAKE_CUDA_ARCHITECTURES=89;90" in options
    assert "-DGGML_BACKEND_DL=ON" in options  # one cache entry runs on a machine without the GPU too
    assert "cuda: nvcc at" in plan.report()[1] and "(sm 89;90)" in plan.report()[1]
    assert cached_binary(plan) != cached_binary(plan_backends("cpu"))


def test_without_a_gpu_to_ask_cuda_is_built_for_llama_cpps_portable_set(machine, tmp_path, monkeypatch):
    bin_dir, _ = machine
    _tool(bin_dir, "nvcc")
    monkeypatch.setenv("CUDA_HOME", str(tmp_path / "cuda"))
    _file(tmp_path / "cuda" / "targets" / "x86_64-linux" / "include" / "cublas_v2.h")
    _file(tmp_path / "cuda" / "targets" / "x86_64-linux" / "lib" / "libcublas.so.13")
    plan = plan_backends()
    assert plan.names == ("cpu", "cuda")
    assert not any(o.startswith("-DCMAKE_CUDA_ARCHITECTURES") for o in cmake_options(plan))
    assert "portable set of architectures" in plan.report()[1]


def test_hipcc_with_the_rocm_blas_libraries_builds_hip(machine, tmp_path, monkeypatch):
    bin_dir, _ = machine
    _tool(bin_dir, "hipcc")
    rocm = tmp_path / "rocm"
    monkeypatch.setenv("ROCM_PATH", str(rocm))
    _file(rocm / "include" / "hipblas" / "hipblas.h")
    assert "hipcc found at" in plan_backends().skipped["hip"] and "rocBLAS missing" in plan_backends().skipped["hip"]
    _file(rocm / "include" / "rocblas" / "rocblas.h")
    clang = _tool(rocm / "llvm" / "bin", "clang")
    plan = plan_backends()
    assert plan.names == ("cpu", "hip")
    assert "-DGGML_HIP=ON" in cmake_options(plan) and f"-DCMAKE_HIP_COMPILER={clang}" in cmake_options(plan)


def _vulkan_headers(include: Path, version: int) -> None:
    """Vulkan headers of `version`: llama.cpp's Vulkan backend needs VK_EXT_layer_settings (1.3.2xx on)."""
    _file(include / "vulkan" / "vulkan.hpp")
    core = f"#define VK_HEADER_VERSION {version}\n" + ("#define VK_EXT_layer_settings 1\n" if version >= 272 else "")
    (include / "vulkan" / "vulkan_core.h").write_text(core)


def test_vulkan_needs_glslc_the_headers_the_loader_and_spirv(machine):
    bin_dir, prefix = machine
    _tool(bin_dir, "glslc")
    _vulkan_headers(prefix / "include", 309)
    skipped = plan_backends().skipped["vulkan"]
    assert "glslc" not in skipped.split("not found")[0]
    assert "the Vulkan loader library (libvulkan.so)" in skipped and "the SPIR-V headers" in skipped
    _file(prefix / "lib" / "x86_64-linux-gnu" / "libvulkan.so")
    _file(prefix / "include" / "spirv" / "unified1" / "spirv.hpp")
    plan = plan_backends()
    assert plan.names == ("cpu", "vulkan") and "-DGGML_VULKAN=ON" in cmake_options(plan)
    assert not any(o.startswith("-DVulkan_INCLUDE_DIR") for o in cmake_options(plan))  # the system's own


def test_vulkan_headers_too_old_for_llama_cpp_are_skipped_unless_newer_ones_are_in_the_cache(machine, tmp_path):
    """Debian 12's 1.3.239 headers failed the build minutes in; `make vulkan` unpacks newer ones into the cache,
    which the build then names."""
    bin_dir, prefix = machine
    _tool(bin_dir, "glslc")
    _vulkan_headers(prefix / "include", 239)
    _file(prefix / "lib" / "libvulkan.so")
    _file(prefix / "include" / "spirv" / "unified1" / "spirv.hpp")
    skipped = plan_backends().skipped["vulkan"]
    assert f"the Vulkan headers in {prefix / 'include'} are too old for llama.cpp's Vulkan backend" in skipped
    assert "make vulkan" in skipped
    cached = tmp_path / "cache" / "vulkan-headers" / "usr" / "include"
    _vulkan_headers(cached, 309)
    plan = plan_backends()
    assert plan.names == ("cpu", "vulkan") and f"-DVulkan_INCLUDE_DIR={cached}" in cmake_options(plan)


def test_metal_is_llama_cpps_default_on_macos(machine, monkeypatch):
    monkeypatch.setattr(llama_server_backends.sys, "platform", "darwin")
    plan = plan_backends()
    assert plan.names == ("cpu", "metal") and plan.options() == ()


def test_the_variable_narrows_the_choice(machine, tmp_path, monkeypatch):
    bin_dir, prefix = machine
    _tool(bin_dir, "glslc")
    _vulkan_headers(prefix / "include", 309)
    for path in ("lib/libvulkan.so", "include/spirv/unified1/spirv.hpp"):
        _file(prefix / path)
    monkeypatch.setenv("MAYA_LLAMA_SERVER_BACKENDS", "cpu")
    assert plan_backends().names == ("cpu",)
    assert plan_backends().skipped["vulkan"] == "not in MAYA_LLAMA_SERVER_BACKENDS=cpu"
    monkeypatch.setenv("MAYA_LLAMA_SERVER_BACKENDS", "vulkan")
    assert plan_backends().names == ("cpu", "vulkan")
    monkeypatch.setenv("MAYA_LLAMA_SERVER_BACKENDS", "cuda,vulkan")
    with pytest.raises(BackendUnavailable, match="asks for cuda, but nvcc not found"):
        plan_backends()
    monkeypatch.setenv("MAYA_LLAMA_SERVER_BACKENDS", "opencl")
    with pytest.raises(BackendUnavailable, match="unknown backend opencl"):
        plan_backends()


def test_the_build_configures_the_backends_prints_why_and_keeps_the_libraries(machine, tmp_path, monkeypatch, capsys):
    """The build's steps, the compile replaced by files it would leave: the configure line carries CUDA, the
    messages say what is built and skipped, the entry holds the binary beside its libraries and the record."""
    bin_dir, _ = machine
    _tool(bin_dir, "nvcc")
    monkeypatch.setenv("CUDA_PATH", str(tmp_path / "cuda"))
    _file(tmp_path / "cuda" / "include" / "cublas_v2.h")
    _file(tmp_path / "cuda" / "lib64" / "libcublas.so")
    commands: list[list[str]] = []

    def run(command: list[str], *, progress: bool = False) -> None:
        commands.append(command)
        if "--build" in command:
            out = Path(command[command.index("--build") + 1]) / "bin"
            for name in ("llama-server", "libllama.so.0", "libggml-base.so", "libggml-cpu.so", "libggml-cuda.so"):
                _file(out / name).chmod(0o755)
            (out / "libllama.so").symlink_to("libllama.so.0")

    monkeypatch.setattr(llama_server_build, "_fetch_source", lambda version, work: work)
    monkeypatch.setattr(llama_server_build, "_run", run)
    binary = llama_server_build.ensure_binary()
    configure = commands[0]
    assert configure[0] == "cmake" and "-DGGML_CUDA=ON" in configure and "-DGGML_BACKEND_DL=ON" in configure
    said = capsys.readouterr().err
    assert "maya: building llama-server with backends: cpu, cuda" in said
    assert "maya:   skipping vulkan: glslc (the shader compiler)" in said
    assert "compiling llama-server (cpu, cuda)" in said
    entry = sorted(p.name for p in binary.parent.iterdir() if not p.name.startswith("."))
    assert entry == ["backends.json", "libggml-base.so", "libggml-cpu.so", "libggml-cuda.so", "libllama.so",
                     "libllama.so.0", "llama-server"]
    assert (binary.parent / "libllama.so").is_symlink()
    record = json.loads((binary.parent / "backends.json").read_text())
    assert record["backends"] == ["cpu", "cuda"] and record["runtime_loading"] is True
    assert "glslc" in record["skipped"]["vulkan"]
    assert llama_server_build.ensure_binary() == binary and len(commands) == 2  # cached: not built again
