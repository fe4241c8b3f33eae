"""The devices llama-server computes on, told truthfully: what it finds, what it offloads, and why not.

llama-server says it itself, in two places Maya reads:

- `llama-server --list-devices` (run once before the child starts, with the
  child's environment) prints each non-CPU device ggml found with its memory:
  `  Vulkan0: llvmpipe (LLVM 15.0.6, 256 bits) (7944 MiB, 7944 MiB free)`, or
  `  (none)`. Its `/props` has no device fields in the pinned version, so this
  is the one source of names and memory.
- While loading, llama.cpp says how many layers went to the devices:
  `load_tensors: offloaded 31/31 layers to GPU`, and which devices it uses:
  `llama_prepare_model_devices: using device Vulkan0 (llvmpipe …) … - 2048 MiB free`.
  The pinned llama-server prints these at verbosity 4 only (`-lv 4`, which also
  logs some 30 lines a request), not at its default 3, so Maya does not raise
  it; it reads them when an operator does (`--engine-arg=-lv --engine-arg=4`),
  and otherwise works the count out (`planned_offload`): with `--gpu-layers N`
  it is min(N, the model's layers + 1 for the output layer), exactly, because
  llama.cpp's `--fit` adjusts only what is not set (and a model that does not
  fit then fails to load, which Maya reports); without it the count is
  llama.cpp's to fit, and reported as not known.

`--gpu-layers N` (N > 0) with no device is Maya's own WARNING naming why: the
build has no GPU backend (its toolchain was missing when it was built), or the
build has one and it found no device (driver, `*_VISIBLE_DEVICES`). Without
`--gpu-layers`, llama-server's default applies: `-ngl auto`, every layer on the
devices it finds, then `--fit on` (its default) lowers that until the model and
context fit the devices' free memory. On Vulkan it skips devices of the CPU
type (Mesa's lavapipe) unless `GGML_VK_VISIBLE_DEVICES` names them, so a machine
whose only Vulkan device is lavapipe runs on the CPU backend by default.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import asdict, dataclass
from pathlib import Path

LIST_TIMEOUT_S = 60.0
_DEVICE = re.compile(r"^\s+(?P<name>\S+): (?P<description>.*) \((?P<total>\d+) MiB, (?P<free>\d+) MiB free\)\s*$")
_OFFLOADED = re.compile(r"offloaded (?P<gpu>\d+)/(?P<total>\d+) layers to GPU")
_USING = re.compile(r": using device (?P<name>\S+) \(")


@dataclass(frozen=True)
class Device:
    name: str
    """ggml's device name: `CUDA0`, `ROCm0`, `Vulkan0`, `MTL0`."""
    description: str
    """The device's own name: `NVIDIA H100 80GB HBM3`, `llvmpipe (LLVM 15.0.6, 256 bits)`."""
    memory_mib: int
    free_mib: int

    def describe(self) -> dict:
        return asdict(self)

    def __str__(self) -> str:
        return f"{self.name} ({self.description}, {self.memory_mib} MiB)"


def parse_devices(text: str) -> list[Device]:
    """The devices of `--list-devices`' output (none for `(none)`, or for output that is not a listing)."""
    devices = []
    for line in text.splitlines():
        match = _DEVICE.match(line)
        if match:
            devices.append(Device(match["name"], match["description"], int(match["total"]), int(match["free"])))
    return devices


def list_devices(binary: Path, environment: dict[str, str]) -> list[Device]:
    """The GPU devices `binary` finds with `environment` (the child's); none when it cannot say."""
    try:
        result = subprocess.run([str(binary), "--list-devices"], env=environment, stdin=subprocess.DEVNULL,
                                capture_output=True, text=True, errors="replace", timeout=LIST_TIMEOUT_S)
    except (OSError, subprocess.SubprocessError):
        return []
    return parse_devices(result.stdout)


def parse_offload(line: str) -> tuple[int, int] | None:
    """(layers on devices, layers in all) from llama.cpp's `offloaded N/M layers to GPU` line."""
    match = _OFFLOADED.search(line)
    return (int(match["gpu"]), int(match["total"])) if match else None


def parse_used_device(line: str) -> str | None:
    """The device name of llama.cpp's `using device NAME (…)` line."""
    match = _USING.search(line)
    return match["name"] if match else None


def planned_offload(total: int | None, gpu_layers: int | None, devices: list[Device]) -> tuple[int | None, int | None]:
    """(layers on the devices, layers in all) as Maya works them out when llama-server's log does not say: none on
    the CPU; min(N, total) for `--gpu-layers N`; None (llama.cpp's `--fit` decides) without it. `total` is the
    model's blocks plus its output layer."""
    if not devices or gpu_layers == 0:
        return 0, total
    if gpu_layers is None:
        return None, total
    return (min(gpu_layers, total) if total is not None else gpu_layers), total


def no_device_warning(gpu_layers: int, backends: list[str] | None, skipped: dict[str, str]) -> str:
    """Maya's WARNING for `--gpu-layers N` when llama-server lists no device: why, and what to do. `backends` are
    the build's (None: a binary Maya did not build, whose backends it cannot know)."""
    head = f"--gpu-layers {gpu_layers} is ignored: llama-server lists no GPU device, so the model runs on the CPU. "
    if backends is not None and not set(backends) - {"cpu"}:
        why = "; ".join(f"{name}: {reason}" for name, reason in skipped.items() if name != "metal") or "none found"
        return (head + f"Why: Maya's llama-server was built with the CPU backend only, because no GPU toolchain was "
                f"found when it was built ({why}). What to do: install the toolchain for your GPU (CUDA toolkit with "
                "cuBLAS, ROCm with hipBLAS, or Vulkan: `make vulkan`), then run `make llama-server` again (the cache "
                "key includes the backends, so it builds anew); or run your own GPU build with --llama-server PATH.")
    if backends is not None:
        gpu = ", ".join(sorted(set(backends) - {"cpu"}))
        return (head + f"Why: the build has the {gpu} backend, but it found no device. What to do: check the driver "
                "(nvidia-smi, rocminfo, vulkaninfo --summary) and CUDA_VISIBLE_DEVICES / HIP_VISIBLE_DEVICES / "
                "GGML_VK_VISIBLE_DEVICES (a Vulkan device of the CPU type, such as Mesa's lavapipe, is used only "
                "when GGML_VK_VISIBLE_DEVICES names it); or pass --gpu-layers 0 to run on the CPU on purpose.")
    return (head + "Why: this binary (--llama-server) was built without a GPU backend, or its backend found no "
            "device. What to do: run `PATH --list-devices` to see what it finds; use a GPU build of llama-server, "
            "or check the driver and the *_VISIBLE_DEVICES variables.")
