"""Meet the upstream engine once at start-up: is it there, what is it, how much can it take.

`GET /v1/models` answers on vLLM, SGLang and llama-server alike: the model
name to send, who serves it (`owned_by`: "vllm", "sglang", "llamacpp") and, on
vLLM and SGLang, `max_model_len`. llama-server also answers `GET /props` with
`total_slots` (its parallel sequences) and the per-slot context. An unreachable
upstream is a start-up failure the CLI reports in one line.
"""

from __future__ import annotations

from dataclasses import dataclass

import httpx

from ...errors import UpstreamError, UpstreamUnavailable
from .wire import UpstreamKind, error_from_response

_KINDS: dict[str, UpstreamKind] = {"vllm": "vllm", "sglang": "sglang", "llamacpp": "llama-server"}


@dataclass(frozen=True)
class UpstreamInfo:
    kind: UpstreamKind
    model: str | None
    slots: int | None
    """Parallel sequences the upstream reports (llama-server only)."""
    context_size: int | None
    chat_template: str | None = None
    """The model's chat template (llama-server's `/props`), for family detection."""
    vision: bool = False
    """llama-server's `/props` `modalities.vision`: it was started with a multimodal projector."""
    media_marker: str | None = None
    """Where an image goes in a multimodal prompt string: llama-server draws it at random each start (`/props`)."""


def probe_upstream(client: httpx.Client) -> UpstreamInfo:
    """Ask the upstream who it is; raises `UpstreamError` (never an httpx exception)."""
    card = _first_model(_get_json(client, "/v1/models"))
    kind = _KINDS.get(str(card.get("owned_by", "")), "openai")
    model = card.get("id") if isinstance(card.get("id"), str) else None
    context = _positive(card.get("max_model_len"))
    slots, template, vision, marker = None, None, False, None
    if kind in ("llama-server", "openai"):
        props = _llama_server_props(client)
        if props is not None:
            kind = "llama-server"
            slots = _positive(props.get("total_slots"))
            settings = props.get("default_generation_settings")
            context = context or _positive(settings.get("n_ctx") if isinstance(settings, dict) else None)
            template = props.get("chat_template") if isinstance(props.get("chat_template"), str) else None
            modalities = props.get("modalities")
            marker = props.get("media_marker") if isinstance(props.get("media_marker"), str) else None
            vision = isinstance(modalities, dict) and modalities.get("vision") is True and bool(marker)
    return UpstreamInfo(kind=kind, model=model, slots=slots, context_size=context, chat_template=template,
                        vision=vision, media_marker=marker if vision else None)


def model_card(client: httpx.Client) -> dict:
    """The first model of the upstream's `/v1/models` (its own facts: llama-server's `meta`, vLLM's `root`)."""
    return _first_model(_get_json(client, "/v1/models"))


def _llama_server_props(client: httpx.Client) -> dict | None:
    try:
        props = _get_json(client, "/props")
    except UpstreamError:
        return None  # not llama-server
    return props if "total_slots" in props else None


def _get_json(client: httpx.Client, path: str) -> dict:
    try:
        response = client.get(path)
    except httpx.TimeoutException:
        raise UpstreamUnavailable(f"no answer from the upstream engine within {client.timeout.connect}s") from None
    except httpx.ConnectError:
        raise UpstreamUnavailable("cannot connect to the upstream engine") from None
    except httpx.HTTPError as exc:
        raise UpstreamUnavailable(f"no usable answer from the upstream engine ({type(exc).__name__})") from None
    if response.status_code != 200:
        raise error_from_response(response.status_code, response.content[:65536])
    try:
        body = response.json()
    except ValueError:
        raise UpstreamError(f"the upstream engine's {path} is not JSON") from None
    if not isinstance(body, dict):
        raise UpstreamError(f"the upstream engine's {path} is not a JSON object")
    return body


def _first_model(models: dict) -> dict:
    data = models.get("data")
    if isinstance(data, list) and data and isinstance(data[0], dict):
        return data[0]
    return {}


def _positive(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def measure_image_tokens(client: httpx.Client, marker: str) -> int:
    """Context positions one image takes on a llama-server with a projector: the prompt tokens of a text
    with two small probe images less those with one (a prompt may not end in an image: llama-server
    aborts). A model with dynamic resolution may take more for larger images; the engine's own usage then
    corrects the count (the context check uses this one)."""
    import base64
    import io

    from PIL import Image

    png = io.BytesIO()
    Image.new("RGB", (64, 64), (128, 128, 128)).save(png, format="PNG")
    image = base64.b64encode(png.getvalue()).decode("ascii")
    counts = []
    for n in (1, 2):
        body = {"prompt": {"prompt_string": "x" + marker * n + "y", "multimodal_data": [image] * n},
                "n_predict": 1, "temperature": 0, "cache_prompt": False}
        try:
            response = client.post("/completion", json=body)  # see wire.NATIVE_PATH
        except httpx.HTTPError as exc:
            raise UpstreamUnavailable(f"no answer to an image probe ({type(exc).__name__})") from None
        if response.status_code != 200:
            raise error_from_response(response.status_code, response.content[:65536])
        counts.append(_positive(response.json().get("tokens_evaluated")))
    if None in counts or counts[1] <= counts[0]:
        raise UpstreamError("its image probe reported no image tokens")
    return counts[1] - counts[0]
