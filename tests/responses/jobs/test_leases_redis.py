"""A background task's lease on Redis, renewed by its replica's heartbeat alone: two replicas on one real
redis-server (in-process servers on loopback), a short `--job-lease-s`, and a task that writes nothing for
longer than two leases because it waits in its replica's queue behind a long task (one worker).

A flush renews the lease too, so a task that keeps writing never shows whether the heartbeat does; this one
writes nothing until a worker takes it, while the other replica's heartbeat fails every task whose lease
lapsed. It must not be failed, and must complete."""

from __future__ import annotations

import time

from tests.responses.api.test_background_shared import background, fleet, read, status

LEASE_S = 2.0
"""Short, so the test is short; long enough that a loaded box still renews it (a heartbeat every 0.5 s)."""
LONG = "tick " * 800
"""At least eight seconds of tokens at the fleet's scripted delay (0.01 s a token): four leases."""


def test_a_queued_task_renewed_only_by_the_heartbeat_outlives_two_leases_and_completes(start_server):
    env = {"MAYA_GLM_RESPONSES_JOB_WORKERS": "1"}  # the second task waits in A's queue, writing nothing
    a, b = fleet(start_server, [[LONG, "waited"], ["unused"]], job_lease_s=LEASE_S, environ=env)
    running = background(a)
    waiting = background(a)
    time.sleep(2.5 * LEASE_S)  # B's heartbeat looks for lapsed leases four times a lease meanwhile
    assert status(b, waiting.id) == "queued"  # still waiting, not failed by B: A's heartbeat renewed its lease
    events = read(b, waiting.id)  # bounded: the client's read timeout, and the suite's per-test timeout
    assert events[-1]["type"] == "response.completed", events[-3:]
    assert "".join(e["delta"] for e in events if e["type"] == "response.output_text.delta") == "waited"
    assert status(a, running.id) == "completed" and status(a, waiting.id) == "completed"
    assert b.on_loop(b.app.state.jobs.stats)["reaped"] == 0 and a.on_loop(a.app.state.jobs.stats)["fenced"] == 0
