"""Server-side conversation state through the OpenAI SDK: store, previous_response_id and the
resource endpoints, as the spec's "Conversation State" section describes them.

Every test runs twice: on the memory store and on the Redis store (a real redis-server; skipped, saying
why, where it is not installed)."""

from __future__ import annotations

import json

import openai
import pytest
from openai.types.responses import ResponseItem
from pydantic import TypeAdapter

from tests.server import prometheus_values, wait_for
from tests.responses.store_backends import BACKENDS, over_backends, store_stats
from tests.responses.api.sse import iter_frames, post_error, read_stream, validate_response
from tests.responses.api.test_function_tools import PARIS, TOOLS, one_call
from tests.responses.api.test_input_conversion import chatml

ITEM = TypeAdapter(ResponseItem)


@pytest.fixture(params=BACKENDS)
def start_server(request, start_server):
    return over_backends(start_server, request.param)


def remember_73(client) -> tuple:
    first = client.responses.create(model="m", input="Remember the value 73", store=True)
    second = client.responses.create(
        model="m", previous_response_id=first.id, input="What value did I give you?", store=True,
    )
    return first, second


# -- the spec's example ---------------------------------------------------------------------
def test_remember_73_retrieve_list_delete(start_server):
    server = start_server(["Noted.", "You gave me 73.", "Still 73."])
    client = server.client()
    first, second = remember_73(client)
    assert server.engine.last_prompt_text == chatml(
        ("user", "Remember the value 73"), ("assistant", "Noted."), ("user", "What value did I give you?"))
    assert second.output_text == "You gave me 73." and second.previous_response_id == first.id

    saved = client.responses.retrieve(second.id)
    assert saved.model_dump() == second.model_dump()
    validate_response(server.http().get(f"/v1/responses/{second.id}").json())

    items = list(client.responses.input_items.list(second.id, order="asc", limit=20))
    assert [(i.type, getattr(i, "role", None)) for i in items] == [
        ("message", "user"), ("message", "assistant"), ("message", "user")]
    assert items[0].content[0].text == "Remember the value 73"
    assert items[1].id == first.output[0].id  # the earlier output is the same item, same id
    assert items[2].content[0].text == "What value did I give you?"

    client.responses.delete(first.id)
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(first.id)
    assert client.responses.retrieve(second.id).output_text == "You gave me 73."
    third = client.responses.create(model="m", previous_response_id=second.id, input="Again?", store=True)
    assert "Remember the value 73" in server.engine.last_prompt_text
    assert len(list(client.responses.input_items.list(third.id))) == 5


def test_a_saved_response_validates_against_the_sdk_types(start_server):
    server = start_server(["Noted.", "73."])
    client = server.client()
    _, second = remember_73(client)
    with server.http() as http:
        validate_response(http.get(f"/v1/responses/{second.id}").json())
        listed = http.get(f"/v1/responses/{second.id}/input_items").json()
    assert listed["object"] == "list" and listed["has_more"] is False
    for raw in listed["data"]:
        ITEM.validate_python(raw)
        assert raw["id"] and raw["status"] == "completed"


# -- what is and is not stored --------------------------------------------------------------------
def test_responses_are_not_stored_by_default(start_server):
    server = start_server(["a"])
    client = server.client()
    omitted = client.responses.create(model="m", input="hi")
    explicit = client.responses.create(model="m", input="hi", store=False)
    for response in (omitted, explicit):
        assert response.model_extra["store"] is False
        with pytest.raises(openai.NotFoundError):
            client.responses.retrieve(response.id)
    assert store_stats(server)["entries"] == 0


def test_store_false_can_continue_a_stored_response_without_saving(start_server):
    server = start_server(["Noted.", "73."])
    client = server.client()
    first = client.responses.create(model="m", input="Remember the value 73", store=True)
    second = client.responses.create(model="m", previous_response_id=first.id, input="Which?", store=False)
    assert "Remember the value 73" in server.engine.last_prompt_text
    assert second.output_text == "73."
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(second.id)
    assert client.responses.retrieve(first.id).id == first.id


def test_an_output_limited_response_is_stored_incomplete(start_server):
    server = start_server(["word " * 40])
    client = server.client()
    response = client.responses.create(model="m", input="hi", store=True, max_output_tokens=16)
    assert response.status == "incomplete"
    assert client.responses.retrieve(response.id).status == "incomplete"


def test_a_failed_generation_is_not_stored(start_server):
    server = start_server([{"text": "one two three four", "fail_after": 2}])
    with server.http() as http:
        result = read_stream(http, {"model": "m", "input": "hi", "store": True})
        assert result.final.status == "failed"
        assert http.get(f"/v1/responses/{result.final.id}").status_code == 404
    assert store_stats(server)["writes"] == 0


def test_a_disconnected_generation_is_not_stored(start_server):
    server = start_server(["tick " * 400], delay=0.01)
    with server.http() as http:
        with http.stream("POST", "/v1/responses", json={"model": "m", "input": "go", "stream": True,
                                                        "store": True}) as answer:
            lines = answer.iter_lines()  # keep a reference: a collected iterator closes the response
            frames = iter_frames(lines)
            response_id = json.loads(next(frames)[1])["response"]["id"]
            for _ in range(5):
                next(frames)
        assert wait_for(lambda: server.engine.cancelled == 1)
        assert http.get(f"/v1/responses/{response_id}").status_code == 404
    assert store_stats(server)["writes"] == 0


def test_saved_before_the_terminal_event(start_server):
    server = start_server(["one two three"])
    with server.http() as http:
        with http.stream("POST", "/v1/responses", json={"model": "m", "input": "hi", "stream": True,
                                                        "store": True}) as answer:
            for name, data in iter_frames(answer.iter_lines()):
                if name == "response.completed":
                    response_id = json.loads(data)["response"]["id"]
                    # the stream is still open: the terminal event was sent after the save
                    assert http.get(f"/v1/responses/{response_id}").json()["status"] == "completed"
                    break
            else:
                pytest.fail("no response.completed event")


# -- history rules --------------------------------------------------------------------------------
def test_tool_round_trip_with_previous_response_id(start_server):
    server = start_server([one_call("chatml"), "It is sunny in Paris."])
    client = server.client()
    first = client.responses.create(model="m", input="Weather in Paris?", tools=TOOLS, store=True)
    call = next(item for item in first.output if item.type == "function_call")
    assert json.loads(call.arguments) == PARIS
    second = client.responses.create(
        model="m", previous_response_id=first.id, tools=TOOLS, store=True,
        input=[{"type": "function_call_output", "call_id": call.call_id, "output": "sunny, 21C"}],
    )
    assert second.output_text == "It is sunny in Paris."
    prompt = server.engine.last_prompt_text
    assert prompt.index("Weather in Paris?") < prompt.rindex("<tool_call>") < prompt.index("sunny, 21C")
    kinds = [item.type for item in client.responses.input_items.list(second.id, order="asc")]
    assert kinds == ["message", "reasoning", "function_call", "function_call_output"]


def test_a_pending_call_needs_its_output(start_server):
    server = start_server([one_call("chatml"), "never"])
    client = server.client()
    first = client.responses.create(model="m", input="Weather in Paris?", tools=TOOLS, store=True)
    with server.http() as http:
        error = post_error(http, {"model": "m", "previous_response_id": first.id, "tools": TOOLS,
                                  "input": "and tomorrow?"})
    assert error["param"] == "input" and "No tool output found" in error["message"]
    assert server.engine.calls == 1


def test_instructions_are_not_inherited_but_system_messages_are(start_server):
    server = start_server(["ok"])
    client = server.client()
    first = client.responses.create(
        model="m", instructions="Be terse.", store=True,
        input=[{"role": "system", "content": "Speak French."}, {"role": "user", "content": "Hello"}],
    )
    client.responses.create(model="m", previous_response_id=first.id, input="Again")
    assert server.engine.last_prompt_text == chatml(
        ("system", "Speak French."), ("user", "Hello"), ("assistant", "ok"), ("user", "Again"))


def test_generation_settings_are_not_inherited(start_server):
    server = start_server(["ok"])
    client = server.client()
    first = client.responses.create(model="m", input="hi", store=True, temperature=0.2, max_output_tokens=32,
                                    metadata={"k": "v"})
    second = client.responses.create(model="m", previous_response_id=first.id, input="more", store=True)
    assert (second.temperature, second.max_output_tokens, second.metadata) == (1.0, None, {})
    assert server.engine.params[-1].temperature == 1.0


def test_a_duplicate_item_id_in_a_continuation_is_refused(start_server):
    server = start_server(["Noted.", "never"])
    client = server.client()
    first = client.responses.create(model="m", input="Remember 73", store=True)
    replayed = first.output[0].model_dump(exclude_none=True)
    with server.http() as http:
        error = post_error(http, {"model": "m", "previous_response_id": first.id, "store": True,
                                  "input": [replayed, {"role": "user", "content": "hi"}]})
    assert error["param"] == "input[0].id" and "Duplicate" in error["message"]
    assert server.engine.calls == 1


# -- input_items ---------------------------------------------------------------------------------
@pytest.fixture
def long_history(start_server):
    """A stored response whose input is 25 user messages (m0..m24); its output is not listed."""
    server = start_server(["answer"])
    client = server.client()
    history = [{"role": "user", "content": f"m{i}"} for i in range(25)]
    response = client.responses.create(model="m", input=history, store=True)
    return server, client, response


def texts(items) -> list[str]:
    return [item.content[0].text for item in items]


def test_input_items_default_order_is_newest_first_twenty_per_page(long_history):
    server, client, response = long_history
    page = client.responses.input_items.list(response.id)
    assert texts(page.data) == [f"m{i}" for i in range(24, 4, -1)]
    assert page.has_more is True
    assert texts(client.responses.input_items.list(response.id)) == [f"m{i}" for i in range(24, -1, -1)]


def test_input_items_pagination_is_stable(long_history):
    server, client, response = long_history
    first = client.responses.input_items.list(response.id, order="asc", limit=10)
    assert texts(first.data) == [f"m{i}" for i in range(10)] and first.has_more
    second = client.responses.input_items.list(response.id, order="asc", limit=10, after=first.data[-1].id)
    assert texts(second.data) == [f"m{i}" for i in range(10, 20)]
    again = client.responses.input_items.list(response.id, order="asc", limit=10, after=first.data[-1].id)
    assert [i.id for i in again.data] == [i.id for i in second.data]
    everything = list(client.responses.input_items.list(response.id, order="asc", limit=7))
    assert texts(everything) == [f"m{i}" for i in range(25)]
    assert len({item.id for item in everything}) == 25
    last = client.responses.input_items.list(response.id, order="asc", limit=100, after=everything[-1].id)
    assert last.data == [] and last.has_more is False


@pytest.mark.parametrize("query, param", [
    ("limit=0", "limit"), ("limit=101", "limit"), ("limit=ten", "limit"), ("order=newest", "order"),
    ("after=msg_unknown", "after"), ("include[]=message.input_image.image_url", "include"), ("page=2", "page"),
])
def test_input_items_bad_queries(long_history, query, param):
    server, _, response = long_history
    answer = server.http().get(f"/v1/responses/{response.id}/input_items?{query}")
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"]["param"] == param


def test_a_foreground_response_has_no_events_to_stream(long_history):
    server, _, response = long_history
    answer = server.http().get(f"/v1/responses/{response.id}?stream=true")
    assert answer.status_code == 409 and answer.json()["error"]["param"] == "stream"


@pytest.mark.parametrize("method, path, param", [
    ("GET", "/v1/responses/{id}?include[]=reasoning.encrypted_content", "include"),
    ("GET", "/v1/responses/{id}?starting_after=3", "starting_after"),
    ("GET", "/v1/responses/{id}?stream=yes", "stream"),
    ("DELETE", "/v1/responses/{id}?force=true", "force"),
    ("POST", "/v1/responses/{id}/cancel", None),
])
def test_resource_query_options_that_are_refused(long_history, method, path, param):
    server, client, response = long_history
    answer = server.http().request(method, path.format(id=response.id))
    assert answer.status_code == 400 and answer.json()["error"]["param"] == param
    assert client.responses.retrieve(response.id).id == response.id  # a refused DELETE deleted nothing


# -- 404s and isolation ----------------------------------------------------------------------------
def assert_gone_everywhere(server, response_id: str, **client_options) -> None:
    client = server.client(**client_options)
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(response_id)
    with pytest.raises(openai.NotFoundError):
        client.responses.input_items.list(response_id)
    with pytest.raises(openai.NotFoundError) as caught:
        client.responses.create(model="m", previous_response_id=response_id, input="hi")
    assert caught.value.body["param"] == "previous_response_id"
    with pytest.raises(openai.NotFoundError):
        client.responses.delete(response_id)


def test_unknown_ids_are_404_everywhere(start_server):
    server = start_server(["never"])
    assert_gone_everywhere(server, "resp_unknown")
    assert server.engine.calls == 0


def test_continuing_an_unstored_response_says_only_stored_ones_are_kept(start_server):
    """openai-agents with auto_previous_response_id and store omitted continues a response never stored."""
    server = start_server(["ok", "never"])
    client = server.client()
    unstored = client.responses.create(model="m", input="hi")  # store omitted: false
    with pytest.raises(openai.NotFoundError) as caught:
        client.responses.create(model="m", previous_response_id=unstored.id, input="more")
    assert caught.value.body["param"] == "previous_response_id"
    assert '"store": true' in caught.value.body["message"]
    assert server.engine.calls == 1


def test_deleted_ids_are_404_everywhere(start_server):
    server = start_server(["ok"])
    response = server.client().responses.create(model="m", input="hi", store=True)
    server.client().responses.delete(response.id)
    assert_gone_everywhere(server, response.id)


def test_expired_ids_are_404_everywhere(start_server):
    now = [100.0]
    server = start_server(["ok"], clock=lambda: now[0], environ={"MAYA_GLM_RESPONSES_CACHE_TTL_S": "60"})
    response = server.client().responses.create(model="m", input="hi", store=True)
    now[0] += 59
    server.client().responses.retrieve(response.id)
    now[0] += 1
    assert_gone_everywhere(server, response.id)
    assert store_stats(server)["expirations"] == 1


def test_evicted_ids_are_404_everywhere(start_server):
    server = start_server(["ok"], environ={"MAYA_GLM_RESPONSES_CACHE_ENTRIES": "2"})
    client = server.client()
    ids = [client.responses.create(model="m", input=f"hi {n}", store=True).id for n in range(3)]
    assert_gone_everywhere(server, ids[0])
    assert client.responses.retrieve(ids[2]).id == ids[2]


def test_records_are_isolated_by_api_key(start_server):
    server = start_server(["ok"], api_keys=("key-one", "key-two"))
    mine = server.client("key-one").responses.create(model="m", input="secret", store=True)
    assert_gone_everywhere(server, mine.id, api_key="key-two")
    same_key = server.http(headers={"x-api-key": "key-one"})  # the other header form of the same key
    assert same_key.get(f"/v1/responses/{mine.id}").json()["id"] == mine.id
    assert server.client("key-one").responses.retrieve(mine.id).id == mine.id


def test_without_keys_every_caller_shares_one_scope(start_server):
    server = start_server(["ok"])
    response = server.client(api_key="anything").responses.create(model="m", input="hi", store=True)
    assert server.client(api_key="something-else").responses.retrieve(response.id).id == response.id


# -- capacity --------------------------------------------------------------------------------------
def test_a_response_too_large_to_store_fails_and_is_not_stored(start_server):
    server = start_server(["z" * 4000], environ={"MAYA_GLM_RESPONSES_ENTRY_BYTES": "3000"})
    with server.http() as http:
        result = read_stream(http, {"model": "m", "input": "hi", "store": True})
        assert result.final.status == "failed"
        error = result.of("error")[0]
        assert error.code == "storage_capacity_exceeded"
        assert http.get(f"/v1/responses/{result.final.id}").status_code == 404
        unstored = read_stream(http, {"model": "m", "input": "hi", "store": False})
        assert unstored.final.status == "completed"


def test_an_input_too_large_to_store_is_refused_before_generation(start_server):
    server = start_server(["never"], environ={"MAYA_GLM_RESPONSES_ENTRY_BYTES": "3000"})
    with server.http() as http:
        error = post_error(http, {"model": "m", "input": "z" * 4000, "store": True}, status=413)
    assert error["code"] == "storage_capacity_exceeded"
    assert server.engine.calls == 0


def test_assembly_pressure_is_a_503_before_generation(start_server):
    server = start_server(["Noted.", "tick " * 200, "ok"], delay=0.01,
                          environ={"MAYA_GLM_RESPONSES_ASSEMBLY_BYTES": "3000"})
    client = server.client()
    first = client.responses.create(model="m", input="Remember 73 " + "z" * 1000, store=True)
    stats = store_stats(server)  # one expansion fits the budget, two do not (Redis adds its keys' overhead)
    assert 1500 < stats["bytes"] - (1200 if stats["backend"] == "redis" else 0) < 3000
    with server.http() as http:
        with http.stream("POST", "/v1/responses", json={"model": "m", "previous_response_id": first.id,
                                                        "input": "slow", "stream": True}) as slow:
            lines = slow.iter_lines()
            next(iter_frames(lines))  # the slow continuation holds its assembled history now
            busy = http.post("/v1/responses", json={"model": "m", "previous_response_id": first.id, "input": "x"})
            assert busy.status_code == 503, busy.text
            assert busy.json()["error"]["code"] == "assembly_capacity_exceeded"
            assert server.engine.calls == 2
    assert wait_for(lambda: store_stats(server)["assembly_bytes_in_flight"] == 0)
    assert client.responses.create(model="m", previous_response_id=first.id, input="now").output_text


# -- status and metrics -----------------------------------------------------------------------------
def test_status_and_metrics_after_a_scripted_sequence(start_server):
    server = start_server(["Noted.", "73."], api_keys=("sk-secret-key",))
    client = server.client()
    _, second = remember_73(client)  # 2 writes, 1 hit (continuation)
    client.responses.retrieve(second.id)  # 1 hit
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve("resp_nope")  # 1 miss
    with server.http(headers={"Authorization": "Bearer sk-secret-key"}) as http:
        cache = http.get("/v1/status").json()["responses"]["cache"]
        metrics = http.get("/metrics/prometheus").text
    assert (cache["entries"], cache["writes"], cache["hits"], cache["misses"]) == (2, 2, 2, 1)
    assert cache["limits"]["entries"] == 128 and cache["bytes"] > 0
    lines = prometheus_values(metrics, "maya:responses_cache_")
    assert lines["maya:responses_cache_entries"] == 2
    assert lines["maya:responses_cache_writes_total"] == 2
    assert lines["maya:responses_cache_hits_total"] == 2
    assert lines["maya:responses_cache_misses_total"] == 1
    assert lines["maya:responses_cache_bytes"] == cache["bytes"]
    assert lines["maya:responses_cache_write_seconds_count"] == 2
    assert lines["maya:responses_cache_assembly_bytes_in_flight"] == 0
    for secret in ("sk-secret-key", "Remember the value 73", second.id):
        assert secret not in metrics
