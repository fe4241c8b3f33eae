"""Through HTTP, with the response store on a Redis that evicts under load: a key Redis evicted costs exactly the
responses that needed it, and nothing else.

Per response: Redis reports every key it evicts
(keyspace notifications, `__keyevent@0__:evicted`), the test records, right after each response is created,
the data keys it needs (its entry, its lineage, the blocks of its slice, its envelope: read from Redis, since the
layout may change), and afterwards each response is either whole (retrieve, input_items and a continuation all
exactly what was stored) or a 404 and one of its own keys was evicted after it was created. A response lost
without that is a key's loss spreading to another conversation (a bookkeeping key evicted, a shared block
deleted on a wrong refcount), and a 200 with other content than was stored is worse; the store must do neither.

Under `volatile-lru` Redis may evict only keys with a TTL: bookkeeping keys (refcounts, users sets, generations,
LRU and expiry indexes, figures) must never be among them. The counts are printed (`pytest -s`) and, where
`MAYA_EVICTION_COUNTS` names a file, appended to it as one JSON line per run (`bench/store_eviction_loop.py`
repeats the test and sums them). Skipped, saying why, where redis-server is not installed."""

from __future__ import annotations

import itertools
import json
import os
import threading
import time

import pytest

from tests.redis_server import RedisServer, command
from tests.responses.api.test_input_conversion import chatml
from tests.responses.store_backends import store_stats, unique_prefix

LOST = "stored_response_lost"
CONVERSATIONS, TURNS = 60, 3
BOOKKEEPING = ("rc:", "u:", "lru:")
"""Prefixes (after the store's prefix) of the per-owner and per-lineage bookkeeping keys."""
BOOKKEEPING_NAMES = ("g", "lru", "exp", "n", "ob", "oe")
"""The fleet's bookkeeping keys (after the store's prefix)."""
SYNC_TIMEOUT_S = 10.0


class EvictedKeys:
    """Every key Redis reports evicting, in the order it evicted them, read by a background thread.

    `sync()` returns how many evictions Redis had reported when it was called: it publishes a token on a channel
    the same connection listens to and waits (bounded) until the thread reads it back, so every eviction Redis
    made before the call has been read by then (a connection's messages arrive in order)."""

    PATTERN = "__keyevent@0__:evicted"

    def __init__(self, url: str) -> None:
        import redis

        command(url, "CONFIG", "SET", "notify-keyspace-events", "Ee")
        self.client = redis.Redis.from_url(url)
        self.channel = f"maya-test-sync-{os.getpid()}-{id(self)}"
        self.pubsub = self.client.pubsub()
        self.pubsub.psubscribe(self.PATTERN)
        self.pubsub.subscribe(self.channel)
        self.keys: list[bytes] = []
        self.seen = 0
        self.failure: BaseException | None = None
        self._tokens = itertools.count(1)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._read, name="evicted-keys", daemon=True)
        self._thread.start()

    def _read(self) -> None:
        try:
            while not self._stop.is_set():
                message = self.pubsub.get_message(timeout=0.2)
                if message is None:
                    continue
                if message["type"] == "pmessage":
                    self.keys.append(message["data"])
                elif message["type"] == "message":
                    self.seen = int(message["data"])
        except BaseException as error:  # noqa: BLE001 - reported by the next sync()
            self.failure = error

    def sync(self) -> int:
        token = next(self._tokens)
        deadline = time.monotonic() + SYNC_TIMEOUT_S
        while self.client.publish(self.channel, token) == 0:  # 0 receivers: the subscription is not active yet
            assert time.monotonic() < deadline, "the eviction listener never subscribed"
            time.sleep(0.05)
        while self.seen < token:
            assert self.failure is None, f"the eviction listener failed: {self.failure!r}"
            assert time.monotonic() < deadline, "the eviction listener did not read its token back in time"
            time.sleep(0.002)
        return len(self.keys)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self.pubsub.close()
        self.client.close()


def data_keys(client, prefix: str, response_id: str) -> set[bytes]:
    """The keys a stored response needs to be read, as Redis holds them now: its entry `e:RID`, its lineage
    `l:LID`, the blocks of the lineage's first `oe` slots and its envelope (`b:O:DIGEST`). Read from the entry
    hash, never assumed (lineage ids are the store's own). Where the entry is gone already, the entry key alone."""
    entry = f"{prefix}e:{response_id}"
    owner, lineage, end, envelope = client.hmget(entry, "o", "l", "oe", "env")
    keys = {entry.encode()}
    if owner is None:
        return keys
    o = owner.decode()
    if lineage is not None:
        lineage_key = f"{prefix}l:{lineage.decode()}"
        keys.add(lineage_key.encode())
        if end is not None and int(end) > 0:
            keys.update(f"{prefix}b:{o}:{dg.decode()}".encode() for dg in client.lrange(lineage_key, 0, int(end) - 1))
    if envelope is not None:
        keys.add(f"{prefix}b:{o}:{envelope.decode()}".encode())
    return keys


def is_bookkeeping(key: bytes, prefix: str) -> bool:
    name = key.decode(errors="replace")
    if not name.startswith(prefix):
        return False
    short = name[len(prefix):]
    return short in BOOKKEEPING_NAMES or short.startswith(BOOKKEEPING)


def _conversation_texts(c: int, turns: int) -> list[str]:
    return [f"conversation {c} turn {t} " + "lorem ipsum " * 680 for t in range(turns)]


def report(counts: dict) -> None:
    print(f"\nstore eviction load: {json.dumps(counts)}")
    path = os.environ.get("MAYA_EVICTION_COUNTS")
    if path:
        with open(path, "a") as out:
            out.write(json.dumps(counts) + "\n")


@pytest.mark.parametrize("policy", ["allkeys-lru", "volatile-lru"])
def test_an_evicted_key_costs_only_the_responses_that_needed_it(start_server, policy):
    """60 conversations of 3 turns of ~8 kB on a Redis of 3 MB that evicts (`policy`); the store's own entry bound
    out of the way, so only Redis removes anything. Every created response is then retrieved, listed and
    continued: each is whole, or a 404 (`not_found` or `stored_response_lost`) with one of its own data keys
    evicted after it was created. `lost_otherwise` (a 404 with none of its keys evicted) must be 0, a 200 must
    be exactly what was stored (`served_wrong`, counted and named apart: another conversation's content), and
    under `volatile-lru` no bookkeeping key may ever be evicted (they carry no TTL; only the data keys may).

    This is what a lost key may cost under each policy (docs/deployment.md, "What each eviction policy
    costs"); `bench/store_eviction_loop.py` repeats it and sums the counts."""
    redis = RedisServer()
    events = None
    try:
        command(redis.url, "CONFIG", "SET", "maxmemory-policy", policy)
        command(redis.url, "CONFIG", "SET", "maxmemory", "3mb")
        events = EvictedKeys(redis.url)
        prefix = unique_prefix()
        server = start_server([f"answer {n}" for n in range(CONVERSATIONS * TURNS)] + ["probe"] * 200,
                              store=redis.url, store_prefix=prefix, ctx=65536,
                              environ={"MAYA_GLM_RESPONSES_CACHE_ENTRIES": "100000"})
        created: dict[str, tuple[dict, list[str], list[tuple[str, str]]]] = {}
        needs: dict[str, tuple[int, set[bytes]]] = {}
        """response id → (evictions reported before it was created, the data keys it needs)."""
        reader = events.client
        with server.http() as http:
            for c in range(CONVERSATIONS):
                previous, turns = None, []
                for text in _conversation_texts(c, TURNS):
                    body = {"model": "m", "input": text, "store": True}
                    if previous:
                        body["previous_response_id"] = previous
                    before = events.sync()
                    answer = http.post("/v1/responses", json=body)
                    if answer.status_code == 404:  # its previous turn was evicted: the conversation can't go on
                        assert answer.json()["error"]["code"] in ("not_found", LOST)
                        break
                    assert answer.status_code == 200, answer.text
                    stored = answer.json()
                    needs[stored["id"]] = (before, data_keys(reader, prefix, stored["id"]))
                    turns += [("user", text), ("assistant", stored["output"][0]["content"][0]["text"])]
                    created[stored["id"]] = (stored, [t for _, t in turns[:-1]], list(turns))
                    previous = stored["id"]
            command(redis.url, "CONFIG", "SET", "maxmemory", "0")  # no more evictions: what is left stays
            events.sync()
            evicted = list(events.keys)
            maya_evictions = store_stats(server)["evictions"]

            counts = {"policy": policy, "created": len(created), "whole": 0, "lost_needed_evicted": 0,
                      "lost_otherwise": 0, "whole_needed_evicted": 0, "evicted_keys": len(evicted),
                      "redis_evicted_keys": int(command(redis.url, "INFO", "stats")["evicted_keys"]),
                      "bookkeeping_evicted": sorted({k.decode(errors="replace")[len(prefix):] for k in evicted
                                                     if is_bookkeeping(k, prefix)}),
                      "maya_evictions": maya_evictions, "served_wrong": 0}
            otherwise: list[str] = []
            wrong: list[str] = []
            owners = {stored["output"][0]["id"]: rid for rid, (stored, _, _) in created.items()}
            for rid, (stored, inputs, turns) in created.items():
                before, keys = needs[rid]
                needed_evicted = bool(keys & set(evicted[before:]))
                fetched = http.get(f"/v1/responses/{rid}")
                listed = http.get(f"/v1/responses/{rid}/input_items", params={"order": "asc", "limit": 100})
                continued = http.post("/v1/responses", json={"model": "m", "previous_response_id": rid,
                                                             "input": "probe question"})
                for answer in (fetched, listed, continued):
                    assert answer.status_code in (200, 404), answer.text
                    if answer.status_code == 404:
                        assert answer.json()["error"]["code"] in ("not_found", LOST), answer.text
                served = []  # what a 200 served other than what was stored: the worst outcome, counted apart
                if fetched.status_code == 200 and fetched.json() != stored:
                    output = [item.get("id") for item in fetched.json()["output"]]
                    served.append(f"retrieve: output {output} is {[owners.get(i, '?') for i in output]}'s")
                if listed.status_code == 200:
                    texts = [item["content"][0]["text"] for item in listed.json()["data"]]
                    if texts != inputs:
                        served.append(f"input_items: {[t[:24] for t in texts]}, stored {[t[:24] for t in inputs]}")
                if continued.status_code == 200:
                    if server.engine.last_prompt_text != chatml(*turns, ("user", "probe question")):
                        served.append("continue: another prompt")
                if served:
                    counts["served_wrong"] += 1
                    wrong.append(f"{rid} (needed evicted: {needed_evicted}): {'; '.join(served)}")
                    continue
                whole = (fetched.status_code, listed.status_code, continued.status_code) == (200, 200, 200)
                if whole:
                    counts["whole"] += 1
                    counts["whole_needed_evicted"] += needed_evicted
                elif needed_evicted:
                    counts["lost_needed_evicted"] += 1
                else:
                    counts["lost_otherwise"] += 1
                    otherwise.append(f"{rid} ({fetched.status_code}/{listed.status_code}/{continued.status_code})")
        counts["served_wrong_examples"] = wrong[:3]
        report(counts)
        assert not wrong, (counts, wrong[:5])
        assert counts["evicted_keys"] == counts["redis_evicted_keys"], counts  # the listener saw every eviction
        assert counts["lost_otherwise"] == 0, (counts, otherwise[:10])
        if policy == "volatile-lru":
            assert not counts["bookkeeping_evicted"], counts
        assert counts["whole"] > 0, counts
    finally:
        if events is not None:
            events.close()
        redis.stop()
