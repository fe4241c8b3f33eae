#!/usr/bin/env bash
# On a machine with an NVIDIA GPU: build Maya's llama-server with CUDA, then print Maya ÷ llama-server alone
# tokens/s with every layer offloaded (bench/engine_ratios.py --gpu-layers 99: one stream, four concurrent streams,
# medians of alternating rounds), and the devices and offload Maya reports in /v1/status.
#
#     bench/gpu_check.sh [--model PATH.gguf] [--tokens 256] [--rounds 3]
#
# Needs the CUDA toolkit with cuBLAS (nvcc, cublas_v2.h, libcublas.so) and a driver that answers nvidia-smi. The
# CUDA build is cached like the CPU one (~/.cache/maya/llama-server-VERSION-KEY/, the key includes the backends);
# it is compiled for the GPUs nvidia-smi lists only, which keeps it to tens of minutes rather than hours.
# Not run by Maya's own CI (no GPU there).
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi --query-gpu=name,memory.total,compute_cap --format=csv; then
    echo "gpu_check: nvidia-smi does not answer: this check needs an NVIDIA GPU and its driver" >&2
    exit 1
fi
make install-test
export MAYA_LLAMA_SERVER_BACKENDS=cuda   # CUDA or stop, saying what is missing (e.g. cuBLAS)
.venv/bin/python -m maya_server.engine.llama_server.build
.venv/bin/python bench/engine_ratios.py --gpu-layers 99 --threads 4 --tokens 256 "$@"
