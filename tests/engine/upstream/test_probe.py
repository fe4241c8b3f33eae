"""The start-up probe against the shapes vLLM and SGLang answer with (llama-server's is tested for real)."""

from __future__ import annotations

import httpx
import pytest

from maya_server.engine.upstream.probe import probe_upstream
from maya_server.errors import UpstreamError, UpstreamUnavailable


def _client(routes: dict[str, tuple[int, object]]) -> httpx.Client:
    def handler(request: httpx.Request) -> httpx.Response:
        status, body = routes.get(request.url.path, (404, {"detail": "Not Found"}))
        return httpx.Response(status, json=body)

    return httpx.Client(base_url="http://upstream:8000", transport=httpx.MockTransport(handler))


def test_vllm_is_recognised_with_its_context_and_no_slot_count():
    models = {"object": "list", "data": [{"id": "glm-5.1", "object": "model", "owned_by": "vllm", "max_model_len": 131072}]}
    info = probe_upstream(_client({"/v1/models": (200, models)}))
    assert (info.kind, info.model, info.context_size, info.slots) == ("vllm", "glm-5.1", 131072, None)


def test_sglang_is_recognised():
    models = {"object": "list", "data": [{"id": "/models/GLM-5.1-FP8", "owned_by": "sglang", "max_model_len": 202752}]}
    info = probe_upstream(_client({"/v1/models": (200, models)}))
    assert (info.kind, info.context_size) == ("sglang", 202752)


def test_an_unknown_openai_server_is_driven_generically():
    info = probe_upstream(_client({"/v1/models": (200, {"data": [{"id": "m"}]})}))
    assert (info.kind, info.model, info.context_size, info.slots) == ("openai", "m", None, None)


def test_a_refused_key_and_an_unreachable_host_are_upstream_errors():
    with pytest.raises(UpstreamError) as caught:
        probe_upstream(_client({"/v1/models": (401, {"error": {"message": "Invalid API key"}})}))
    assert "credentials" in caught.value.message

    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused", request=request)

    with pytest.raises(UpstreamUnavailable):
        probe_upstream(httpx.Client(base_url="http://upstream:8000", transport=httpx.MockTransport(refuse)))


def test_a_llama_server_with_a_projector_is_recognised_by_its_props():
    props = {"total_slots": 2, "default_generation_settings": {"n_ctx": 4096},
             "modalities": {"vision": True, "audio": False}, "media_marker": "<__media_x__>"}
    info = probe_upstream(_client({"/v1/models": (200, {"data": [{"id": "m", "owned_by": "llamacpp"}]}),
                                   "/props": (200, props)}))
    assert (info.kind, info.vision, info.media_marker) == ("llama-server", True, "<__media_x__>")
    without = probe_upstream(_client({"/v1/models": (200, {"data": [{"id": "m", "owned_by": "llamacpp"}]}),
                                      "/props": (200, {**props, "modalities": {"vision": False}})}))
    assert (without.vision, without.media_marker) == (False, None)
