"""The embedded llama-server is safe on every x86-64 CPU by how it is built, which any machine can check.

ggml's AMX kernels crashed llama-server (SIGSEGV while loading a model) on a Sapphire Rapids VM; a CPU
without AMX never takes that path, so a green run there proves nothing. What is checked instead holds on
every machine: the build's command line switches AMX off (the CPU-only build and the build whose backends
load at run time alike), the compiler honours that even for a CPU that has AMX (`-march=sapphirerapids`),
and the cached binary and its libraries hold no AMX instruction.
"""

from __future__ import annotations

import platform
import shutil
import subprocess

import pytest

from maya_server.engine.llama_server import build as llama_server_build
from maya_server.engine.llama_server.backends import Backend, BackendPlan
from maya_server.engine.llama_server.build import AVOIDED_CPU_FEATURES, cached_binary, cmake_options, cpu_feature_options

CPU_ONLY = BackendPlan()
WITH_VULKAN = BackendPlan((Backend("vulkan", ("-DGGML_VULKAN=ON",), "found"),))
SAPPHIRE_RAPIDS_FLAGS = ("fpu sse sse2 ssse3 sse4_1 sse4_2 avx f16c fma bmi2 avx2 avx512f avx512cd avx512vl avx512dq "
                         "avx512bw avx512vbmi avx512_vnni avx512_bf16 avx_vnni amx_tile amx_int8 amx_bf16")

AMX_INSTRUCTIONS = ("ldtilecfg", "sttilecfg", "tileloadd", "tileloaddt1", "tilestored", "tilezero", "tilerelease",
                    "tdpbssd", "tdpbsud", "tdpbusd", "tdpbuud", "tdpbf16ps", "tdpfp16ps")


def _compiler_flags(options: tuple[str, ...]) -> str:
    (c_flags,) = [o.split("=", 1)[1] for o in options if o.startswith("-DCMAKE_C_FLAGS=")]
    (cxx_flags,) = [o.split("=", 1)[1] for o in options if o.startswith("-DCMAKE_CXX_FLAGS=")]
    assert c_flags == cxx_flags
    return c_flags


def test_an_x86_build_switches_every_amx_instruction_set_off(monkeypatch):
    monkeypatch.setattr(platform, "machine", lambda: "x86_64")
    options = cmake_options(CPU_ONLY)
    assert "-DGGML_NATIVE=ON" in options and "-DBUILD_SHARED_LIBS=OFF" in options
    assert _compiler_flags(options).split() == ["-mno-amx-tile", "-mno-amx-int8", "-mno-amx-bf16"]
    assert set(AVOIDED_CPU_FEATURES) == {"amx-tile", "amx-int8", "amx-bf16"}


def test_a_build_with_a_gpu_backend_loads_backends_at_run_time_and_keeps_amx_off(monkeypatch):
    """ggml refuses -march=native with run-time loading, so the CPU backend is built for this CPU's instruction
    sets by name: on a Sapphire Rapids CPU every one of them but AMX, and -mno-amx-* still given."""
    monkeypatch.setattr(platform, "machine", lambda: "x86_64")
    monkeypatch.setattr(llama_server_build, "_cpu_features", lambda: SAPPHIRE_RAPIDS_FLAGS)
    monkeypatch.setattr(llama_server_build.sys, "platform", "linux")
    options = cmake_options(WITH_VULKAN)
    for option in ("-DGGML_BACKEND_DL=ON", "-DBUILD_SHARED_LIBS=ON", "-DGGML_NATIVE=OFF", "-DGGML_VULKAN=ON",
                   "-DCMAKE_INSTALL_RPATH=$ORIGIN", "-DGGML_AVX512=ON", "-DGGML_AVX512_BF16=ON", "-DGGML_AVX_VNNI=ON",
                   "-DGGML_AMX_TILE=OFF", "-DGGML_AMX_INT8=OFF", "-DGGML_AMX_BF16=OFF"):
        assert option in options
    assert "-DGGML_NATIVE=ON" not in options and "-DBUILD_SHARED_LIBS=OFF" not in options
    assert not [o for o in options if o.startswith("-DGGML_AMX") and o.endswith("=ON")]
    assert "-DGGML_CPU_ALL_VARIANTS=ON" not in options  # its sapphirerapids variant would switch AMX back on
    assert _compiler_flags(options).split() == ["-mno-amx-tile", "-mno-amx-int8", "-mno-amx-bf16"]


def test_the_cpu_backend_is_built_for_the_instruction_sets_this_cpu_has():
    assert cpu_feature_options("sse4_2 avx avx2 fma f16c bmi2") == (
        "-DGGML_SSE42=ON", "-DGGML_AVX=ON", "-DGGML_F16C=ON", "-DGGML_FMA=ON", "-DGGML_BMI2=ON", "-DGGML_AVX2=ON",
        "-DGGML_AVX_VNNI=OFF", "-DGGML_AVX512=OFF", "-DGGML_AVX512_VBMI=OFF", "-DGGML_AVX512_VNNI=OFF",
        "-DGGML_AVX512_BF16=OFF", "-DGGML_AMX_TILE=OFF", "-DGGML_AMX_INT8=OFF", "-DGGML_AMX_BF16=OFF")
    assert "-DGGML_AVX512=OFF" in cpu_feature_options("avx512f avx512cd")  # AVX512 needs F, CD, VL, DQ and BW


def test_other_architectures_build_as_before(monkeypatch):
    monkeypatch.setattr(platform, "machine", lambda: "aarch64")
    assert not any("-mno-" in option for option in cmake_options(CPU_ONLY))
    with_vulkan = cmake_options(WITH_VULKAN)  # linked in, not loaded at run time: ggml's native CPU backend stays
    assert "-DGGML_NATIVE=ON" in with_vulkan and "-DGGML_VULKAN=ON" in with_vulkan
    assert "-DGGML_BACKEND_DL=ON" not in with_vulkan


@pytest.mark.skipif(shutil.which("gcc") is None or platform.machine() != "x86_64", reason="needs gcc on x86-64")
def test_the_compiler_keeps_amx_off_even_for_a_cpu_that_has_it(monkeypatch):
    """What ggml's sources test (`__AMX_INT8__`) stays undefined when the target CPU is Sapphire Rapids, so the
    AMX kernels are not compiled whatever CPU builds them; without the flags the same command defines it."""
    monkeypatch.setattr(platform, "machine", lambda: "x86_64")
    flags = _compiler_flags(cmake_options(CPU_ONLY)).split()
    assert _compiler_flags(cmake_options(WITH_VULKAN)).split() == flags

    def defines(*args: str) -> str:
        return subprocess.run(["gcc", *args, "-march=sapphirerapids", "-dM", "-E", "-"], input="",
                              capture_output=True, text=True, check=True).stdout

    assert "__AMX_INT8__" in defines() and "__AVX512VNNI__" in defines()
    assert "__AMX_INT8__" not in defines(*flags) and "__AMX_TILE__" not in defines(*flags)
    assert "__AVX512VNNI__" in defines(*flags)  # the rest of the CPU's instruction sets stay on


def test_the_cache_is_keyed_by_the_cpu_and_the_build_options(monkeypatch, tmp_path):
    monkeypatch.setenv("MAYA_LLAMA_SERVER_CACHE", str(tmp_path))
    here = cached_binary(CPU_ONLY)
    assert here.parent.parent == tmp_path and here.parent.name.startswith("llama-server-0.3.36-")
    monkeypatch.setattr(llama_server_build, "_cpu_features", lambda: "fpu sse sse2")
    elsewhere = cached_binary(CPU_ONLY)
    assert elsewhere != here
    monkeypatch.setattr(llama_server_build, "CMAKE_OPTIONS", (*llama_server_build.CMAKE_OPTIONS, "-DGGML_X=ON"))
    assert cached_binary(CPU_ONLY) not in (here, elsewhere)


def test_the_cache_is_keyed_by_the_backends_and_a_cpu_only_build_keeps_its_key(monkeypatch, tmp_path):
    """A machine without GPU toolchains keeps the entry it built before backends were chosen (the key is the hash
    of the same options); a machine with one builds a separate entry."""
    import hashlib

    monkeypatch.setenv("MAYA_LLAMA_SERVER_CACHE", str(tmp_path))
    options = list(llama_server_build.CMAKE_OPTIONS)
    if llama_server_build._is_x86():
        options += ["-DCMAKE_C_FLAGS=-mno-amx-tile -mno-amx-int8 -mno-amx-bf16",
                    "-DCMAKE_CXX_FLAGS=-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"]
    before = hashlib.sha256("\n".join([*options, llama_server_build._cpu_features()]).encode()).hexdigest()[:12]
    assert cached_binary(CPU_ONLY).parent.name == f"llama-server-0.3.36-{before}"
    cuda = BackendPlan((Backend("cuda", ("-DGGML_CUDA=ON",), "found"),))
    assert len({cached_binary(CPU_ONLY), cached_binary(WITH_VULKAN), cached_binary(cuda)}) == 3


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("objdump") is None or platform.machine() != "x86_64", reason="needs objdump on x86-64")
def test_the_built_binary_holds_no_amx_instruction():
    """Nor do its libraries, where a build with run-time loading keeps the CPU backend (libggml-cpu.so)."""
    binary = llama_server_build.ensure_binary()
    files = [binary, *(f for f in binary.parent.glob("lib*.so*") if not f.is_symlink())]
    for file in files:
        listing = subprocess.run(["objdump", "-d", "--no-show-raw-insn", str(file)], capture_output=True, text=True,
                                 check=True).stdout
        columns = (line.split("\t") for line in listing.splitlines())  # address, then the instruction
        mnemonics = {c[1].split()[0] for c in columns if len(c) > 1 and c[1].strip()}
        assert len(mnemonics) > 20, f"objdump listed no instructions in {file.name}"
        assert not mnemonics & set(AMX_INSTRUCTIONS), file.name
    if (llama_server_build.built_backends(binary) or {}).get("runtime_loading"):
        assert any(f.name.startswith("libggml-cpu") for f in files), "the CPU backend's library was not checked"


def test_progress_counts_the_build_not_a_nested_one():
    """The Vulkan backend builds its shader generator as a project of its own, whose `[2/2]` once read as 100%."""
    progress = llama_server_build.BuildProgress()
    fed = [progress.feed(line) for line in ("[1/500] Building C object a.o", "[1/2] Performing build step",
                                            "[2/2] Completed", "[49/500] b.o", "[50/500] c.o", "[120/500] d.o")]
    assert fed == [0, None, None, None, 10, 20]
    makefile = llama_server_build.BuildProgress()
    assert [makefile.feed(line) for line in ("[  3%] x", "[ 12%] y", "[ 15%] z")] == [0, 10, None]
