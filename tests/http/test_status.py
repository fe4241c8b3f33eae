"""/v1/models, /v1/status and /metrics/prometheus."""

from __future__ import annotations


def test_models_lists_the_served_model(start_server):
    server = start_server(["ok"], model_name="smollm2-test")
    models = server.client().models.list()
    assert [m.id for m in models.data] == ["smollm2-test"]
    assert server.client().models.retrieve("smollm2-test").id == "smollm2-test"


def test_status_reports_model_engine_queue_and_endpoints(start_server):
    server = start_server(["ok"], model_name="smollm2-test")
    with server.http() as http:
        status = http.get("/v1/status").json()
    assert status["model"] == "smollm2-test"
    assert status["engine"]["name"] == "scripted"
    assert status["context_size"] == 4096
    assert status["queue"] == {"slots": 1, "busy": 0, "waiting": 0, "max_queue": 64, "admitted": 0, "rejected": 0}
    assert "/v1/chat/completions" in status["dialects"]
    assert status["endpoints"] == status["dialects"]  # the old key is an alias of the new one
    assert status["uptime_s"] >= 0


def test_metrics_count_requests_and_tokens_without_prompt_text_or_keys(start_server):
    server = start_server(["three little words"], api_keys=("secret-key-123",))
    client = server.client()
    client.chat.completions.create(model="m", messages=[{"role": "user", "content": "confidential-prompt"}])
    with server.http() as http:
        http.get("/v1/models")  # a 401 as well
        text = http.get("/metrics/prometheus", headers={"Authorization": "Bearer secret-key-123"}).text
    assert 'maya:http_requests_total{route="/v1/chat/completions",status="200"} 1.0' in text
    assert 'maya:http_requests_total{route="unmatched",status="401"} 1.0' in text
    assert "maya:generated_tokens_total 3.0" in text
    assert f"maya:prompt_tokens_total {len(server.engine.prompts[0])}.0" in text
    assert 'maya:generations_total{finish_reason="stop"} 1.0' in text
    assert "maya:engine_queue_wait_seconds_count 1.0" in text
    assert "maya:engine_slots_busy 0.0" in text
    assert "maya:engine_process" not in text  # the scripted engine runs no child process
    assert "confidential-prompt" not in text
    assert "secret-key-123" not in text


def test_two_apps_have_separate_metrics(start_server):
    first = start_server(["a"])
    second = start_server(["b"])
    first.client().chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
    with second.http() as http:
        assert "maya:generated_tokens_total 0.0" in http.get("/metrics/prometheus").text
