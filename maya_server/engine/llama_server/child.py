"""llama.cpp's `llama-server` as Maya's private child process: started, watched, restarted, stopped.

Private: it listens on a Unix socket (llama-server takes a host ending in
`.sock` as one) inside a fresh 0700 directory, and wants a random key read
from a 0600 file there (never on the command line, where `ps` shows it), so no
other user can reach it. Its log lines go to Maya's log (`maya.llama-server`).

Supervised: one thread owns the process. It starts it, waits until `/health`
answers, and when the process dies unexpectedly starts it again after a
backoff that doubles from `RESTART_DELAYS[0]` up to `RESTART_DELAYS[1]`
seconds (reset once a child has stayed up `STABLE_S`); `restarts` counts
them. The very first start failing is an `EngineStartError` with the child's
last log lines.

No orphans: the child gets `PR_SET_PDEATHSIG` (SIGKILL when the thread that
started it dies, which SIGKILL of Maya implies), checked against the parent
pid right after, so a parent gone before the call still takes the child down;
and its log is a pipe to Maya, so once Maya is gone its next write ends it
(SIGPIPE). `stop()` sends SIGTERM, then SIGKILL after `STOP_GRACE_S`.

Given only what it needs: the child's environment is `CHILD_ENVIRONMENT` of
Maya's (where programs and libraries are, the locale, which GPUs), never the
rest: Maya's own settings, `MAYA_API_KEYS` above all, and any `LLAMA_ARG_*`
that would change llama-server's flags behind Maya's back.

A child that dies while loading is reported for what it is, a crash of
llama.cpp's, with its signal (`EngineStartError.returncode`) and its last log
lines, never as a bad setting; what to try names settings, so the edge adds it
(`engine_setup.crash_advice`).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import enum
import logging
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path

import httpx

from ...errors import EngineStartError
from ..defaults import CACHE_RAM_MIB
from .devices import parse_offload, parse_used_device

log = logging.getLogger("maya.engine")
child_log = logging.getLogger("maya.llama-server")

START_TIMEOUT_S = 300.0
"""Longest wait for a model to load before the start counts as failed."""
RESTART_DELAYS = (0.5, 10.0)
"""First and longest wait before a restart."""
STABLE_S = 30.0
STOP_GRACE_S = 10.0
LOG_TAIL_LINES = 40
CHILD_ENVIRONMENT = (
    "PATH", "HOME", "TMPDIR", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "LD_LIBRARY_PATH",
    "CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "GGML_VK_VISIBLE_DEVICES",
    "ONEAPI_DEVICE_SELECTOR",
)
"""The variables of Maya's environment the child inherits; nothing else reaches it."""
BASE_URL = "http://llama-server"
"""The URL httpx is given for the Unix socket (only the path part matters)."""
FLASH_ATTENTION = "off"
"""llama-server's `--flash-attn` for Maya's child when it computes on the CPU (no GPU device, or `--gpu-layers 0`;
with layers on a GPU it is `GPU_FLASH_ATTENTION`). On the CPU llama.cpp's `auto` turns flash attention on, whose
CPU kernel is the slower one for what agents do: short additions to a long context, then decoding. Measured on a
2-core x86 VM (AVX-512), SmolLM2-135M, 1 thread, a 1.2k-token context: 14 new prompt tokens 148–213 ms off against
609–845 on, decoding 28–35 ms a token against 64–82; a cold 1.2k-token prompt 13.8–18.3 s off against 11.0–13.5
on. On the agent trace (`bench/agent_trace.py`, 8 sessions on 4 slots) a continuation's 41 new tokens took
0.5–1.3 s to evaluate instead of 4.2–7.1, and its median time to first token fell from 17–24 s to 5.7–7.4 s (two
runs): off is 2–4x faster there. The cost, for short parallel chats: llama-server alone, 4 parallel streams of 128
tokens on short prompts, two runs each, decoded 146 and 132 tok/s with it on against 112 and 93 off (on is ~1.3x
faster). Maya keeps the choice that serves agent work. Reports on llama.cpp's tracker agree for other CPUs' prefill
(issues #26559 and #27086, Arm Neoverse). An operator whose CPU or workload does better with it adds
`--engine-arg=--flash-attn --engine-arg=on` (operator flags come after Maya's, and llama-server keeps the last
value it is given)."""
GPU_FLASH_ATTENTION = "auto"
"""`--flash-attn` when llama-server has a GPU device and `--gpu-layers` is not 0: llama.cpp's own default, which
turns it on where the device's backend supports it (CUDA, ROCm, Vulkan, Metal kernels; flash attention is their
fast path, with less memory for the KV cache). Not measured against `off` here: this machine has no GPU (lavapipe,
Mesa's Vulkan on the CPU, says nothing about a real GPU's speed); `bench/gpu_check.sh` is the measurement to run
on one."""
_PR_SET_PDEATHSIG = 1


class ChildState(enum.Enum):
    STARTING = "starting"
    READY = "ready"
    RESTARTING = "restarting"
    STOPPED = "stopped"


@dataclass(frozen=True)
class LlamaServerOptions:
    binary: Path
    model: str
    slots: int
    ctx: int
    """Context per slot; llama-server gets `slots × ctx` in all."""
    threads: int = 0
    gpu_layers: int | None = None
    cache_ram_mib: int = CACHE_RAM_MIB
    mmproj: str | None = None
    extra_args: tuple[str, ...] = ()
    """The operator's own llama-server flags (`--engine-arg`), after Maya's."""
    flash_attn: str = FLASH_ATTENTION
    """`FLASH_ATTENTION` on the CPU, `GPU_FLASH_ATTENTION` with layers on a GPU (decided at start-up)."""


class LlamaServerProcess:
    """Example::

        child = LlamaServerProcess(options)
        child.start()                # blocks until ready (or raises EngineStartError)
        httpx.Client(transport=child.transport(), base_url=BASE_URL, headers=child.headers())
        child.stop()
    """

    def __init__(self, options: LlamaServerOptions) -> None:
        """Nothing runs until `start()`; the key is kept out of `repr` and logs."""
        self.options = options
        self._dir = Path(tempfile.mkdtemp(prefix="maya-llama-"))  # 0700: ours alone
        self.socket_path = str(self._dir / "llama-server.sock")
        self.api_key = secrets.token_urlsafe(32)
        key_file = self._dir / "key"
        key_file.write_text(self.api_key)
        key_file.chmod(0o600)
        self.state = ChildState.STARTING
        self.restarts = 0
        self.pid: int | None = None
        self.offload: tuple[int, int] | None = None
        """(layers on GPU devices, layers in all), from the child's `offloaded N/M layers to GPU` line."""
        self.used_devices: tuple[str, ...] = ()
        """The devices the model was loaded onto (the child's `using device NAME` lines)."""
        self._process: subprocess.Popen | None = None
        self._stopping = threading.Event()
        self._ready = threading.Event()
        self._failure: str | None = None
        self._failure_code: int | None = None
        """The exit status of a child that died while loading (negative: the signal), for `EngineStartError`."""
        self._tail: deque[str] = deque(maxlen=LOG_TAIL_LINES)
        self._thread = threading.Thread(target=self._supervise, name="llama-server", daemon=True)

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.api_key}"}

    def transport(self) -> httpx.HTTPTransport:
        return httpx.HTTPTransport(uds=self.socket_path)

    def describe(self) -> dict:
        return {"state": self.state.value, "pid": self.pid, "restarts": self.restarts}

    def start(self) -> None:
        """Start the supervisor and wait for the first ready child."""
        self._thread.start()
        self._ready.wait()
        if self._failure is not None:
            self.stop()
            raise EngineStartError(self._failure, returncode=self._failure_code)

    def stop(self) -> None:
        """Stop the child (SIGTERM, then SIGKILL) and the supervisor; idempotent."""
        self._stopping.set()
        self._terminate()
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join(timeout=STOP_GRACE_S + 5)
        self.state = ChildState.STOPPED
        shutil.rmtree(self._dir, ignore_errors=True)

    # The supervisor thread: it alone starts children, so PR_SET_PDEATHSIG's "parent" lives as long as Maya.

    def _supervise(self) -> None:
        delay = RESTART_DELAYS[0]
        first = True
        while not self._stopping.is_set():
            started = time.monotonic()
            try:
                ready = self._run_once()
            except OSError as exc:  # the binary cannot be executed, or no process can be created now
                self._failure, ready = f"llama-server could not be started: {exc}", False
            if first:
                first = False
                if not ready:
                    self._failure = self._failure or "llama-server did not start"
                    self._ready.set()
                    return
            if self._stopping.is_set():
                return
            if time.monotonic() - started > STABLE_S:
                delay = RESTART_DELAYS[0]
            self.state = ChildState.RESTARTING
            self.restarts += 1
            log.warning("llama-server exited (%s); restarting in %.1fs", self._exit_text(), delay)
            self._stopping.wait(delay)
            delay = min(delay * 2, RESTART_DELAYS[1])

    def _run_once(self) -> bool:
        """Start one child, wait for it to be ready, then for it to exit. Returns whether it got ready."""
        if os.path.exists(self.socket_path):
            os.unlink(self.socket_path)  # a dead child's socket file would make the next bind fail
        began = time.monotonic()
        self.offload, self.used_devices = None, ()  # each start says them anew
        self._process = _spawn(self._argv())
        self.pid = self._process.pid
        reader = threading.Thread(target=self._forward_log, args=(self._process,), name="llama-server-log", daemon=True)
        reader.start()
        ready = self._wait_ready(self._process)
        if ready:
            self.state = ChildState.READY
            log.info("llama-server ready in %.1fs (pid %d)", time.monotonic() - began, self.pid)
            self._ready.set()
        self._process.wait()
        reader.join(timeout=5)
        return ready

    def _argv(self) -> list[str]:
        o = self.options
        argv = [
            str(o.binary), "--model", o.model, "--host", self.socket_path,
            "--api-key-file", str(self._dir / "key"),
            "--parallel", str(o.slots), "--ctx-size", str(o.slots * o.ctx), "--no-kv-unified",
            "--cache-ram", str(o.cache_ram_mib), "--no-webui", "--metrics", "--log-colors", "off",
            # Maya chooses each request's slot (`id_slot`, slot_choice.py); at 1 no slot ever counts as similar
            # enough to keep as it is, so llama-server restores a better state from its RAM cache first
            "--slot-prompt-similarity", "1",
            "--flash-attn", o.flash_attn,
        ]
        if o.threads:
            argv += ["--threads", str(o.threads)]
        if o.gpu_layers is not None:
            argv += ["--n-gpu-layers", str(o.gpu_layers)]
        if o.mmproj:
            argv += ["--mmproj", o.mmproj]
        return argv + list(o.extra_args)

    def _wait_ready(self, process: subprocess.Popen) -> bool:
        deadline = time.monotonic() + START_TIMEOUT_S
        with httpx.Client(transport=self.transport(), base_url=BASE_URL, headers=self.headers(), timeout=2) as client:
            while time.monotonic() < deadline and not self._stopping.is_set():
                if process.poll() is not None:
                    self._failure = (f"llama-server exited ({self._exit_text()}) while loading the model. "
                                     f"Its last log lines:\n{self._tail_text()}")
                    self._failure_code = process.returncode
                    return False
                try:
                    if client.get("/health").status_code == 200:
                        return True
                except httpx.TransportError:
                    pass  # not listening yet
                time.sleep(0.05)
        if not self._stopping.is_set():
            self._failure = f"llama-server was not ready within {START_TIMEOUT_S:.0f}s:\n" + self._tail_text()
        self._terminate()  # too slow, or stop() came while it loaded (perhaps before it was even spawned)
        return False

    def _forward_log(self, process: subprocess.Popen) -> None:
        assert process.stdout is not None
        for raw in process.stdout:
            line = raw.decode("utf-8", errors="replace").rstrip()
            if line:
                self._tail.append(line)
                child_log.info("%s", line)
                self._note_devices(line)

    def _note_devices(self, line: str) -> None:
        """Keep what the child says about where the model went (it says it once per start, while loading)."""
        offload = parse_offload(line)
        if offload is not None:
            self.offload = offload
        used = parse_used_device(line)
        if used is not None and used not in self.used_devices:
            self.used_devices = (*self.used_devices, used)

    def _terminate(self) -> None:
        process = self._process
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            process.wait(timeout=STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)

    def _exit_text(self) -> str:
        code = self._process.returncode if self._process is not None else None
        if code is not None and code < 0:
            return f"signal {signal.Signals(-code).name}"
        return f"exit code {code}"

    def _tail_text(self) -> str:
        return "\n".join(list(self._tail)[-15:])


def child_environment(environ: dict[str, str] | None = None) -> dict[str, str]:
    """The child's environment: `CHILD_ENVIRONMENT` taken from `environ` (Maya's own by default)."""
    environ = os.environ if environ is None else environ
    return {name: environ[name] for name in CHILD_ENVIRONMENT if name in environ}


def _spawn(argv: list[str]) -> subprocess.Popen:
    return subprocess.Popen(
        argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=child_environment(),
        start_new_session=True,  # a Ctrl-C in Maya's terminal is Maya's to handle, not the child's
        preexec_fn=_die_with_parent(os.getpid()),
    )


def _die_with_parent(parent: int):
    """A pre-exec hook that asks Linux to SIGKILL the child when its parent dies (no-op elsewhere)."""
    if not sys.platform.startswith("linux"):
        return None
    prctl = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True).prctl  # looked up before fork

    def hook() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != parent:  # the parent died before the call: nobody would send the signal
            os._exit(1)

    return hook
