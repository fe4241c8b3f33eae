"""The embedded llama-server is safe on every x86-64 CPU by how it is built, which any machine can check.

ggml's AMX kernels crashed llama-server (SIGSEGV while loading a model) on a Sapphire Rapids VM; a CPU
without AMX never takes that path, so a green run there proves nothing. What is checked instead holds on
every machine: the build's command line switches AMX off, the compiler honours that even for a CPU that
has AMX (`-march=sapphirerapids`), and the cached binary holds no AMX instruction.
"""

from __future__ import annotations

import platform
import shutil
import subprocess

import pytest

from maya_server.engine import llama_server_build
from maya_server.engine.llama_server_build import AVOIDED_CPU_FEATURES, cached_binary, cmake_options

AMX_INSTRUCTIONS = ("ldtilecfg", "sttilecfg", "tileloadd", "tileloaddt1", "tilestored", "tilezero", "tilerelease",
                    "tdpbssd", "tdpbsud", "tdpbusd", "tdpbuud", "tdpbf16ps", "tdpfp16ps")


def _compiler_flags(options: tuple[str, ...]) -> str:
    (c_flags,) = [o.split("=", 1)[1] for o in options if o.startswith("-DCMAKE_C_FLAGS=")]
    (cxx_flags,) = [o.split("=", 1)[1] for o in options if o.startswith("-DCMAKE_CXX_FLAGS=")]
    assert c_flags == cxx_flags
    return c_flags


def test_an_x86_build_switches_every_amx_instruction_set_off(monkeypatch):
    monkeypatch.setattr(platform, "machine", lambda: "x86_64")
    options = cmake_options()
    assert "-DGGML_NATIVE=ON" in options
    assert _compiler_flags(options).split() == ["-mno-amx-tile", "-mno-amx-int8", "-mno-amx-bf16"]
    assert set(AVOIDED_CPU_FEATURES) == {"amx-tile", "amx-int8", "amx-bf16"}


def test_other_architectures_build_as_before(monkeypatch):
    monkeypatch.setattr(platform, "machine", lambda: "aarch64")
    assert not any("-mno-" in option for option in cmake_options())


@pytest.mark.skipif(shutil.which("gcc") is None or platform.machine() != "x86_64", reason="needs gcc on x86-64")
def test_the_compiler_keeps_amx_off_even_for_a_cpu_that_has_it(monkeypatch):
    """What ggml's sources test (`__AMX_INT8__`) stays undefined when the target CPU is Sapphire Rapids, so the
    AMX kernels are not compiled whatever CPU builds them; without the flags the same command defines it."""
    monkeypatch.setattr(platform, "machine", lambda: "x86_64")
    flags = _compiler_flags(cmake_options()).split()

    def defines(*args: str) -> str:
        return subprocess.run(["gcc", *args, "-march=sapphirerapids", "-dM", "-E", "-"], input="",
                              capture_output=True, text=True, check=True).stdout

    assert "__AMX_INT8__" in defines() and "__AVX512VNNI__" in defines()
    assert "__AMX_INT8__" not in defines(*flags) and "__AMX_TILE__" not in defines(*flags)
    assert "__AVX512VNNI__" in defines(*flags)  # the rest of the CPU's instruction sets stay on


def test_the_cache_is_keyed_by_the_cpu_and_the_build_options(monkeypatch, tmp_path):
    monkeypatch.setenv("MAYA_LLAMA_SERVER_CACHE", str(tmp_path))
    here = cached_binary()
    assert here.parent.parent == tmp_path and here.parent.name.startswith("llama-server-0.3.36-")
    monkeypatch.setattr(llama_server_build, "_cpu_features", lambda: "fpu sse sse2")
    elsewhere = cached_binary()
    assert elsewhere != here
    monkeypatch.setattr(llama_server_build, "CMAKE_OPTIONS", (*llama_server_build.CMAKE_OPTIONS, "-DGGML_X=ON"))
    assert cached_binary() not in (here, elsewhere)


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("objdump") is None or platform.machine() != "x86_64", reason="needs objdump on x86-64")
def test_the_built_binary_holds_no_amx_instruction():
    binary = llama_server_build.ensure_binary()
    listing = subprocess.run(["objdump", "-d", "--no-show-raw-insn", str(binary)], capture_output=True, text=True,
                             check=True).stdout
    columns = (line.split("\t") for line in listing.splitlines())  # address, then the instruction
    mnemonics = {c[1].split()[0] for c in columns if len(c) > 1 and c[1].strip()}
    assert len(mnemonics) > 100, "objdump listed no instructions"
    assert not mnemonics & set(AMX_INSTRUCTIONS)
