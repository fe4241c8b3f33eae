"""What a 404 for an unknown response id says, on both stores: the id quoted but never whole when it is long (a
1 MB `previous_response_id` once came back as a 1 MB answer), and how each client that continues with
`previous_response_id` stores its turns (Maya's default `store` is false where OpenAI's is true)."""

from __future__ import annotations

import pytest

from maya_server.util.echoed import ECHOED_CHARS
from tests.responses.store_backends import over_backends

LONG_ID = "resp_" + "x" * 1_000_000
PATH_ID = "resp_" + "y" * 4000  # fits a request line


def error_of(answer, status: int = 404) -> dict:
    assert answer.status_code == status, answer.text[:500]
    assert len(answer.content) < 2000, len(answer.content)
    return answer.json()["error"]


@pytest.mark.parametrize("backend", ["memory", "redis"])
def test_an_unknown_long_id_is_quoted_cut_short_everywhere(start_server, backend):
    server = over_backends(start_server, backend)(["ok"])
    with server.http() as http:
        continued = {"model": "m", "input": "hi", "previous_response_id": LONG_ID}
        error = error_of(http.post("/v1/responses", json=continued))
        assert error["param"] == "previous_response_id" and error["code"] == "not_found"
        assert f"'{LONG_ID[:ECHOED_CHARS]}…'" in error["message"]
        for answer in (http.get(f"/v1/responses/{PATH_ID}"), http.get(f"/v1/responses/{PATH_ID}/input_items"),
                       http.delete(f"/v1/responses/{PATH_ID}")):
            assert f"'{PATH_ID[:ECHOED_CHARS]}…'" in error_of(answer)["message"]
        stored = http.post("/v1/responses", json={"model": "m", "input": "hi", "store": True}).json()
        error = error_of(http.get(f"/v1/responses/{stored['id']}/input_items", params={"after": PATH_ID}), 400)
        assert error["param"] == "after" and f"'{PATH_ID[:ECHOED_CHARS]}…'" in error["message"]
    assert server.engine.calls == 1


HUGE_CALL = {"type": "function_call", "call_id": "c" * 100_000, "name": "f", "arguments": "{}"}


@pytest.mark.parametrize("items", [
    [HUGE_CALL, HUGE_CALL],
    [HUGE_CALL, {"role": "user", "content": "hi"}],
    [{"type": "function_call_output", "call_id": "c" * 100_000, "output": "ok"}],
], ids=["duplicate call", "call without output", "output without call"])
def test_a_huge_call_id_gets_a_small_400_at_the_field(start_server, items):
    """A `call_id` is bounded at 64 characters, so a 100 kB one is refused where it stands, not quoted (a call
    without its output once came back as a 100 kB 400)."""
    server = start_server(["ok"])
    with server.http() as http:
        error = error_of(http.post("/v1/responses", json={"model": "m", "input": items}), 400)
    assert error["param"] == "input[0].call_id" and "64" in error["message"]
    assert server.engine.calls == 0


@pytest.mark.parametrize("backend", ["memory", "redis"])
def test_the_unknown_id_404_names_each_clients_fix_and_where_responses_are_kept(start_server, backend):
    server = over_backends(start_server, backend)(["ok"])
    with server.http() as http:
        first = http.post("/v1/responses", json={"model": "m", "input": "hi"}).json()  # store omitted: false
        error = error_of(http.post("/v1/responses", json={"model": "m", "input": "and?",
                                                         "previous_response_id": first["id"]}))
    message = error["message"]
    assert f"'{first['id']}'" in message  # a real id is quoted whole
    assert "ModelSettings(store=True)" in message and "ChatOpenAI(store=True)" in message, message
    if backend == "redis":
        assert "memory" not in message and "Redis" in message, message
    else:
        assert "in this server's memory" in message, message
