"""The embedded default engine: llama.cpp's own `llama-server`, run by Maya on the model file.

llama-server does the token work (continuous batching over `slots` sequences,
a prompt cache that keeps idle conversations' KV in RAM, slot reuse by prompt
similarity); Maya drives it with the upstream engine's code, token-id prompts
to its completion endpoint, so the laptop path and the remote llama-server
path are one path. llama-server splits text into tokens (`llama_server/tokenizer.py`:
exact for every GGUF llama.cpp loads), Maya places the control tokens by id and
decodes generated ids with the GGUF's own vocabulary; a start-up self-check
holds both against llama-server's `/tokenize`. The engine reports the GGUF's
own `tokenizer.chat_template` as its `chat_template` (llama-server's `/props`
would report its ChatML fallback for a file without one) and, with `--tokenizer
DIR`, that folder's `config.json` `model_type`; the edge decides the family from
them and the vocabulary. The child process itself (private socket,
restarts, no orphans) is `llama_server/child.py`.

Which llama-server: the one Maya builds (`llama_server/build.py`, with the GPU
backends the machine can compile), or the operator's own (`--llama-server
PATH`), whose flags and endpoints are checked first (`llama_server/check.py`).
Which devices: the binary lists them before the child starts
(`llama_server/devices.py`); the child's log then says how many layers went there.
Both are logged at start-up and reported in `/v1/status`, and `--gpu-layers N`
with no device is a WARNING saying why. Flash attention is off on the CPU and
llama.cpp's `auto` with layers on a GPU (`FLASH_ATTENTION`, `GPU_FLASH_ATTENTION`).

With `--mmproj FILE` the child loads the model's multimodal projector and takes
images (the upstream engine's vision path); the context one image takes is
measured at start-up.

Start-up order: read the GGUF header (training context, vocabulary, chat
template), start the child with `slots × ctx`, probe it (`/v1/models`,
`/props`: slots, per-slot context), check the tokenizer, then serve. An option
that fails is an `EngineOptionError` (which `engine_setup` words as the setting
that gave it), a child that dies while loading an `EngineStartError` (the CLI
exits 2 on either); neither leaves a child behind.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Iterator

import httpx
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from ...errors import EngineOptionError, UnsupportedVocabulary, UpstreamError
from ...model.gguf_metadata import read_gguf_metadata, training_context
from ...model.gguf_vocabulary import GgufVocabulary
from ...model.hf_tokenizer import HfTokenizer
from ...model.model_config import model_type_from_dir
from ...model.tokenizer import Tokenizer
from ..base import DEFAULT_CTX
from ..defaults import CACHE_RAM_MIB, READ_TIMEOUT_S, TOKENIZE_CACHE_MIB, TOKENIZE_TIMEOUT_S
from .devices import Device, list_devices, no_device_warning, planned_offload
from .child import (
    BASE_URL, FLASH_ATTENTION, GPU_FLASH_ATTENTION, ChildState, LlamaServerOptions, LlamaServerProcess,
    child_environment,
)
from .build import built_backends, ensure_binary
from .check import check_endpoints, check_flags
from .tokenizer import LlamaServerTokenizer, TokenCache, TokenCacheCollector
from ..upstream.engine import UpstreamEngine
from ..upstream.probe import measure_image_tokens, probe_upstream

log = logging.getLogger("maya.engine")

TOKENIZER_PROBES = (
    "<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nHi!<|im_end|>\n<|im_start|>assistant\n",
    "Numbers 1234567 and   spaces,\ttabs\n\nünïcödé, 日本語, emoji 🎉🐉. <tool_call>{\"a\": [1, 2]}</tool_call>",
    "[gMASK]<sop><|user|>\ncode: def f(x):\n    return x ** 2  # ok<|assistant|><think></think>",
    "<｜begin▁of▁sentence｜>You help.<｜User｜>Hi <think>x</think> ｜DSML｜<｜Assistant｜></think>Yes.<｜end▁of▁sentence｜>",
)
"""Texts our tokenizer must split exactly as llama-server does (special-token parsing on and off), and whose
ids our vocabulary must decode as llama-server decodes them."""
TOKENIZER_DISAGREES = "tokenizer_disagrees"
"""The `EngineOptionError.reason` of a `tokenizer_dir` whose tokenizer splits text unlike llama-server's: the edge
says which setting to drop."""
NO_PROJECTOR = "no multimodal projector is configured"
"""Why the embedded engine refuses images without `mmproj` (the edge adds how to configure one)."""


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
    cache_ram_mib: int = CACHE_RAM_MIB
    mmproj: str | None = None
    tokenizer_dir: str | None = None
    """A model directory whose `tokenizer.json` replaces llama-server's own tokenizer."""
    read_timeout: float = READ_TIMEOUT_S
    tokenize_cache_mib: int = TOKENIZE_CACHE_MIB
    """The bound of the cache of prompt runs' token ids (`TokenCache`)."""
    tokenize_timeout: float = TOKENIZE_TIMEOUT_S
    """Seconds llama-server may take to tokenize one prompt text run (past it: `PromptTooLarge`)."""
    extra_args: tuple[str, ...] = ()
    """The operator's own llama-server flags."""
    llama_server: str | None = None
    """The operator's own llama-server binary, instead of the one Maya builds."""


class LlamaCppEngine(UpstreamEngine):
    name = "llamacpp"

    def __init__(self, process: LlamaServerProcess, tokenizer: Tokenizer, info, *, read_timeout: float,
                 chat_template: str | None) -> None:
        super().__init__(BASE_URL, tokenizer, info, slots=info.slots or process.options.slots,
                         context_size=info.context_size or process.options.ctx, key=process.api_key,
                         read_timeout=read_timeout, uds=process.socket_path)
        self.process = process
        self.model_path = process.options.model
        self.chat_template = chat_template
        self.blocking_tokenizer = isinstance(tokenizer, LlamaServerTokenizer)
        self.devices: list[Device] = []
        """The GPU devices llama-server lists (none: it computes on the CPU)."""
        self.build: dict | None = None
        """What Maya's build of llama-server holds (`built_backends`); None for the operator's own binary."""
        self.layers: int | None = None
        """The model's layers as llama.cpp counts them for offloading: its blocks plus the output layer."""
        if not self.accepts_images:
            self.images_refusal = NO_PROJECTOR  # `engine_setup` adds the setting that gives one

    @classmethod
    def start(cls, options: EmbeddedOptions) -> "LlamaCppEngine":
        """Start the child and check it. An option that fails is an `EngineOptionError` naming it (`model`,
        `mmproj`, `tokenizer_dir`; None for the engine itself); a child that dies while loading is an
        `EngineStartError` with its signal and last log lines. Either way no child is left behind."""
        if options.mmproj is not None and not Path(options.mmproj).is_file():
            raise EngineOptionError("mmproj", f"no such file: {options.mmproj}", value=options.mmproj)
        metadata = _metadata(options.model)
        vocabulary = _vocabulary(metadata)
        trained = training_context(metadata)
        ctx = options.ctx or trained or DEFAULT_CTX
        binary = _binary(options)
        build = None if options.llama_server else built_backends(binary) or {"backends": ["cpu"], "skipped": {}}
        devices = _devices(binary, options, build)
        on_gpu = bool(devices) and options.gpu_layers != 0
        process = LlamaServerProcess(child_options(options, binary=binary, ctx=ctx,
                                                   flash_attn=GPU_FLASH_ATTENTION if on_gpu else FLASH_ATTENTION))
        log.info("starting llama-server for %s: %d slots x %d tokens (%s), prompt cache %d MiB",
                 Path(options.model).name, options.slots, ctx, _context_origin(options.ctx, trained),
                 options.cache_ram_mib)
        process.start()  # an EngineStartError has stopped the child already
        layers = _layers(metadata)
        log.info("%s", placement(process, devices, layers))
        client = httpx.Client(transport=process.transport(), base_url=BASE_URL, headers=process.headers(), timeout=30)
        try:
            if options.llama_server:
                check_endpoints(client, vocabulary, binary)
            info = probe_upstream(client)
            tokenizer: Tokenizer = (
                HfTokenizer.from_model_dir(options.tokenizer_dir) if options.tokenizer_dir is not None
                else LlamaServerTokenizer(vocabulary, client, TokenCache(options.tokenize_cache_mib << 20),
                                          timeout=options.tokenize_timeout))
            check_tokenizer(tokenizer, vocabulary, client)
            image_tokens = measure_image_tokens(client, info.media_marker) if info.vision else 0
            engine = cls(process, tokenizer, info, read_timeout=options.read_timeout,
                         chat_template=_text(metadata.get("tokenizer.chat_template")))
            engine.image_tokens = image_tokens
            engine.model_type = model_type_from_dir(options.tokenizer_dir)
            if engine.blocking_tokenizer:  # llama-server's own tokenizer; a tokenizer_dir's may normalize text
                engine.max_token_bytes = vocabulary.max_token_bytes()
            engine.devices, engine.build, engine.layers = devices, build, layers
            if not engine.blocking_tokenizer:
                client.close()  # only llama-server's own tokenizer keeps it
            return engine
        except UpstreamError as exc:
            client.close()
            process.stop()
            raise EngineOptionError(None, f"llama-server started but {exc.message}") from None
        except EngineOptionError:
            client.close()
            process.stop()
            raise

    def scoped_tokenizer(self, scope: str) -> Tokenizer:
        if isinstance(self.tokenizer, LlamaServerTokenizer):
            return self.tokenizer.scoped(scope)
        return self.tokenizer

    def describe(self) -> dict:
        return {**super().describe(), "model_path": self.model_path, "process": self.process.describe(),
                "llama_server": self.describe_placement()}

    def describe_placement(self) -> dict:
        """Which llama-server, its backends, the devices it lists and uses, and the layers it put on them."""
        options = self.process.options
        gpu, total = self.process.offload or planned_offload(self.layers, options.gpu_layers, self.devices)
        return {
            "binary": str(options.binary),
            "built_by_maya": self.build is not None,
            "backends": self.build["backends"] if self.build else None,
            "devices": [{**device.describe(), "used": _used(self.process, device, gpu)} for device in self.devices],
            "layers_offloaded": {"gpu": gpu, "total": total,
                                 "from": "llama-server's log" if self.process.offload else "worked out"},
            "gpu_layers": options.gpu_layers,
            "flash_attn": options.flash_attn,
        }

    def metric_collectors(self) -> list:
        collectors = [*super().metric_collectors(), LlamaServerCollector(self.process)]
        if isinstance(self.tokenizer, LlamaServerTokenizer):
            collectors.append(TokenCacheCollector(self.tokenizer.cache))
        return collectors

    def shutdown(self) -> None:
        if isinstance(self.tokenizer, LlamaServerTokenizer):
            self.tokenizer.close()
        self.process.stop()


def _context_origin(configured: int | None, trained: int | None) -> str:
    """Where the context asked of llama-server comes from; a configured one past the model's training context is
    capped there by llama-server, which the start-up line says rather than promise what will not be served."""
    if configured is None:
        return "the model's training context" if trained else "the default: the model states no training context"
    if trained and configured > trained:
        return f"as configured; llama-server caps a slot at the model's training context, {trained}"
    return "as configured"


def child_options(options: EmbeddedOptions, **worked_out) -> LlamaServerOptions:
    """The child's options: each `LlamaServerOptions` field that `options` has by the same name (model, slots,
    threads, …) carried over, and those worked out at start-up (`binary`; `ctx`, which the model's training
    context may fill) given, so a new option of both is carried without another line here."""
    carried = {f.name: getattr(options, f.name) for f in fields(LlamaServerOptions) if f.name not in worked_out}
    return LlamaServerOptions(**carried, **worked_out)


def check_tokenizer(tokenizer: Tokenizer, vocabulary: GgufVocabulary, client: httpx.Client) -> None:
    """Compare like with like, on `TOKENIZER_PROBES`: the ids Maya renders must be llama-server's (special-token
    parsing on and off alike), the vocabulary must place each special token llama-server finds at its id, and
    decoding llama-server's ids must give llama-server's own text for them (a SentencePiece vocabulary's text
    differs from the probe by the spaces llama.cpp puts before words). Any slip would make every prompt or answer
    subtly wrong."""
    for text in TOKENIZER_PROBES:
        for special in (True, False):
            theirs = _engine_ids(client, text, special)
            if tokenizer.encode(text, special=special) != theirs:
                raise EngineOptionError("tokenizer_dir", "its tokenizer splits text differently from llama-server's",
                                        reason=TOKENIZER_DISAGREES)
            for token_id in filter(vocabulary.is_special, theirs):
                piece = vocabulary.piece(token_id).decode("utf-8", errors="replace")
                if vocabulary.special_id(piece) != token_id:
                    raise EngineOptionError("model", f"the GGUF's vocabulary names two tokens {piece!r}")
            if tokenizer.decode(theirs) != _engine_text(client, theirs):
                raise EngineOptionError("model", "Maya decodes this GGUF's vocabulary differently from llama-server")


def _engine_ids(client: httpx.Client, text: str, special: bool) -> list[int]:
    return _ask(client, "/tokenize", {"content": text, "add_special": False, "parse_special": special})["tokens"]


def _engine_text(client: httpx.Client, ids: list[int]) -> str:
    return _ask(client, "/detokenize", {"tokens": ids})["content"]


def _ask(client: httpx.Client, path: str, body: dict) -> dict:
    response = client.post(path, json=body)
    if response.status_code != 200:
        raise UpstreamError(f"its {path} answered HTTP {response.status_code}")
    return response.json()


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
        raise EngineOptionError("model", str(exc), value=model) from None


def _vocabulary(metadata: dict) -> GgufVocabulary:
    try:
        return GgufVocabulary(metadata)
    except UnsupportedVocabulary as exc:
        raise EngineOptionError("model", str(exc)) from None


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


def placement(process: LlamaServerProcess, devices: list[Device], layers: int | None) -> str:
    """The start-up line that says where the model runs."""
    gpu, total = process.offload or planned_offload(layers, process.options.gpu_layers, devices)
    used = [device for device in devices if _used(process, device, gpu)]
    flash = f"flash attention {process.options.flash_attn}"
    if gpu is None:
        return (f"llama-server offloads the layers of {total} that fit (its --fit; the count is in its log at "
                f"--engine-arg=-lv --engine-arg=4) to {', '.join(map(str, devices))}; {flash}")
    if gpu > 0:
        return f"llama-server offloaded {gpu}/{total} layers to {', '.join(map(str, used or devices))}; {flash}"
    found = f"it lists {', '.join(map(str, devices))}" if devices else "it lists no GPU device"
    return f"llama-server runs the model on the CPU ({total} layers): {found}; {flash}"


def _used(process: LlamaServerProcess, device: Device, gpu: int | None) -> bool:
    """Whether the model went to `device`: as the child's log says, else every listed device when layers were
    offloaded (llama.cpp splits layers over all the devices it lists by default)."""
    if process.used_devices:
        return device.name in process.used_devices
    return gpu is None or gpu > 0


def _layers(metadata: dict) -> int | None:
    """The model's blocks plus its output layer: what llama.cpp's `offloaded N/M layers` counts."""
    blocks = metadata.get(f"{metadata.get('general.architecture')}.block_count")
    return blocks + 1 if isinstance(blocks, int) and not isinstance(blocks, bool) else None


def _devices(binary: Path, options: EmbeddedOptions, build: dict | None) -> list[Device]:
    """The GPU devices `binary` lists, with Maya's WARNING when `--gpu-layers N` asks for some and there are none."""
    devices = list_devices(binary, child_environment())
    if devices:
        log.info("llama-server lists %s", "; ".join(map(str, devices)))
    elif options.gpu_layers:
        log.warning("%s", no_device_warning(options.gpu_layers, build["backends"] if build else None,
                                            build.get("skipped", {}) if build else {}))
    return devices


def _binary(options: EmbeddedOptions) -> Path:
    """The operator's llama-server (its flags checked), or Maya's own, built if it is missing."""
    if options.llama_server is not None:
        binary = Path(options.llama_server)
        if not (binary.is_file() and os.access(binary, os.X_OK)):
            raise EngineOptionError("llama_server", f"{binary} is not an executable file", value=str(binary))
        check_flags(binary, mmproj=options.mmproj is not None)
        return binary
    try:
        return ensure_binary()
    except (RuntimeError, OSError) as exc:
        raise EngineOptionError(None, f"llama-server could not be built: {exc}") from None
