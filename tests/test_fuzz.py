"""Hypothesis-generated requests for every endpoint: never a 5xx, every 4xx in OpenAI's shape, and a
refused request leaves the engine untouched. Seeded (derandomized) and bounded, so `make test`
runs the same few hundred examples per endpoint every time. The bodies carry what clients really
send besides: every JSON Schema dialect name, the SDK's echoed fields, and a model whose answers
hold U+2028, U+0085 and NUL; tests/test_fuzz_edges.py adds upstream streams, slow senders and SIGTERM."""

from __future__ import annotations

import copy
import json
import os
from urllib.parse import urlencode

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st


from tests.responses.api.sse import ERROR_KEYS
from tests.scripted import RecordingScriptedEngine
from tests.server import RunningServer, prometheus_values, scripted_config, wait_for

MODEL_FAILURES = {"invalid_tool_call"}
"""Error codes of a generation the scripted model spoiled (its script holds malformed calls): not input errors."""
EXAMPLES = settings(max_examples=int(os.environ.get("MAYA_FUZZ_EXAMPLES", "400")), deadline=None, derandomize=True,
                    database=None, suppress_health_check=list(HealthCheck))
"""`MAYA_FUZZ_EXAMPLES` makes a longer hostile run (`pytest -s` prints its totals); `make test` runs 400."""
SCRIPT = ["Hello there.", "<think>hmm</think>Fine.", '<tool_call>{"name": "lookup", "arguments": {"q": "x"}}</tool_call>',
          '<tool_call>{"name": "lookup", "arguments": {"q": [[[[1]]]]}}</tool_call>', "<tool_call>{broken",
          "line\u2028para\u2029next\u0085nul\x00 vt\x0b ff\x0c fs\x1c 😀 end",
          '<tool_call>{"name": "lookup", "arguments": {"q": "a\u2028b\u0085c"}}</tool_call>']
DIALECTS = ["https://json-schema.org/draft/2020-12/schema", "http://json-schema.org/draft/2019-09/schema#",
            "http://json-schema.org/draft-07/schema#", "https://json-schema.org/draft-06/schema",
            "http://json-schema.org/draft-04/schema#", "http://json-schema.org/draft-03/schema#", "urn:other"]

scalars = st.none() | st.booleans() | st.integers(-2**40, 2**40) | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=12)
json_values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=3)
                           | st.dictionaries(st.text(max_size=6), inner, max_size=3), max_leaves=12)


def maybe(plausible: st.SearchStrategy) -> st.SearchStrategy:
    """Mostly a plausible value, sometimes any JSON at all."""
    return st.one_of(plausible, plausible, json_values)


def some(*values) -> st.SearchStrategy:
    return maybe(st.sampled_from(values))


text = st.text(max_size=24)
parameters = maybe(st.fixed_dictionaries({"type": some("object")}, optional={
    "$schema": some(*DIALECTS),
    "properties": maybe(st.fixed_dictionaries({}, optional={"q": maybe(st.fixed_dictionaries(
        {"type": some("string", "integer", "array", "object")}))})),
    "required": maybe(st.lists(some("q"), max_size=2)), "additionalProperties": some(False, True)}))
part = maybe(st.fixed_dictionaries({"type": some("input_text", "output_text", "input_image", "refusal", "text")},
                                   optional={"text": maybe(text), "image_url": some("https://x.example/a.png",
                                             "data:image/png;base64,AAAA", "file:///etc/passwd"),
                                             "annotations": maybe(st.lists(json_values, max_size=2)),
                                             "parsed": maybe(json_values)}))
item = maybe(st.fixed_dictionaries({}, optional={
    "type": some("message", "function_call", "function_call_output", "reasoning", "item_reference"),
    "role": some("user", "assistant", "system", "developer", "tool"),
    "content": maybe(st.one_of(text, st.lists(part, max_size=3))),
    "call_id": some("c1", "c2"), "name": some("lookup", "other"), "arguments": some('{"q": "x"}', "{", "[]"),
    "output": maybe(st.one_of(text, st.lists(part, max_size=2))), "id": some("msg_1", "fc_1"),
    "summary": maybe(st.lists(json_values, max_size=1)),
    "async": some(False, True, None), "async_": some(None, False), "parsed_arguments": maybe(json_values),
    "status": some("completed", "incomplete", None), "phase": some(None, "final_answer"), "caller": some(None),
}))
tool = maybe(st.fixed_dictionaries({"type": some("function", "web_search"), "name": some("lookup", "")},
                                   optional={"parameters": parameters, "strict": some(True, False),
                                             "description": maybe(text)}))
responses_body = st.fixed_dictionaries({}, optional={
    "model": maybe(text), "input": maybe(st.one_of(text, st.lists(item, max_size=4))),
    "instructions": maybe(text), "tools": maybe(st.lists(tool, max_size=2)),
    "tool_choice": maybe(st.one_of(st.sampled_from(["auto", "none", "required"]),
                                   st.fixed_dictionaries({"type": some("function"), "name": some("lookup")}))),
    "temperature": maybe(st.floats(0, 2)), "top_p": maybe(st.floats(0, 1)),
    "max_output_tokens": maybe(st.integers(0, 5000)), "metadata": maybe(st.dictionaries(text, text, max_size=3)),
    "store": maybe(st.booleans()), "stream": maybe(st.booleans()), "background": maybe(st.booleans()),
    "previous_response_id": some("resp_unknown", ""), "parallel_tool_calls": maybe(st.booleans()),
    "reasoning": maybe(st.fixed_dictionaries({}, optional={"effort": some("none", "low", "high", "max")})),
    "text": maybe(st.fixed_dictionaries({}, optional={"format": maybe(st.fixed_dictionaries(
        {"type": some("text", "json_object", "json_schema")},
        optional={"name": some("n"), "schema": parameters, "strict": some(True)}))})),
    "truncation": some("auto", "disabled"), "include": maybe(st.lists(text, max_size=2)),
    "stream_options": maybe(st.fixed_dictionaries({}, optional={"include_obfuscation": maybe(st.booleans())})),
})
message = maybe(st.fixed_dictionaries({"role": some("system", "developer", "user", "assistant", "tool")}, optional={
    "content": maybe(st.one_of(text, st.lists(maybe(st.fixed_dictionaries(
        {"type": some("text", "image_url")}, optional={"text": maybe(text)})), max_size=2))),
    "tool_calls": maybe(st.lists(maybe(st.fixed_dictionaries({"id": some("c1"), "type": some("function"),
        "function": maybe(st.fixed_dictionaries({"name": some("lookup"), "arguments": some('{"q": 1}', "{")},
                                                optional={"parsed_arguments": maybe(json_values)}))},
        optional={"index": some(0, 1, -1)})), max_size=2)),
    "tool_call_id": some("c1"), "name": maybe(text),
    "annotations": maybe(st.lists(json_values, max_size=1)), "parsed": maybe(json_values),
    "audio": some(None, {"id": "a1"}), "function_call": some(None, {"name": "lookup", "arguments": "{}"}),
    "refusal": some(None, "no"),
}))
chat_body = st.fixed_dictionaries({}, optional={
    "model": maybe(text), "messages": maybe(st.lists(message, max_size=4)), "stream": maybe(st.booleans()),
    "stream_options": maybe(st.fixed_dictionaries({}, optional={"include_usage": maybe(st.booleans())})),
    "max_tokens": maybe(st.integers(0, 5000)), "max_completion_tokens": maybe(st.integers(0, 5000)),
    "temperature": maybe(st.floats(0, 2)), "top_p": maybe(st.floats(0, 1)), "seed": maybe(st.integers()),
    "stop": maybe(st.one_of(text, st.lists(text, max_size=3))),
    "tools": maybe(st.lists(maybe(st.fixed_dictionaries({"type": some("function"), "function": maybe(
        st.fixed_dictionaries({"name": some("lookup")}, optional={"parameters": parameters}))})), max_size=2)),
    "tool_choice": maybe(st.sampled_from(["auto", "none", "required"])), "n": maybe(st.integers(0, 3)),
    "response_format": maybe(st.fixed_dictionaries({"type": some("json_schema", "json_object", "text")}, optional={
        "json_schema": maybe(st.fixed_dictionaries({"name": some("n"), "schema": parameters},
                                                   optional={"strict": some(True, False)}))})),
    "audio": some(None, {"voice": "alloy", "format": "wav"}), "modalities": some(None, ["text"], ["audio"]),
    "prompt_cache_key": maybe(text), "safety_identifier": maybe(text), "service_tier": some(None, "auto", "flex"),
    "verbosity": some(None, "medium", "low"), "logit_bias": some(None, {}, {"1": 5}), "top_logprobs": some(None, 0, 3),
})
STRICT_SCHEMA = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"],
                 "additionalProperties": False}
RESPONSES_TEMPLATES = [
    {"model": "m", "store": True, "instructions": "be brief", "metadata": {"a": "b"}, "temperature": 0.5,
     "top_p": 0.9, "max_output_tokens": 100, "reasoning": {"effort": "low"}, "parallel_tool_calls": False,
     "input": [
         {"role": "user", "content": [{"type": "input_text", "text": "hi"}]},
         {"type": "message", "role": "assistant", "id": "msg_1", "status": "completed", "phase": None, "content": [
             {"type": "output_text", "text": "x", "annotations": [], "logprobs": [], "parsed": {"q": "x"}}]},
         {"type": "function_call", "call_id": "c1", "name": "lookup", "arguments": '{"q": "x"}', "async_": None,
          "async": False, "caller": None, "namespace": None, "status": "completed", "parsed_arguments": {"q": "x"}},
         {"type": "function_call_output", "call_id": "c1", "output": [{"type": "input_text", "text": "ok"}]},
         {"type": "reasoning", "summary": [], "content": [{"type": "reasoning_text", "text": "r"}]},
     ],
     "tools": [{"type": "function", "name": "lookup", "strict": True, "parameters": STRICT_SCHEMA}],
     "tool_choice": {"type": "function", "name": "lookup"}},
    {"model": "m", "stream": True, "input": [{"role": "developer", "content": "d"}, {"role": "user", "content": [
        {"type": "input_text", "text": "hi"}, {"type": "input_image", "image_url": "data:image/png;base64,AAAA"}]}],
     "text": {"format": {"type": "json_schema", "name": "n", "strict": True,
                         "schema": {"$schema": "http://json-schema.org/draft-07/schema#", **STRICT_SCHEMA}}},
     "stream_options": {"include_obfuscation": False}, "include": [], "truncation": "disabled"},
]
CHAT_TEMPLATES = [
    {"model": "m", "stream": True, "stream_options": {"include_usage": True}, "max_tokens": 50, "temperature": 0.2,
     "top_p": 0.5, "seed": 1, "stop": ["x"], "tool_choice": "auto",
     "messages": [
         {"role": "system", "content": "s"},
         {"role": "user", "content": [{"type": "text", "text": "hi"}]},
         {"role": "assistant", "content": None, "refusal": None, "annotations": None, "audio": None,
          "function_call": None, "parsed": None, "reasoning_content": "r", "tool_calls": [
             {"id": "c1", "type": "function", "index": 0,
              "function": {"name": "lookup", "arguments": "{}", "parsed_arguments": None}}]},
         {"role": "tool", "tool_call_id": "c1", "content": "ok"},
     ],
     "tools": [{"type": "function", "function": {"name": "lookup", "parameters": STRICT_SCHEMA}}]},
]


def _paths(value, prefix: tuple = ()):
    yield prefix
    children = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, child in children:
        yield from _paths(child, (*prefix, key))


@st.composite
def mutated(draw, templates: list[dict]) -> dict:
    """A valid template with one field replaced by any JSON value, or removed: every field's type check
    is reached with every kind of wrong value, past the checks that come before it."""
    body = copy.deepcopy(draw(st.sampled_from(templates)))
    *parents, last = draw(st.sampled_from(list(_paths(body))[1:]))
    holder = body
    for key in parents:
        holder = holder[key]
    if isinstance(holder, dict) and draw(st.integers(0, 4)) == 0:
        del holder[last]
    else:
        holder[last] = draw(json_values)
    return body


QUERY_KEYS = ("order", "limit", "after", "include", "include[]", "stream", "starting_after", "force", "x")
queries = st.dictionaries(st.sampled_from(QUERY_KEYS), st.one_of(
    st.sampled_from(["asc", "desc", "true", "false", "0", "1", "100", "101", "-1", "msg_1", ""]), text), max_size=3)


@pytest.fixture(scope="module")
def server():
    config = scripted_config(max_queue=4)
    running = RunningServer(config, RecordingScriptedEngine(SCRIPT, context_size=config.ctx))
    client = running.client()
    stored = [client.responses.create(model="m", input="seed", store=True).id for _ in range(2)]
    running.stored_ids = stored
    with httpx.Client(base_url=running.url, timeout=30) as http:
        running.fuzz_http = http
        yield running
        report_totals("test_fuzz", http)
    running.stop()


def report_totals(name: str, http: httpx.Client) -> dict[str, float]:
    """The server's answers by status over the whole run (shown with `pytest -s`): the hostile run's totals."""
    counts: dict[str, float] = {}
    for key, value in prometheus_values(http.get("/metrics/prometheus").text, "maya:http_requests_total").items():
        status = key.split('status="', 1)[1].split('"', 1)[0]
        counts[status] = counts.get(status, 0) + value
    print(f"\n{name}: {int(sum(counts.values()))} requests; by status "
          + ", ".join(f"{k}: {int(v)}" for k, v in sorted(counts.items())))
    return counts


def check(server: RunningServer, method: str, path: str, **request) -> None:
    """One request: no 5xx; a 4xx in OpenAI's shape with the engine untouched; a stream that ends well."""
    def jobs_busy() -> int:
        stats = server.on_loop(server.app.state.jobs.stats)
        return stats["queued"] + stats["running"]

    assert wait_for(lambda: jobs_busy() == 0)
    calls = server.engine.calls
    with server.fuzz_http.stream(method, path, **request) as answer:
        body = answer.read()
    if answer.status_code >= 500:  # only the model's own failure, on Chat's invalid-call path, is a 5xx
        assert json.loads(body)["error"]["code"] in MODEL_FAILURES, body[:500]
    elif answer.status_code >= 400:
        error = json.loads(body)["error"]
        assert set(error) == ERROR_KEYS and isinstance(error["message"], str), body[:500]
        assert server.engine.calls == calls, f"a refused request reached the engine: {body[:300]}"
    elif answer.headers.get("content-type", "").startswith("text/event-stream"):
        lines = body.decode().split("\n")  # SSE's own line ends; str.splitlines would break at U+2028
        assert all(not line or line.startswith(("data: ", "event: ", ":")) for line in lines), body[:300]
        last = [line for line in lines if line.startswith("data: ")][-1][6:]
        assert last == "[DONE]" or _terminal(json.loads(last)), last[:300]


def _terminal(event: dict) -> bool:
    return "error" in event or event.get("type") in ("response.completed", "response.incomplete",
                                                     "response.failed", "error")


@EXAMPLES
@given(body=st.one_of(mutated(RESPONSES_TEMPLATES), responses_body))
def test_responses_bodies(server, body):
    check(server, "POST", "/v1/responses", json=body)


@EXAMPLES
@given(body=st.one_of(mutated(CHAT_TEMPLATES), chat_body))
def test_chat_bodies(server, body):
    check(server, "POST", "/v1/chat/completions", json=body)


@EXAMPLES
@given(raw=st.one_of(st.binary(max_size=64), json_values.map(lambda v: json.dumps(v).encode())),
       path=st.sampled_from(["/v1/responses", "/v1/chat/completions"]))
def test_raw_bodies(server, raw, path):
    check(server, "POST", path, content=raw, headers={"Content-Type": "application/json"})


@EXAMPLES
@given(target=st.sampled_from(["stored", "unknown", "odd"]), query=queries,
       route=st.sampled_from([("GET", ""), ("GET", "/input_items"), ("DELETE", ""), ("POST", "/cancel")]))
def test_resource_routes_and_queries(server, target, query, route):
    method, suffix = route
    response_id = {"stored": server.stored_ids[0], "unknown": "resp_unknown", "odd": "%00..%2F"}[target]
    if method == "DELETE" and target == "stored":
        response_id = server.stored_ids[1]  # may be deleted once; later tries are 404s
    check(server, method, f"/v1/responses/{response_id}{suffix}?{urlencode(query)}")


@EXAMPLES
@given(path=st.sampled_from(["/v1/models/", "/v1/models/scripted", "/v1/status", "/health", "/metrics/prometheus",
                             "/v1/nothing", "/v1/responses", "/v1/chat/completions"]),
       method=st.sampled_from(["GET", "POST", "PUT", "DELETE", "PATCH"]), query=queries)
def test_every_other_route_and_method(server, path, method, query):
    headers = {"Content-Type": "application/json"} if method in ("POST", "PUT", "PATCH") else {}
    check(server, method, f"{path}?{urlencode(query)}", headers=headers, content=b"{}" if headers else None)


# Image URLs: every one is accepted or refused with a 400 `invalid_image` at its param, never a 5xx; the
# loader's resolver answers with a public address and its transport is in-process (a PNG, or a redirect
# to a fuzzed Location), so nothing leaves this machine, and the transport fails the test if it is asked
# to connect anywhere the address policy refuses.

LABEL_CHARS = "ab0-_.é日\u3002%[]:@\\ \t"
hosts = st.one_of(
    st.text(alphabet=LABEL_CHARS, min_size=0, max_size=20),
    st.lists(st.text(alphabet="abz09-_", min_size=0, max_size=66), min_size=1, max_size=5).map(".".join),
    st.sampled_from(["[::1]", "[2001:db8::1]", "[zz]", "[::1", "::1]", "[fe80::1%25eth0]", "[1.2.3.4]",
                     "2130706433", "0x7f.1", "127.1", "01.2.3.4", "1.2.3.4.5", "93.184.216.34", "xn--zz",
                     "xn--exmple-cua.example", "ex\u00e4mple.com", "\u2100", "a..b", "-a.example", "a" * 64]),
)
ports = st.one_of(st.just(""), st.text(alphabet="0123456789-+:a٣", max_size=7).map(lambda p: ":" + p))
image_urls = st.one_of(
    st.builds(lambda scheme, sep, user, host, port, path: f"{scheme}{sep}{user}{host}{port}{path}",
              st.sampled_from(["http", "HTTP", "hTtPs", "https", "ftp", "data", "javascript", ""]),
              st.sampled_from(["://", ":/", ":\\\\", ":", "://"]),
              st.sampled_from(["", "user:pw@", "@", "a@b@"]), hosts, ports,
              st.text(alphabet="/a?#%.\\ \x00é", max_size=10)),
    st.text(max_size=30),
)
IMAGE_EXAMPLES = settings(max_examples=300, deadline=None, derandomize=True, database=None,
                          suppress_health_check=list(HealthCheck))


def _png() -> bytes:
    import io

    from PIL import Image

    out = io.BytesIO()
    Image.new("RGB", (4, 4), (1, 2, 3)).save(out, format="PNG")
    return out.getvalue()


PNG = _png()


class _ImageHost:
    """The one image server every loader below reaches (a `MockTransport`; every name resolves to a public
    address): a PNG, after one redirect to `location` where an example sets one. One loader serves all of a test's
    examples: a loader's first fetch loads the CA bundle (~40 ms), which a loader per example paid 300 times."""

    def __init__(self) -> None:
        self.location: str | None = None
        self._redirected = False

    def redirecting_once_to(self, location: str | None) -> None:
        self.location, self._redirected = location, False

    def handler(self, request: httpx.Request) -> httpx.Response:
        from maya_server.images.address_policy import parse_address, refusal

        assert refusal(parse_address(request.url.host)) is None, f"asked to connect to {request.url}"
        if self.location is not None and not self._redirected:
            self._redirected = True
            return httpx.Response(302, headers={"location": self.location})
        return httpx.Response(200, content=PNG)

    def loader(self):
        from maya_server.images.loader import ImageLimits, ImageLoader

        async def public(host, port):
            return ["93.184.216.34"]

        return ImageLoader(ImageLimits(), resolver=public, transport=httpx.MockTransport(self.handler))


@pytest.fixture(scope="module")
def image_host():
    host = _ImageHost()
    loader = host.loader()
    yield host, loader
    loader.close()


def _load(loader, url: str):
    import asyncio

    from maya_server.neutral.conversation import Conversation, ImagePart, Message
    from maya_server.errors import ImageError

    try:
        loaded = asyncio.run(loader.load(Conversation((Message("user", (ImagePart(url, param="p"),)),))))
    except ImageError as exc:
        assert (exc.param, exc.code, exc.status) == ("p", "invalid_image", 400)
        return None
    return loaded.turns[0].content[0].data


@IMAGE_EXAMPLES
@given(url=image_urls)
def test_image_urls(image_host, url):
    host, loader = image_host
    host.redirecting_once_to(None)
    _load(loader, url)


@IMAGE_EXAMPLES
@given(location=st.one_of(image_urls, st.sampled_from(["/ok.png", "ok.png", "//cdn.example/x", "HTTP://B.example/",
                                                        "data:image/png;base64,AAAA", "http:\\\\h/x", ""])))
def test_image_redirects_to_odd_locations(image_host, location):
    host, loader = image_host
    host.redirecting_once_to(location)
    _load(loader, "http://images.example/a.png")


@pytest.fixture(scope="module")
def vision_server():
    from maya_server.images.loader import ImageLimits, ImageLoader  # noqa: F401

    config = scripted_config()
    running = RunningServer(config, RecordingScriptedEngine(["A picture."], context_size=config.ctx))
    running.engine.accepts_images = True  # the scripted engine, standing in for a vision engine
    service = running.app.state.service
    service.images = _ImageHost().loader()
    with httpx.Client(base_url=running.url, timeout=30) as http:
        running.fuzz_http = http
        yield running
    running.stop()


@IMAGE_EXAMPLES
@given(url=image_urls, api=st.sampled_from(["chat", "responses"]))
def test_image_urls_over_http(vision_server, url, api):
    if api == "chat":
        body = {"model": "m", "messages": [{"role": "user", "content": [
            {"type": "image_url", "image_url": {"url": url}}]}]}
        path, param = "/v1/chat/completions", "messages[0].content[0].image_url.url"
    else:
        body = {"model": "m", "input": [{"role": "user", "content": [{"type": "input_image", "image_url": url}]}]}
        path, param = "/v1/responses", "input[0].content[0].image_url"
    calls = vision_server.engine.calls
    answer = vision_server.fuzz_http.post(path, json=body)
    assert answer.status_code in (200, 400), answer.text[:300]
    if answer.status_code == 400:
        error = answer.json()["error"]
        assert (error["code"], error["param"]) == ("invalid_image", param), error
        assert vision_server.engine.calls == calls
