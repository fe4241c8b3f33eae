"""A write of a task's log that Redis fails for good (a script error: a bug in `APPEND`, not a refusal or a lost
connection, which are retried) ends the task at once, with what it had published.

Before, the flush loop died with the exception ("Task exception was never retrieved"): the writer never drained
while the heartbeat kept renewing the lease, so readers waited for the task's deadline. Now the writer stops, the
generation is cancelled, and the task ends through `REAP` under the fence its replica holds, with the `error`
event `background_log_failed` and `response.failed` whose output is what was published. A real redis-server on
loopback; the bug is a Lua error put in place of `APPEND` while the task runs."""

from __future__ import annotations

import time

from tests.responses.api.test_background_shared import background, fleet, read, status
from tests.server import wait_for

TEXT = "tick " * 2000
"""Twenty seconds of tokens at the fleet's scripted delay: the task must end long before it would."""
FAILING_APPEND = "error('a bug in APPEND')"


def test_a_script_error_in_append_ends_the_task_at_once_with_what_it_published(start_server):
    (a,) = fleet(start_server, [[TEXT]], job_lease_s=30.0)
    job = background(a)
    before = read(a, job.id, stop_after=40)
    jobs = a.app.state.jobs
    a.on_loop(lambda: jobs.logs.scripts.__setitem__("APPEND", jobs.link.script(FAILING_APPEND)))
    started = time.monotonic()
    assert wait_for(lambda: status(a, job.id) == "failed", 10.0)
    assert time.monotonic() - started < 10.0  # not the lease (30 s), not the deadline (300 s)
    events = read(a, job.id)
    assert [e["type"] for e in events[-2:]] == ["error", "response.failed"], events[-3:]
    assert events[-2]["code"] == "background_log_failed"
    published = "".join(e["delta"] for e in events if e["type"] == "response.output_text.delta")
    assert published.startswith("".join(e["delta"] for e in before if e["type"] == "response.output_text.delta"))
    final = a.client().responses.retrieve(job.id)
    assert final.status == "failed" and final.output[0].status == "incomplete"
    assert final.output[0].content[0].text == published
    assert wait_for(lambda: a.engine.cancelled == 1, 10.0)  # the generation stopped too
    stats = a.on_loop(jobs.stats)
    assert stats["fenced"] == 0  # not mistaken for a lease another replica ended
