"""Does a llama-server Maya did not build (`--llama-server PATH`) offer what Maya relies on?

Maya drives llama-server through a fixed set of flags and endpoint fields; an
older or differently built llama-server may lack one, and would then fail
later and obscurely (a flag it does not know ends the child at once with
llama.cpp's usage text; a field it does not send makes answers quietly wrong).
So before serving, Maya checks each and refuses to start, naming what is
missing (`EngineOptionError` on `llama_server`: the CLI exits 2):

- its flags (`REQUIRED_FLAGS`, read from `PATH --help`), including a `--host`
  that binds a Unix socket (a host ending in `.sock`);
- once it is up, its endpoints (`check_endpoints`): `/v1/models`, `/props`
  (`total_slots`, `default_generation_settings.n_ctx`), `/tokenize` with
  `parse_special` (a special token's text is one id with it, several without),
  `/detokenize`, and a streamed `/completion` with `return_tokens` (each
  event's `tokens`), `return_progress` (`prompt_progress` events), `id_slot`
  (the final event names the slot asked for) and the final event's
  `tokens_evaluated`, `tokens_predicted`, `stop_type` and `timings.cache_n`.

The start-up token self-check (`engine.py`'s `check_tokenizer`) runs after this, as
for the built binary. The binary Maya builds is the pinned version these were
written against, so it is not checked.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import httpx
import orjson

from ...errors import EngineOptionError
from ...model.gguf_vocabulary import GgufVocabulary

OPTION = "llama_server"
HELP_TIMEOUT_S = 60.0
REQUIRED_FLAGS: dict[str, str] = {
    "--model": "the model file",
    "--host": "the private Unix socket it listens on",
    "--api-key-file": "the private key, read from a file",
    "--parallel": "the slots",
    "--ctx-size": "the context",
    "--no-kv-unified": "a context of its own per slot",
    "--cache-ram": "the RAM prompt cache (--cache-ram-mib)",
    "--no-webui": "no web UI on the private socket",
    "--metrics": "the engine metrics",
    "--log-colors": "plain log lines",
    "--slot-prompt-similarity": "Maya's own slot choice",
    "--flash-attn": "the flash-attention default per backend",
    "--threads": "--threads",
    "--n-gpu-layers": "--gpu-layers",
    "--list-devices": "the devices reported in /v1/status",
}
"""Each flag Maya gives the child, and what it is for (the refusal names both)."""
MMPROJ_FLAG = ("--mmproj", "the multimodal projector (--mmproj)")


def check_flags(binary: Path, *, mmproj: bool = False) -> None:
    """Refuse a binary whose `--help` lacks a flag Maya passes, or a `--host` that binds a Unix socket."""
    try:
        result = subprocess.run([str(binary), "--help"], stdin=subprocess.DEVNULL, capture_output=True, text=True,
                                errors="replace", timeout=HELP_TIMEOUT_S)
    except (OSError, subprocess.SubprocessError) as exc:
        raise EngineOptionError(OPTION, f"{binary} could not be run ({exc})", value=str(binary)) from None
    text = result.stdout + result.stderr
    wanted = dict(REQUIRED_FLAGS)
    if mmproj:
        wanted[MMPROJ_FLAG[0]] = MMPROJ_FLAG[1]
    missing = [f"{flag} ({why})" for flag, why in wanted.items() if not _offers(text, flag)]
    if _offers(text, "--host") and ".sock" not in text:
        missing.append("--host binding a Unix socket (a path ending in .sock)")
    if missing:
        raise EngineOptionError(OPTION, f"{binary} is a llama-server without what Maya needs: its --help lists no "
                                        f"{'; no '.join(missing)}. Use a newer llama-server (llama.cpp as pinned by "
                                        "Maya, or later), or drop --llama-server to use the one Maya builds",
                                value=str(binary))


def _offers(help_text: str, flag: str) -> bool:
    return re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", help_text) is not None


def check_endpoints(client: httpx.Client, vocabulary: GgufVocabulary, binary: Path) -> None:
    """Refuse a running llama-server whose endpoints lack a field Maya reads (see the module's list)."""
    missing: list[str] = []
    models = _get(client, "/v1/models", missing)
    if models is not None and not isinstance(models.get("data"), list):
        missing.append("/v1/models' data")
    props = _get(client, "/props", missing) or {}
    slots = props.get("total_slots")
    if not isinstance(slots, int):
        missing.append("/props' total_slots")
    settings = props.get("default_generation_settings")
    if not isinstance(settings, dict) or not isinstance(settings.get("n_ctx"), int):
        missing.append("/props' default_generation_settings.n_ctx")
    _check_tokenize(client, vocabulary, missing)
    _check_completion(client, (slots - 1) if isinstance(slots, int) and slots > 1 else 0, missing)
    if missing:
        raise EngineOptionError(OPTION, f"{binary} started, but llama-server lacks what Maya needs: "
                                        f"{'; '.join(missing)}. Use a newer llama-server (llama.cpp as pinned by "
                                        "Maya, or later), or drop --llama-server to use the one Maya builds",
                                value=str(binary))


def _get(client: httpx.Client, path: str, missing: list[str]) -> dict | None:
    try:
        response = client.get(path)
        body = response.json() if response.status_code == 200 else None
    except (httpx.HTTPError, ValueError):
        body = None
    if not isinstance(body, dict):
        missing.append(f"GET {path}")
        return None
    return body


def _post(client: httpx.Client, path: str, body: dict, missing: list[str]) -> dict | None:
    try:
        response = client.post(path, json=body)
        answer = response.json() if response.status_code == 200 else None
    except (httpx.HTTPError, ValueError):
        answer = None
    if not isinstance(answer, dict):
        missing.append(f"POST {path}")
        return None
    return answer


def _check_tokenize(client: httpx.Client, vocabulary: GgufVocabulary, missing: list[str]) -> None:
    """A special token's own text is its one id with `parse_special`, and plain text without; `/detokenize` gives
    text for ids."""
    special = next((i for i in range(len(vocabulary)) if vocabulary.is_special(i)
                    and len(vocabulary.piece(i)) > 1), None)
    if special is None:
        return  # a vocabulary without a multi-character special token: nothing to tell the two apart by
    text = vocabulary.piece(special).decode("utf-8", errors="replace")
    parsed = _post(client, "/tokenize", {"content": text, "add_special": False, "parse_special": True}, missing)
    plain = _post(client, "/tokenize", {"content": text, "add_special": False, "parse_special": False}, missing)
    if parsed is not None and plain is not None:
        if parsed.get("tokens") != [special] or plain.get("tokens") == [special]:
            missing.append("/tokenize's parse_special")
    detokenized = _post(client, "/detokenize", {"tokens": [special]}, missing)
    if detokenized is not None and not isinstance(detokenized.get("content"), str):
        missing.append("/detokenize's content")


def _check_completion(client: httpx.Client, slot: int, missing: list[str]) -> None:
    """One short streamed `/completion` as Maya sends it, its events read for each field Maya uses."""
    body = {"prompt": "Hello", "n_predict": 2, "temperature": 0, "stream": True, "return_tokens": True,
            "return_progress": True, "id_slot": slot, "cache_prompt": False, "top_k": 0, "min_p": 0.0}
    events: list[dict] = []
    try:
        # its own connection: llama-server may close a stream's connection after the final event, and the next
        # request on it (probe_upstream's) would then meet a closed socket
        with client.stream("POST", "/completion", json=body, headers={"Connection": "close"}) as response:
            if response.status_code != 200:
                missing.append(f"POST /completion (HTTP {response.status_code})")
                return
            for line in response.iter_lines():
                if line.startswith("data: "):
                    events.append(orjson.loads(line[6:]))
    except (httpx.HTTPError, orjson.JSONDecodeError):
        missing.append("a streamed POST /completion")
        return
    tokens = [e for e in events if e.get("stop") is False and "prompt_progress" not in e]
    final = events[-1] if events and events[-1].get("stop") is True else {}
    if not tokens or not all(isinstance(e.get("tokens"), list) for e in tokens):
        missing.append("/completion's return_tokens (each event's tokens)")
    if not any("prompt_progress" in e for e in events):
        missing.append("/completion's return_progress (prompt_progress events)")
    if final.get("id_slot") != slot:
        missing.append("/completion's id_slot")
    for name in ("tokens_evaluated", "tokens_predicted", "stop_type"):
        if name not in final:
            missing.append(f"/completion's final {name}")
    if not isinstance(final.get("timings"), dict) or "cache_n" not in final["timings"]:
        missing.append("/completion's final timings.cache_n")
