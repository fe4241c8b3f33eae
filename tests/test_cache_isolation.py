"""Over HTTP, with the official SDK: nothing one API key sends tells it what another key's requests cached.

The issue's probe: key B sends a history holding a guess at what another key's model said ("Secret password is
hunter2"). Were the spelling memory shared, the guess would be spelled with the ids key A's answer was generated
as, and B's `prompt_tokens` (and the memory's hit counter) would say the guess was right. Scoped per key, B's
prompt is the same before and after A's answer, and so are the counters B can read; the engine's prefix cache is
told the key's salt, so `cached_tokens` reuses nothing across keys either.
"""

from __future__ import annotations

import pytest

from tests.server import prometheus_values

PIECES = ["Sec", "ret", " pass", "word", " is", " hun", "ter", "2"]
ANSWER = "".join(PIECES)
HISTORY = [{"role": "user", "content": "what is it?"}, {"role": "assistant", "content": ANSWER},
           {"role": "user", "content": "thanks"}]


def probe(client):
    """Key B's probe: the history with the guess; its usage says how the prompt reached the engine."""
    return client.chat.completions.create(model="m", messages=HISTORY).usage


def counters(server, key: str) -> dict[str, float]:
    """What key `key` reads of the counters a cache hit or reuse would move."""
    page = server.http(headers={"Authorization": f"Bearer {key}"}).get("/metrics/prometheus").text
    values = prometheus_values(page, "maya:")
    return {name: values.get(name, 0.0) for name in
            ("maya:spelling_memory_hits_total", "maya:spelling_memory_misses_total", "maya:cached_prompt_tokens_total")}


def moved(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    return {name: after[name] - before[name] for name in before}


def test_another_keys_answer_changes_nothing_a_probing_key_sees(start_server):
    server = start_server(["Fine.", {"pieces": PIECES}, "Fine."], api_keys=("kA", "kB"))
    a, b = server.client(api_key="kA"), server.client(api_key="kB")
    start = counters(server, "kB")
    before = probe(b)
    first_probe = moved(start, counters(server, "kB"))

    answer = a.chat.completions.create(model="m", messages=[{"role": "user", "content": "what is it?"}])
    assert answer.choices[0].message.content == ANSWER
    settled = counters(server, "kB")
    after = probe(b)
    second_probe = moved(settled, counters(server, "kB"))

    assert before.prompt_tokens == 25 and after.prompt_tokens == 25  # the guess is tokenized again, not respelled
    assert after.prompt_tokens_details.cached_tokens == 0  # the engine's last prompt was A's: nothing reused
    assert second_probe == first_probe  # the probe moves the counters as it did when nobody had said it
    assert second_probe["maya:spelling_memory_hits_total"] == 0


def test_a_key_still_finds_its_own_answers(start_server):
    """Scoping is not switching off: the key whose model wrote the answer gets it spelled as generated."""
    server = start_server([{"pieces": PIECES}, "Fine."], api_keys=("kA", "kB"))
    a = server.client(api_key="kA")
    a.chat.completions.create(model="m", messages=[{"role": "user", "content": "what is it?"}])

    usage = probe(a)

    assert usage.prompt_tokens == 30  # the answer's eight generated pieces, not its tokenization
    assert counters(server, "kA")["maya:spelling_memory_hits_total"] == 1


def test_shared_caches_are_the_operators_choice(start_server):
    """`prompt_cache_isolation: shared` serves keys of one tenant: there the answer is found whoever sends it."""
    server = start_server(["Fine.", {"pieces": PIECES}, "Fine."], api_keys=("kA", "kB"),
                          prompt_cache_isolation="shared")
    b = server.client(api_key="kB")
    assert probe(b).prompt_tokens == 25
    a = server.client(api_key="kA")
    a.chat.completions.create(model="m", messages=[{"role": "user", "content": "what is it?"}])

    assert probe(b).prompt_tokens == 30


@pytest.mark.parametrize("api", ["chat", "responses"])
def test_each_key_reaches_the_engine_with_its_own_salt(start_server, api):
    server = start_server(["Fine."], api_keys=("kA", "kB"))
    for key in ("kA", "kB", "kA"):
        client = server.client(api_key=key)
        if api == "chat":
            client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
        else:
            client.responses.create(model="m", input="hi")

    salts = list(server.engine.salts)
    assert salts[0] == salts[2] != salts[1]
    assert all(salt and "kA" not in salt and "kB" not in salt for salt in salts)


def test_one_key_is_one_tenant_and_shares_its_caches(start_server):
    server = start_server(["Fine."], api_keys=("kA",))
    server.client(api_key="kA").chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])

    assert list(server.engine.salts) == [None]
