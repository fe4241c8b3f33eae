"""Where the model runs, told truthfully, without a GPU: llama-server's own words parsed, and what Maya does with
them (the child's flash attention, the WARNING for `--gpu-layers N` with no device), on fake binaries."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from maya_server.config import default_model_path
from maya_server.engine.llama_server import engine as llamacpp
from maya_server.engine.llama_server.devices import Device, parse_devices, parse_offload, parse_used_device, planned_offload
from maya_server.engine.llama_server.engine import EmbeddedOptions, LlamaCppEngine
from maya_server.errors import EngineStartError

LLVMPIPE = "  Vulkan0: llvmpipe (LLVM 15.0.6, 256 bits) (7944 MiB, 7944 MiB free)"
"""`llama-server --list-devices` of the pinned version, on this machine's lavapipe (with GGML_VK_VISIBLE_DEVICES=0)."""


def test_the_device_listing_is_read_as_llama_server_prints_it():
    listing = f"load_backend: loaded Vulkan backend from /c/libggml-vulkan.so\nAvailable devices:\n{LLVMPIPE}\n" \
              "  CUDA0: NVIDIA H100 80GB HBM3 (81079 MiB, 80500 MiB free)\n"
    assert parse_devices(listing) == [Device("Vulkan0", "llvmpipe (LLVM 15.0.6, 256 bits)", 7944, 7944),
                                      Device("CUDA0", "NVIDIA H100 80GB HBM3", 81079, 80500)]
    assert parse_devices("Available devices:\n  (none)\n") == []
    assert parse_devices("usage: llama-server [options]\n  -h, --help (default: 0 MiB)\n") == []


def test_the_offload_and_the_devices_used_are_read_from_the_load_log():
    assert parse_offload("load_tensors: offloaded 31/31 layers to GPU") == (31, 31)
    assert parse_offload("load_tensors: offloaded 0/31 layers to GPU") == (0, 31)
    assert parse_offload("load_tensors: CPU_Mapped model buffer size = 100 MiB") is None
    used = "0.00.247.841 I llama_prepare_model_devices: using device Vulkan0 (llvmpipe (LLVM 15.0.6, 256 bits)) " \
           "(unknown id) - 2048 MiB free"
    assert parse_used_device(used) == "Vulkan0"
    assert parse_used_device("skipping device CUDA1 (x) with id 0 - already using device CUDA0 (x) with the same") \
        is None


def test_without_the_log_lines_the_offload_is_worked_out():
    """The pinned llama-server logs the offload at verbosity 4 only: with --gpu-layers N the count is exact (its
    --fit leaves a set value alone), without it llama.cpp decides and Maya says it does not know."""
    device = [Device("Vulkan0", "llvmpipe", 2048, 2048)]
    assert planned_offload(31, 99, device) == (31, 31) and planned_offload(31, 7, device) == (7, 31)
    assert planned_offload(31, None, device) == (None, 31)
    assert planned_offload(31, 99, []) == (0, 31) and planned_offload(31, 0, device) == (0, 31)


def _fake(directory: Path, devices: str, backends: list[str] | None) -> Path:
    """A llama-server that lists `devices`, writes the command line it was started with, and exits 3."""
    directory.mkdir(parents=True, exist_ok=True)
    binary = directory / "llama-server"
    binary.write_text(f"#!/bin/sh\nif [ \"$1\" = --list-devices ]; then printf 'Available devices:\\n{devices}\\n'; "
                      f"exit 0; fi\nprintf '%s\\n' \"$@\" > {directory / 'argv'}\nexit 3\n")
    binary.chmod(0o755)
    if backends is not None:
        (directory / "backends.json").write_text(json.dumps({"backends": backends, "skipped": {
            "cuda": "nvcc found at /usr/local/bin/nvcc but cuBLAS is missing", "metal": "macOS only"}}))
    return binary


def _start(monkeypatch, binary: Path, **options) -> list[str]:
    monkeypatch.setattr(llamacpp, "ensure_binary", lambda: binary)
    with pytest.raises(EngineStartError):
        LlamaCppEngine.start(EmbeddedOptions(model=default_model_path(), slots=1, ctx=512, **options))
    return (binary.parent / "argv").read_text().split("\n")


def _flash_attention(argv: list[str]) -> str:
    return argv[argv.index("--flash-attn") + 1]


def test_flash_attention_is_off_on_the_cpu_and_llama_cpps_auto_with_layers_on_a_gpu(tmp_path, monkeypatch):
    cpu = _fake(tmp_path / "cpu", "  (none)", ["cpu"])
    assert _flash_attention(_start(monkeypatch, cpu)) == "off"
    gpu = _fake(tmp_path / "gpu", LLVMPIPE, ["cpu", "vulkan"])
    assert _flash_attention(_start(monkeypatch, gpu)) == "auto"
    assert _flash_attention(_start(monkeypatch, gpu, gpu_layers=99)) == "auto"
    argv = _start(monkeypatch, gpu, gpu_layers=0)  # the operator keeps the model on the CPU
    assert _flash_attention(argv) == "off" and argv[argv.index("--n-gpu-layers") + 1] == "0"


def test_gpu_layers_without_a_gpu_backend_is_mayas_own_warning_saying_why_and_what_to_do(tmp_path, monkeypatch,
                                                                                         caplog):
    cpu = _fake(tmp_path / "cpu", "  (none)", ["cpu"])
    with caplog.at_level(logging.WARNING, logger="maya.engine"):
        _start(monkeypatch, cpu, gpu_layers=99)
    (warning,) = [r for r in caplog.records if r.levelno == logging.WARNING and r.name == "maya.engine"]
    text = warning.getMessage()
    assert text.startswith("--gpu-layers 99 is ignored: llama-server lists no GPU device, so the model runs on the CPU")
    assert "built with the CPU backend only" in text and "cuBLAS is missing" in text
    assert "make llama-server" in text and "--llama-server PATH" in text


def test_gpu_layers_with_a_gpu_backend_but_no_device_says_so(tmp_path, monkeypatch, caplog):
    vulkan = _fake(tmp_path / "vulkan", "  (none)", ["cpu", "vulkan"])
    with caplog.at_level(logging.WARNING, logger="maya.engine"):
        _start(monkeypatch, vulkan, gpu_layers=4)
    (warning,) = [r for r in caplog.records if r.levelno == logging.WARNING and r.name == "maya.engine"]
    assert "the build has the vulkan backend, but it found no device" in warning.getMessage()
    assert "GGML_VK_VISIBLE_DEVICES" in warning.getMessage()


def test_no_warning_without_gpu_layers_or_with_a_device(tmp_path, monkeypatch, caplog):
    with caplog.at_level(logging.WARNING, logger="maya.engine"):
        _start(monkeypatch, _fake(tmp_path / "cpu", "  (none)", ["cpu"]))
        _start(monkeypatch, _fake(tmp_path / "gpu", LLVMPIPE, ["cpu", "vulkan"]), gpu_layers=99)
    assert not [r for r in caplog.records if r.levelno == logging.WARNING and r.name == "maya.engine"]


@pytest.mark.slow
def test_on_the_cpu_the_status_and_the_log_say_so(monkeypatch, caplog):
    """Maya's own llama-server with no GPU device (lavapipe, if installed, is skipped by default): `--gpu-layers 99`
    is a WARNING saying why, the log and /v1/status say the model runs on the CPU, flash attention off."""
    from maya_server.engine.llama_server.build import built_backends, ensure_binary

    from tests.embedded import embedded_server

    monkeypatch.delenv("GGML_VK_VISIBLE_DEVICES", raising=False)
    backends = (built_backends(ensure_binary()) or {"backends": ["cpu"]})["backends"]
    with caplog.at_level(logging.INFO, logger="maya.engine"):
        with embedded_server(gpu_layers=99) as server:
            placement = server.http().get("/v1/status").json()["engine"]["llama_server"]
    assert placement["built_by_maya"] is True and placement["backends"] == backends
    assert placement["devices"] == [] and placement["flash_attn"] == "off" and placement["gpu_layers"] == 99
    assert placement["layers_offloaded"] == {"gpu": 0, "total": 31, "from": "worked out"}  # SmolLM2: 30 + output
    said = [(r.levelno, r.getMessage()) for r in caplog.records if r.name == "maya.engine"]
    (warning,) = [text for level, text in said if level == logging.WARNING]
    assert ("built with the CPU backend only" if backends == ["cpu"] else "but it found no device") in warning
    assert any(text.startswith("llama-server runs the model on the CPU") for _, text in said)
