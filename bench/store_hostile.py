"""Redis keeping less than Maya thinks, as a hostile operator makes it: issue 44's findings re-run end to end.

Real Maya processes (scripted engine, `python -m maya_server` run from `--maya-src`, default this checkout) on a
real redis-server (loopback, a throwaway directory), talked to over HTTP with no client retries, so every status
is what Maya answered:

  eviction  `maxmemory 3mb` + `allkeys-lru`, 60 conversations x 3 turns x 8 kB through two replicas; then every
            response retrieved, listed and continued (stored, so that its input items show what the model was
            given): a 200 with less than was stored, a 404, a 5xx, a cut answer; the entries Maya counts against
            the entry keys Redis holds (after two probe intervals).
  flush     two replicas without a secret file; FLUSHALL, then a third replica; then Redis restarted empty and one
            replica restarted: responses stored afterwards read across replicas (404s counted).
  refusals  NOREPLICAS, MISCONF, BUSY, NOPERM: store:true, retrieve, input_items, continue and background create,
            each answer's status and code; tracebacks in the replicas' logs.
  full      `noeviction` at `maxmemory`: intact responses retrieved, listed, continued; then new store:true turns
            (does Maya free room by itself?).

    .venv/bin/python bench/store_hostile.py [--maya-src DIR] [--only eviction,flush,refusals,full]

Figures, not pass/fail: run it on two trees (before and after a change) and compare.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import string
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.maya_process import free_port  # noqa: E402
from tests.redis_server import RedisServer, command  # noqa: E402

PROBE_WAIT_S = 5.0
"""Two probe intervals (2 s each) and a margin."""


class Replica:
    """One Maya process; its stderr goes to a file so tracebacks can be counted."""

    def __init__(self, src: Path, work: Path, name: str, url: str, prefix: str, *extra: str,
                 environ: dict | None = None) -> None:
        self.log_path = work / f"maya-{name}.log"
        script = work / f"script-{name}.json"
        script.write_text(json.dumps(["Noted. " + "a" * 200] * 50))
        port = free_port()
        argv = [sys.executable, "-m", "maya_server", "--engine", "scripted", "--family", "chatml", "--script",
                str(script), "--script-delay", "0", "--ctx", "131072", "--store", url, "--store-prefix", prefix, "--port", str(port),
                *extra]
        self.log = self.log_path.open("w")
        self.process = subprocess.Popen(argv, cwd=src, stdout=subprocess.DEVNULL, stderr=self.log,
                                        stdin=subprocess.DEVNULL, env={**os.environ, **(environ or {})})
        self.url = f"http://127.0.0.1:{port}"
        self.http = httpx.Client(base_url=self.url, timeout=30)
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"maya {name} exited: {self.log_path.read_text()[-2000:]}")
            try:
                if self.http.get("/health").status_code == 200:
                    return
            except httpx.TransportError:
                time.sleep(0.2)
        raise RuntimeError(f"maya {name} did not start")

    def create(self, **body) -> httpx.Response | None:
        return self.call("POST", "/v1/responses", json={"model": "m", **body})

    def get(self, path: str, **params) -> httpx.Response | None:
        return self.call("GET", path, params=params)

    def call(self, method: str, path: str, **options) -> httpx.Response | None:
        """The answer, or None where the connection broke (a cut answer is a finding too)."""
        try:
            return self.http.request(method, path, **options)
        except httpx.TransportError:
            return None

    def tracebacks(self) -> int:
        return self.log_path.read_text(errors="replace").count("Traceback")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=30)
        self.log.close()
        self.http.close()


def redis_in(work: Path, name: str) -> RedisServer:
    directory = work / f"redis-{name}"
    directory.mkdir()
    return RedisServer(directory)


def text(size: int) -> str:
    return "".join(random.choices(string.ascii_letters + " ", k=size))


def outcome(answer: httpx.Response | None) -> str:
    """'200', '404 code', '503 code', '500 code', 'cut' (the connection broke)."""
    if answer is None:
        return "cut"
    if answer.status_code == 200:
        try:
            failed = answer.json().get("status") == "failed"
        except ValueError:
            failed = False
        return "200 status:failed" if failed else "200"
    try:
        code = answer.json()["error"]["code"]
    except Exception:
        code = "?"
    return f"{answer.status_code} {code}"


def entry_keys(url: str, prefix: str) -> int:
    return len(command(url, "KEYS", prefix + "e:*"))


# -- eviction ------------------------------------------------------------------------------------------------------
def eviction(src: Path, work: Path) -> dict:
    redis = redis_in(work, "eviction")
    prefix = "maya:"
    replicas: list[Replica] = []
    try:
        command(redis.url, "CONFIG", "SET", "maxmemory", "3mb")
        command(redis.url, "CONFIG", "SET", "maxmemory-policy", "allkeys-lru")
        roomy = {"MAYA_GLM_RESPONSES_CACHE_ENTRIES": "100000"}  # Redis, not Maya's own bound, must be what evicts
        replicas = [Replica(src, work, n, redis.url, prefix, environ=roomy) for n in ("ev-a", "ev-b")]
        stored: list[dict] = []  # id, turn, output, input_tokens
        creation = Counter()
        for conversation in range(60):
            previous = None
            for turn in range(1, 4):
                body = {"input": f"c{conversation} t{turn} " + text(8000), "store": True}
                if previous:
                    body["previous_response_id"] = previous
                answer = replicas[turn % 2].create(**body)
                creation[outcome(answer)] += 1
                if answer.status_code != 200:
                    break
                got = answer.json()
                stored.append({"id": got["id"], "turn": turn, "output": got["output"],
                               "input_tokens": got["usage"]["input_tokens"]})
                previous = got["id"]
        evicted = int(info(redis.url, "stats")["evicted_keys"])
        reads = {"retrieve": Counter(), "input_items": Counter(), "continue": Counter()}
        for n, entry in enumerate(stored):
            reader = replicas[n % 2]
            got = reader.get(f"/v1/responses/{entry['id']}")
            kind = outcome(got)
            if kind == "200" and got.json()["output"] != entry["output"]:
                kind = "200 SHORTER"
            reads["retrieve"][kind] += 1
            got = reader.get(f"/v1/responses/{entry['id']}/input_items", limit=100)
            kind = outcome(got)
            if kind == "200" and len(got.json()["data"]) != 2 * entry["turn"] - 1:
                kind = "200 SHORTER"
            reads["input_items"][kind] += 1
            got = reader.create(previous_response_id=entry["id"], input="And then?", store=True)
            kind = outcome(got)
            if kind == "200":  # what the model was given is what the continuation stored as its input
                given = reader.get(f"/v1/responses/{got.json()['id']}/input_items", limit=100)
                if given is None or given.status_code != 200:
                    kind = "200 (its input could not be listed)"
                elif len(given.json()["data"]) != 2 * entry["turn"] + 1:
                    kind = "200 SHORTER"
            reads["continue"][kind] += 1
        time.sleep(PROBE_WAIT_S)
        counted = replicas[0].http.get("/v1/status").json()["responses"]["cache"]["entries"]
        return {"created": dict(creation), "evicted_keys": evicted,
                **{name: dict(counts) for name, counts in reads.items()},
                "entries_counted": counted, "entry_keys": entry_keys(redis.url, prefix),
                "tracebacks": sum(r.tracebacks() for r in replicas)}
    finally:
        for replica in replicas:
            replica.stop()
        redis.stop()


def info(url: str, section: str) -> dict:
    raw = command(url, "INFO", section)
    if isinstance(raw, dict):
        return raw
    text_ = raw.decode() if isinstance(raw, bytes) else str(raw)
    return dict(line.split(":", 1) for line in text_.splitlines() if ":" in line)


# -- flush ---------------------------------------------------------------------------------------------------------
def cross_reads(replicas: dict[str, Replica]) -> dict:
    """Each replica stores one response; every other replica reads it (after two probe intervals)."""
    ids = {name: r.create(input="remember " + name, store=True).json().get("id") for name, r in replicas.items()}
    time.sleep(PROBE_WAIT_S)
    counts = Counter()
    for writer, rid in ids.items():
        for reader, replica in replicas.items():
            if reader != writer:
                counts[outcome(replica.get(f"/v1/responses/{rid}"))] += 1
    return dict(counts)


def flush(src: Path, work: Path) -> dict:
    redis = redis_in(work, "flush")
    prefix = "maya:"
    live: dict[str, Replica] = {}
    try:
        live = {n: Replica(src, work, n, redis.url, prefix) for n in ("fl-a", "fl-b")}
        before = cross_reads(live)
        command(redis.url, "FLUSHALL")
        live["fl-c"] = Replica(src, work, "fl-c", redis.url, prefix)
        after_flush = cross_reads(live)
        redis.kill()
        redis.start()  # empty: no persistence
        live.pop("fl-b").stop()
        live["fl-b2"] = Replica(src, work, "fl-b2", redis.url, prefix)
        after_restart = cross_reads(live)
        return {"before": before, "after FLUSHALL + new replica": after_flush,
                "after empty restart + one replica restarted": after_restart}
    finally:
        for replica in live.values():
            replica.stop()
        redis.stop()


# -- refusals ------------------------------------------------------------------------------------------------------
def five_calls(replica: Replica, stored: str) -> dict:
    return {
        "store": outcome(replica.create(input="hello", store=True)),
        "retrieve": outcome(replica.get(f"/v1/responses/{stored}")),
        "input_items": outcome(replica.get(f"/v1/responses/{stored}/input_items")),
        "continue": outcome(replica.create(previous_response_id=stored, input="more", store=False)),
        "background": outcome(replica.create(input="task", background=True, store=True)),
    }


def refusals(src: Path, work: Path) -> dict:
    results = {}
    for name, make, lift in (("NOREPLICAS", _noreplicas, _lift_noreplicas), ("MISCONF", _misconf, _lift_misconf),
                             ("BUSY", _busy, _lift_busy), ("NOPERM", _noperm, _lift_noperm)):
        redis = redis_in(work, name.lower())
        replica = None
        try:
            replica = Replica(src, work, name.lower(), redis.url, "maya:")
            stored = replica.create(input="kept", store=True).json()["id"]
            state = make(redis, work)
            try:
                calls = five_calls(replica, stored)
            finally:
                lift(redis, state)
            time.sleep(PROBE_WAIT_S / 2)
            results[name] = {**calls, "after": outcome(replica.create(input="again", store=True)),
                             "tracebacks": replica.tracebacks()}
        finally:
            if replica is not None:
                replica.stop()
            redis.stop()
    return results


def _noreplicas(redis: RedisServer, work: Path):
    command(redis.url, "CONFIG", "SET", "min-replicas-to-write", "1")


def _lift_noreplicas(redis: RedisServer, state) -> None:
    command(redis.url, "CONFIG", "SET", "min-replicas-to-write", "0")


def _misconf(redis: RedisServer, work: Path):
    command(redis.url, "CONFIG", "SET", "save", "3600 1")
    shutil.rmtree(redis.directory)  # its working directory: a save cannot create its file (root ignores modes)
    command(redis.url, "BGSAVE")
    deadline = time.monotonic() + 10
    while info(redis.url, "persistence").get("rdb_last_bgsave_status") != "err" and time.monotonic() < deadline:
        time.sleep(0.1)


def _lift_misconf(redis: RedisServer, state) -> None:
    command(redis.url, "CONFIG", "SET", "stop-writes-on-bgsave-error", "no")
    command(redis.url, "CONFIG", "SET", "save", "")


def _busy(redis: RedisServer, work: Path):
    command(redis.url, "CONFIG", "SET", "busy-reply-threshold", "100")
    spin = "local t = redis.call('TIME'); local s = tonumber(t[1]); while tonumber(redis.call('TIME')[1]) < s + 8 do end"
    thread = threading.Thread(target=lambda: _quietly(command, redis.url, "EVAL", spin, "0"), daemon=True)
    thread.start()
    time.sleep(0.5)
    return thread


def _lift_busy(redis: RedisServer, thread) -> None:
    _quietly(command, redis.url, "SCRIPT", "KILL")  # read-only, so it can be killed; else it ends by itself
    thread.join(15)
    command(redis.url, "CONFIG", "SET", "busy-reply-threshold", "5000")


def _noperm(redis: RedisServer, work: Path):
    command(redis.url, "ACL", "SETUSER", "admin", "on", "nopass", "~*", "&*", "+@all")
    command(redis.url, "ACL", "SETUSER", "default", "resetkeys", "~elsewhere:*")


def _lift_noperm(redis: RedisServer, state) -> None:
    import redis as redis_py

    admin = redis_py.Redis(host="127.0.0.1", port=redis.port, username="admin", password="")
    try:
        admin.execute_command("ACL", "SETUSER", "default", "~*")
    finally:
        admin.close()


def _quietly(call, *args) -> None:
    try:
        call(*args)
    except Exception:
        pass


# -- full ----------------------------------------------------------------------------------------------------------
def full(src: Path, work: Path) -> dict:
    redis = redis_in(work, "full")
    replica = None
    try:
        command(redis.url, "CONFIG", "SET", "maxmemory-policy", "noeviction")
        replica = Replica(src, work, "full", redis.url, "maya:")
        stored = [replica.create(input=text(8000), store=True).json()["id"] for _ in range(100)]
        used = int(info(redis.url, "memory")["used_memory"])
        command(redis.url, "CONFIG", "SET", "maxmemory", str(used))
        reads = Counter()
        for rid in stored:
            reads["retrieve " + outcome(replica.get(f"/v1/responses/{rid}"))] += 1
            reads["input_items " + outcome(replica.get(f"/v1/responses/{rid}/input_items"))] += 1
            reads["continue " + outcome(replica.create(previous_response_id=rid, input="x", store=False))] += 1
        writes = Counter(outcome(replica.create(input=text(8000), store=True)) for _ in range(10))
        return {"reads of 100 intact": dict(reads), "10 new store:true turns": dict(writes),
                "tracebacks": replica.tracebacks()}
    finally:
        if replica is not None:
            replica.stop()
        redis.stop()


SCENARIOS = {"eviction": eviction, "flush": flush, "refusals": refusals, "full": full}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--maya-src", type=Path, default=ROOT, help="run Maya from this checkout")
    parser.add_argument("--only", default=",".join(SCENARIOS), help="comma-separated scenarios")
    options = parser.parse_args()
    random.seed(44)
    work = Path(tempfile.mkdtemp(prefix="maya-hostile-"))
    try:
        for name in options.only.split(","):
            started = time.monotonic()
            result = SCENARIOS[name](options.maya_src.resolve(), work)
            print(f"== {name} ({time.monotonic() - started:.0f} s)")
            print(json.dumps(result, indent=2))
            sys.stdout.flush()
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
