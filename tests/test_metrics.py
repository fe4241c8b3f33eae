"""`Metrics`: one Prometheus registry per app, never the global one, rendered in the text format.

Two apps in one process (as the tests run them) must not collide or share figures, and the labels
are a fixed, short list (routes, statuses, finish reasons, image sources and refusal reasons) so no
credential, input or generated text can ever become a label value.
"""

from __future__ import annotations

import prometheus_client
from prometheus_client.parser import text_string_to_metric_families

from maya_server.metrics import LATENCY_BUCKETS, Metrics

LABELS = {"route", "status", "finish_reason", "source", "reason"}


def families(metrics: Metrics) -> dict:
    return {family.name: family for family in text_string_to_metric_families(metrics.render().decode())}


def value(metrics: Metrics, sample_name: str, **labels) -> float:
    return metrics.registry.get_sample_value(sample_name, labels)


def test_each_app_has_its_own_registry_and_the_global_one_stays_clean():
    first, second = Metrics(), Metrics()  # a second instance does not raise "Duplicated timeseries"
    first.requests.labels("/v1/responses", "200").inc()
    assert value(first, "maya:http_requests_total", route="/v1/responses", status="200") == 1
    assert value(second, "maya:http_requests_total", route="/v1/responses", status="200") is None
    assert prometheus_client.REGISTRY.get_sample_value("maya:http_requests_total",
                                                       {"route": "/v1/responses", "status": "200"}) is None


def test_render_is_the_prometheus_text_format_with_every_metric():
    names = set(families(Metrics()))
    assert {"maya:http_requests", "maya:http_request_duration_seconds", "maya:prompt_tokens",
            "maya:cached_prompt_tokens", "maya:generated_tokens", "maya:generations",
            "maya:time_to_first_token_seconds", "maya:engine_queue_wait_seconds", "maya:engine_queue_waiting",
            "maya:engine_slots_busy", "maya:engine_slots", "maya:engine_queue_rejections", "maya:images",
            "maya:image_bytes", "maya:image_rejections", "maya:image_fetches", "maya:image_memory_bytes",
            "maya:image_memory_limit_bytes", "maya:image_load_seconds"} <= names
    assert all(name.startswith("maya:") for name in names)


def test_recorded_figures_appear_in_the_rendering():
    metrics = Metrics()
    metrics.generated_tokens.inc(7)
    metrics.generations.labels("stop").inc()
    metrics.slots_total.set(4)
    metrics.first_token_seconds.observe(0.02)
    text = metrics.render().decode()
    assert "maya:generated_tokens_total 7.0" in text
    assert 'maya:generations_total{finish_reason="stop"} 1.0' in text
    assert "maya:engine_slots 4.0" in text
    assert value(metrics, "maya:time_to_first_token_seconds_bucket", le="0.025") == 1
    assert value(metrics, "maya:time_to_first_token_seconds_bucket", le="0.01") == 0


def test_latency_histograms_use_the_shared_buckets():
    metrics = Metrics()
    metrics.request_seconds.labels("/v1/chat/completions").observe(1)
    bounds = [s.labels["le"] for s in families(metrics)["maya:http_request_duration_seconds"].samples
              if s.name.endswith("_bucket")]
    assert bounds == [str(float(b)) for b in LATENCY_BUCKETS] + ["+Inf"]
    assert list(LATENCY_BUCKETS) == sorted(LATENCY_BUCKETS) and LATENCY_BUCKETS[-1] >= 120


def test_labels_are_only_routes_statuses_and_reasons():
    metrics = Metrics()
    collectors = [v for v in vars(metrics).values() if hasattr(v, "_labelnames")]
    assert len(collectors) == 20
    declared = {name for collector in collectors for name in collector._labelnames}
    assert declared == LABELS
