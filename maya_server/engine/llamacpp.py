"""The embedded default engine: llama.cpp's own `llama-server`, run by Maya on the model file.

llama-server does the token work (continuous batching over `slots` sequences,
a prompt cache that keeps idle conversations' KV in RAM, slot reuse by prompt
similarity); Maya drives it with the upstream engine's code, token-id prompts
to its completion endpoint, so the laptop path and the remote llama-server
path are one path. Maya keeps the tokenizer: built from the GGUF's vocabulary
(or `--tokenizer DIR`) and checked against llama-server's own `/tokenize` at
start-up, so renders are exact token for token. The child process itself
(private socket, restarts, no orphans) is `llama_server.py`.

With `--mmproj FILE` the child loads the model's multimodal projector and takes
images (the upstream engine's vision path); the context one image takes is
measured at start-up.

Start-up order: read the GGUF header (training context, vocabulary), start the
child with `slots × ctx`, probe it (`/v1/models`, `/props`: slots, per-slot
context, chat template), check the tokenizer, then serve. Every failure on the
way is a `ConfigError` (the CLI exits 2) and leaves no child behind.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import httpx
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from ..errors import ConfigError, EngineStartError, UpstreamError
from ..family import family_from_template
from ..gguf_metadata import read_gguf_metadata, training_context
from ..gguf_tokenizer import UnsupportedVocabulary, gguf_tokenizer
from ..hf_tokenizer import HfTokenizer
from ..tokenizer import Tokenizer
from .base import DEFAULT_CTX
from .llama_server import BASE_URL, ChildState, LlamaServerOptions, LlamaServerProcess
from .llama_server_build import ensure_binary
from .upstream import UpstreamEngine
from .upstream_probe import measure_image_tokens, probe_upstream

log = logging.getLogger("maya.engine")

TOKENIZER_PROBES = (
    "<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nHi!<|im_end|>\n<|im_start|>assistant\n",
    "Numbers 1234567 and   spaces,\ttabs\n\nünïcödé, 日本語, emoji 🎉🐉. <tool_call>{\"a\": [1, 2]}</tool_call>",
    "[gMASK]<sop><|user|>\ncode: def f(x):\n    return x ** 2  # ok<|assistant|><think></think>",
)
"""Texts our tokenizer must split exactly as llama-server does (special-token parsing on and off)."""


@dataclass(frozen=True)
class EmbeddedOptions:
    """What `LlamaCppEngine.start` needs to run llama-server on a model file; `engine_setup` fills it from the
    settings."""

    model: str
    slots: int
    ctx: int | None = None
    """Context per slot, instead of the model's training context (else `DEFAULT_CTX`)."""
    threads: int = 0
    gpu_layers: int | None = None
    cache_ram_mib: int = 2048
    mmproj: str | None = None
    tokenizer_dir: str | None = None
    """A model directory whose `tokenizer.json` replaces the tokenizer built from the GGUF's vocabulary."""
    read_timeout: float = 600.0


class LlamaCppEngine(UpstreamEngine):
    name = "llamacpp"

    def __init__(self, process: LlamaServerProcess, tokenizer: Tokenizer, info, *, read_timeout: float) -> None:
        super().__init__(BASE_URL, tokenizer, info, slots=info.slots or process.options.slots,
                         context_size=info.context_size or process.options.ctx, key=process.api_key,
                         read_timeout=read_timeout, uds=process.socket_path)
        self.process = process
        self.model_path = process.options.model
        self.template_family = family_from_template(info.chat_template)
        if not self.accepts_images:
            self.images_refusal = ("no multimodal projector is configured; start Maya with --mmproj FILE "
                                   "(config key mmproj, MAYA_MMPROJ), the model's mmproj GGUF")

    @classmethod
    def start(cls, options: EmbeddedOptions) -> "LlamaCppEngine":
        """Start the child and check it; any failure is a one-line `ConfigError` naming the setting (`model`,
        `mmproj`, `tokenizer`, `engine`) that failed, and leaves no child behind."""
        if options.mmproj is not None and not Path(options.mmproj).is_file():
            raise ConfigError("mmproj", f"no such file: {options.mmproj}")
        metadata = _metadata(options.model)
        tokenizer = _tokenizer(options.tokenizer_dir, metadata)
        ctx = options.ctx or training_context(metadata) or DEFAULT_CTX
        process = LlamaServerProcess(LlamaServerOptions(
            binary=_binary(), model=options.model, slots=options.slots, ctx=ctx, threads=options.threads,
            gpu_layers=options.gpu_layers, cache_ram_mib=options.cache_ram_mib, mmproj=options.mmproj,
        ))
        log.info("starting llama-server for %s: %d slots x %d tokens (%s), prompt cache %d MiB",
                 Path(options.model).name, options.slots, ctx,
                 "--ctx" if options.ctx else "the model's training context", options.cache_ram_mib)
        try:
            process.start()
            with httpx.Client(transport=process.transport(), base_url=BASE_URL, headers=process.headers(),
                              timeout=30) as client:
                info = probe_upstream(client)
                check_tokenizer(tokenizer, client)
                image_tokens = measure_image_tokens(client, info.media_marker) if info.vision else 0
            engine = cls(process, tokenizer, info, read_timeout=options.read_timeout)
            engine.image_tokens = image_tokens
            return engine
        except EngineStartError as exc:
            raise ConfigError("model", str(exc)) from None
        except UpstreamError as exc:
            process.stop()
            raise ConfigError("engine", f"llama-server started but {exc.message}") from None
        except ConfigError:
            process.stop()
            raise

    def describe(self) -> dict:
        return {**super().describe(), "model_path": self.model_path, "process": self.process.describe()}

    def metric_collectors(self) -> list:
        return [*super().metric_collectors(), LlamaServerCollector(self.process)]

    def shutdown(self) -> None:
        self.process.stop()


def check_tokenizer(tokenizer: Tokenizer, client: httpx.Client) -> None:
    """Our ids must be llama-server's ids; a mismatch would make every prompt subtly wrong."""
    for text in TOKENIZER_PROBES:
        for special in (True, False):
            response = client.post("/tokenize", json={"content": text, "add_special": False, "parse_special": special})
            if response.status_code != 200:
                raise UpstreamError(f"its /tokenize answered HTTP {response.status_code}")
            if tokenizer.encode(text, special=special) != response.json().get("tokens"):
                raise ConfigError("tokenizer", "Maya's tokenizer splits text differently from llama-server's; "
                                               "give --tokenizer DIR, the model's directory with its tokenizer.json")


class LlamaServerCollector:
    """`maya:engine_process_*`: the child's state and restarts, read at scrape time."""

    def __init__(self, process: LlamaServerProcess) -> None:
        self._process = process

    def collect(self) -> Iterator[Metric]:
        yield GaugeMetricFamily("maya:engine_process_up", "1 while llama-server is ready",
                                value=1.0 if self._process.state is ChildState.READY else 0.0)
        yield CounterMetricFamily("maya:engine_process_restarts", "Times llama-server was restarted after dying",
                                  value=self._process.restarts)


def _metadata(model: str) -> dict:
    try:
        return read_gguf_metadata(model)
    except (OSError, ValueError) as exc:
        raise ConfigError("model", str(exc)) from None


def _tokenizer(tokenizer_dir: str | None, metadata: dict) -> Tokenizer:
    if tokenizer_dir is not None:
        return HfTokenizer.from_model_dir(tokenizer_dir)
    try:
        return gguf_tokenizer(metadata)
    except UnsupportedVocabulary as exc:
        raise ConfigError("tokenizer", str(exc)) from None


def _binary() -> Path:
    try:
        return ensure_binary()
    except (RuntimeError, OSError) as exc:
        raise ConfigError("engine", f"llama-server could not be built: {exc}") from None
