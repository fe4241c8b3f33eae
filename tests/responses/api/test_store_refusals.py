"""Redis answers but refuses: an ACL without a permission (NOPERM), a failed background save (MISCONF), a script
past `busy-reply-threshold` (BUSY), too few replicas for `min-replicas-to-write` (NOREPLICAS). Every request
that needs the store is a 503 `store_unavailable` whose message names the cause (never a 500, never a
traceback in the log), /v1/status says the store is not healthy and why, and once the refusal is lifted
everything works again, background tasks included (their heartbeat kept running).

Each test has a redis-server of its own (the refusals are Redis-wide) and a real Maya on loopback with the
scripted engine (`tests/server.py`)."""

from __future__ import annotations

import logging
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from tests.redis_server import RedisServer, command
from tests.responses.store_backends import unique_prefix
from tests.server import prometheus_values, wait_for

PASSWORD = "maya-test-password"
BOUND_S = 15.0


class Refusal:
    """How to make one Redis refuse, what the message says, and how to lift it."""

    name = ""
    named = ""

    def __init__(self, redis: RedisServer, directory: Path) -> None:
        self.redis = redis
        self.directory = directory
        self.url = redis.url

    def maya_url(self) -> str:
        return self.url

    def apply(self) -> None:
        raise NotImplementedError

    def lift(self) -> None:
        raise NotImplementedError

    def admin(self, *args):
        return command(self.redis.url, *args)


class NoReplicas(Refusal):
    name, named = "noreplicas", "min-replicas-to-write"

    def apply(self) -> None:
        self.admin("CONFIG", "SET", "min-replicas-to-write", "1")

    def lift(self) -> None:
        self.admin("CONFIG", "SET", "min-replicas-to-write", "0")


class Misconf(Refusal):
    """A background save that fails: Redis's directory removed under it (we run as root: permissions would not
    stop it), with a save point configured (without one Redis does not stop writes)."""

    name, named = "misconf", "cannot save to disk"

    def apply(self) -> None:
        self.admin("CONFIG", "SET", "save", "3600 1")
        shutil.rmtree(self.redis.directory)
        self.admin("BGSAVE")
        assert wait_for(lambda: self.admin("INFO", "persistence")["rdb_last_bgsave_status"] == "err", BOUND_S)

    def lift(self) -> None:
        self.admin("CONFIG", "SET", "stop-writes-on-bgsave-error", "no")


class Busy(Refusal):
    """A read-only Lua script that never ends, run by redis-cli on its own connection, past a 100 ms threshold."""

    name, named = "busy", "busy-reply-threshold"
    script: subprocess.Popen | None = None

    def apply(self) -> None:
        self.admin("CONFIG", "SET", "busy-reply-threshold", "100")
        self.script = subprocess.Popen(
            ["redis-cli", "-p", str(self.redis.port), "EVAL", "local n = 0 while true do n = n + 1 end", "0"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

        def busy() -> bool:
            try:
                self.admin("PING")
            except Exception as error:
                return str(error).startswith("BUSY")
            return False

        assert wait_for(busy, BOUND_S)

    def lift(self) -> None:
        self.admin("SCRIPT", "KILL")
        self.script.wait(timeout=BOUND_S)


ACL = ("on", f">{PASSWORD}", "resetkeys", "~maya:*", "resetchannels", "-@all", "+@read", "+@write", "+@scripting",
       "+@connection", "-@dangerous", "+config|get")
"""The least a Maya with the default prefix needs, as docs/deployment.md gives it."""


class NoPerm(Refusal):
    """Maya connects as an ACL user with only what it needs (`ACL`); the refusal takes EVALSHA (every store and
    task script) away from it."""

    name, named = "noperm", "ACL user"

    def __init__(self, redis: RedisServer, directory: Path) -> None:
        super().__init__(redis, directory)
        self.admin("ACL", "SETUSER", "maya", *ACL)

    def maya_url(self) -> str:
        return f"redis://maya:{PASSWORD}@127.0.0.1:{self.redis.port}/0"

    def apply(self) -> None:
        self.admin("ACL", "SETUSER", "maya", "-evalsha", "-eval")

    def lift(self) -> None:
        self.admin("ACL", "SETUSER", "maya", "+evalsha", "+eval")


REFUSALS = (NoReplicas, Misconf, Busy, NoPerm)


@pytest.fixture
def own_redis():
    directory = Path(tempfile.mkdtemp(prefix="maya-refusal-"))
    servers: list[RedisServer] = []

    def start() -> RedisServer:
        (directory / "redis").mkdir()
        servers.append(RedisServer(directory / "redis"))
        return servers[-1]

    yield start, directory
    for server in servers:
        server.kill()
    shutil.rmtree(directory, ignore_errors=True)


def redis_section(server) -> dict:
    with server.http() as http:
        return http.get("/v1/status").json()["responses"]["cache"]


def create(http, **fields):
    return http.post("/v1/responses", json={"model": "m", "input": fields.pop("input", "Hello"), "store": True,
                                           **fields})


def assert_refused(answer, refusal: Refusal) -> None:
    assert answer.status_code == 503, answer.text
    error = answer.json()["error"]
    assert error["code"] == "store_unavailable" and error["type"] == "server_error"
    assert refusal.named in error["message"] and refusal.name.upper() in error["message"], error["message"]


@pytest.mark.parametrize("kind", REFUSALS, ids=lambda kind: kind.name)
def test_a_refusing_redis_is_a_named_503_everywhere_then_everything_works_again(start_server, own_redis, kind,
                                                                                 caplog):
    start, directory = own_redis
    refusal = kind(start(), directory)
    server = start_server(["First answer."] + ["ok"] * 20, store=refusal.maya_url())  # the default prefix, maya:
    caplog.set_level(logging.WARNING)
    with server.http() as http:
        first = create(http, input="Remember the value 73").json()
        assert first["status"] == "completed"
        refusal.apply()
        try:
            assert wait_for(lambda: redis_section(server)["redis"]["refusal"] == refusal.name, BOUND_S), \
                redis_section(server)
            cache = redis_section(server)
            assert cache["healthy"] is False
            with server.http() as scrape:
                metrics = prometheus_values(scrape.get("/metrics/prometheus").text, "maya:responses_cache_")
            assert metrics[f'maya:responses_cache_redis_refusing{{reason="{refusal.name}"}}'] == 1
            assert_refused(create(http), refusal)
            assert_refused(create(http, previous_response_id=first["id"], input="What value?"), refusal)
            assert_refused(create(http, background=True), refusal)
            for path in (f"/v1/responses/{first['id']}", f"/v1/responses/{first['id']}/input_items"):
                read = http.get(path)
                if read.status_code != 200:  # a read that needs no write may still get through
                    assert_refused(read, refusal)
        finally:
            refusal.lift()
        assert wait_for(lambda: redis_section(server)["healthy"], BOUND_S), redis_section(server)
        assert redis_section(server)["redis"]["refusal"] is None and redis_section(server)["redis"]["warnings"] == []
        again = create(http, previous_response_id=first["id"], input="What value?")
        assert again.status_code == 200 and again.json()["status"] == "completed", again.text
        assert http.get(f"/v1/responses/{first['id']}").json()["output"] == first["output"]
        assert len(http.get(f"/v1/responses/{again.json()['id']}/input_items").json()["data"]) == 3
        task = create(http, background=True, input="Later")
        assert task.status_code == 200, task.text

        def finished() -> bool:
            return http.get(f"/v1/responses/{task.json()['id']}").json()["status"] == "completed"

        assert wait_for(finished, BOUND_S)
    problems = [record for record in caplog.records
                if record.exc_info or "Traceback" in record.getMessage() or "unhandled" in record.getMessage()]
    assert problems == [], [record.getMessage() for record in problems]
    assert caplog.text.count(f"refuses commands: {refusal.name.upper()}") == 1  # logged once, not per request
    assert "accepts writes again" in caplog.text
    assert "Remember the value" not in caplog.text


def test_tasks_that_cannot_be_saved_or_started_while_redis_refuses_fail_naming_the_refusal(start_server, own_redis):
    """One worker: the second task waits while the first generates; then Redis refuses writes. The first's save
    is refused, and the second's start cannot be recorded within its lease: both fail with the named
    `store_unavailable` (their terminal state written once Redis takes writes again); a task created after
    completes."""
    start, directory = own_redis
    refusal = NoReplicas(start(), directory)
    server = start_server(["tick " * 100, "later"], delay=0.01, store=refusal.maya_url(), store_prefix=unique_prefix(),
                          job_lease_s=1.0, environ={"MAYA_GLM_RESPONSES_JOB_WORKERS": "1"})
    jobs = server.app.state.jobs
    with server.http() as http:
        first = create(http, background=True, input="Long").json()
        second = create(http, background=True, input="Short").json()
        assert wait_for(lambda: http.get(f"/v1/responses/{first['id']}").json()["status"] == "in_progress", BOUND_S)
        refusal.apply()
        try:
            assert wait_for(lambda: server.on_loop(lambda: jobs.counters.finished.get("failed", 0)) == 2, BOUND_S)
        finally:
            refusal.lift()

        def state(response_id: str) -> dict:
            return http.get(f"/v1/responses/{response_id}").json()

        for task in (first, second):
            assert wait_for(lambda: state(task["id"])["status"] == "failed", BOUND_S), state(task["id"])
            assert "min-replicas-to-write" in state(task["id"])["error"]["message"]
            events = http.get(f"/v1/responses/{task['id']}?stream=true").text
            assert '"code":"store_unavailable"' in events.replace(" ", "") and "NOREPLICAS" in events
        third = create(http, background=True, input="After").json()
        assert wait_for(lambda: state(third["id"])["status"] == "completed", BOUND_S), state(third["id"])


def test_an_error_redis_does_not_name_as_a_refusal_stays_a_500_and_the_log_holds_no_prompt(start_server, own_redis,
                                                                                             caplog):
    """A key of the wrong type under Maya's prefix (WRONGTYPE inside the store's script): a bug, so a 500; its
    traceback is logged, without the request's text."""
    start, directory = own_redis
    redis = start()
    prefix = unique_prefix()
    server = start_server(["ok"], store=redis.url, store_prefix=prefix)
    command(redis.url, "SET", prefix + "n", "not a hash")
    caplog.set_level(logging.WARNING)
    with server.http() as http:
        answer = create(http, input="the secret prompt 7f3a")
    assert answer.status_code == 500 and answer.json()["error"]["type"] == "server_error"
    assert "unhandled error: ResponseError" in caplog.text
    assert "7f3a" not in caplog.text and "7f3a" not in answer.text
