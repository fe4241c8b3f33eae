"""`/openapi.json` and `/docs` describe every route, open like `/health`; request bodies are real schemas."""

from __future__ import annotations

from jsonschema import Draft202012Validator
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

ROUTES = {
    ("/v1/responses", "post"), ("/v1/responses/compact", "post"), ("/v1/chat/completions", "post"),
    ("/v1/responses/{response_id}", "get"), ("/v1/responses/{response_id}", "delete"),
    ("/v1/responses/{response_id}/cancel", "post"), ("/v1/responses/{response_id}/input_items", "get"),
    ("/v1/models", "get"), ("/v1/models/{model}", "get"), ("/v1/status", "get"),
    ("/v1/mcp", "get"),
    ("/metrics/prometheus", "get"), ("/health", "get"),
}


def body_validator(document: dict, path: str) -> Draft202012Validator:
    schema = document["paths"][path]["post"]["requestBody"]["content"]["application/json"]["schema"]
    registry = Registry().with_resource("urn:maya", Resource.from_contents(document, DRAFT202012))
    return Draft202012Validator({"$ref": "urn:maya#" + schema["$ref"].removeprefix("#")}, registry=registry)


def test_the_schema_lists_every_route_without_a_key(start_server):
    server = start_server(api_keys=("k1",))
    with server.http() as http:
        answer = http.get("/openapi.json")
        docs = http.get("/docs")
        assert http.get("/v1/status").status_code == 401  # the routes themselves still need it
    assert answer.status_code == 200
    document = answer.json()
    served = {(path, method) for path, methods in document["paths"].items() for method in methods}
    assert served == ROUTES
    assert docs.status_code == 200 and "/openapi.json" in docs.text and "swagger" in docs.text.lower()
    assert "client_metadata" in document["paths"]["/v1/responses"]["post"]["description"]
    assert "strata_mcp" in document["paths"]["/v1/chat/completions"]["post"]["description"]
    items = document["paths"]["/v1/responses/{response_id}/input_items"]["get"]["parameters"]
    assert {p["name"] for p in items} >= {"response_id", "order", "limit", "after"}


def test_request_bodies_are_the_schemas_the_routes_validate_with(start_server):
    server = start_server()
    with server.http() as http:
        document = http.get("/openapi.json").json()
    responses = body_validator(document, "/v1/responses")
    assert responses.is_valid({"model": "m", "input": "hi", "presence_penalty": 0.5, "max_tool_calls": 2})
    assert not responses.is_valid({"input": "hi", "temperature": 3})
    assert not responses.is_valid({"input": "hi", "no_such_field": 1})
    chat = body_validator(document, "/v1/chat/completions")
    assert chat.is_valid({"messages": [{"role": "user", "content": "hi"}], "response_format": {"type": "json_object"}})
    assert not chat.is_valid({"messages": []})
