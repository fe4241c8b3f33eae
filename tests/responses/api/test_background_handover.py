"""Background tasks outlive their replica (`--store redis://…`): a replica killed, stopped past its lease or
shut down hands its tasks to another, which continues them from what was published: one gapless stream that
ends `response.completed`, whose output is the whole answer.

Real Maya processes (tests/maya_process.py) with the scripted engine, which continues an entry the prompt already
ends with the beginning of (a deterministic model: `engine/scripted.py`), on one real redis-server. Every replica
serving the task's model gets the same script, so the answer is the same whoever writes which part of it. Waits
poll with generous bounds; nothing asserts on timing.
"""

from __future__ import annotations

import json
import time

import pytest


from tests.responses.api.test_background_replicas import (  # noqa: F401 (fleet: the fixture)
    SETTLE_S, Reader, create, fleet, jobs_status, numbers, read, retrieve, running, status,
)
from tests.server import prometheus_values, wait_for

TEXT = " ".join(f"w{n}" for n in range(150))
"""150 tokens at 0.04 s a token: some 6 s, long enough to cut it in the middle."""
DELAY = 0.04
TAKER_DELAY = 0.005
"""A replica that only takes tasks over: how fast it writes the rest changes nothing a test checks (the stream is
whole and numbered whatever the pace), so it writes fast and the test is short."""
LEASE = ("--job-lease-s", "2")
OTHER_MODEL = ("--model-name", "another-model")
"""A replica serving another model: it never takes these tasks over."""


def answer_text(response: dict) -> str:
    return "".join(part["text"] for item in response["output"] if item["type"] == "message"
                   for part in item["content"])


def deltas_text(events: list[dict]) -> str:
    return "".join(event["delta"] for event in events if event["type"] == "response.output_text.delta")


def assert_whole(events: list[dict], text: str = TEXT, reserved: tuple[int, ...] = ()) -> None:
    """One stream from the start: numbered without gap or duplicate (but the numbers `reserved` for another
    reader's own error), ending completed, the whole answer."""
    assert sorted(numbers(events) + list(reserved)) == list(range(len(events) + len(reserved))), numbers(events)
    assert events[-1]["type"] == "response.completed", [e["type"] for e in events[-3:]]
    assert sum(e["type"] == "response.completed" for e in events) == 1
    assert deltas_text(events) == text
    assert answer_text(events[-1]["response"]) == text
    for kind in ("response.created", "response.queued", "response.in_progress"):
        assert sum(e["type"] == kind for e in events) == 1, kind


def completed_with_whole_answer(replica, response_id: str, text: str = TEXT) -> None:
    assert wait_for(lambda: status(replica, response_id) not in ("queued", "in_progress"), SETTLE_S)
    body = retrieve(replica, response_id).json()
    assert body["status"] == "completed", body
    assert answer_text(body) == text


def owner_of(replicas) -> list:
    return [replica for replica in replicas if replica.alive and jobs_status(replica)["running"]]


# -- kill -9 ---------------------------------------------------------------------------------
def test_kill_9_of_the_owner_mid_task_another_replica_resumes_and_a_reader_reconnecting_gets_one_stream(fleet):
    a = fleet.start([TEXT], *LEASE, delay=DELAY)
    b = fleet.start([TEXT], delay=TAKER_DELAY)
    job = create(a)
    on_a = Reader(a, job["id"])
    running(on_a, deltas=20)
    a.kill()
    on_a.join(SETTLE_S)  # its connection broke with A
    got = list(on_a.events)
    rest = read(b, job["id"], starting_after=got[-1]["sequence_number"])
    assert_whole(got + rest)
    completed_with_whole_answer(b, job["id"])
    assert read(b, job["id"]) == got + rest  # the record's log is that one stream
    figures = jobs_status(b)
    assert figures["resumed"] == 1 and figures["claimed"] == 1, figures
    assert figures["resume_seconds"]["count"] == 1
    with b.http() as http:  # the metrics say the same
        metrics = prometheus_values(http.get("/metrics/prometheus").text, "maya:responses_jobs_")
    assert metrics["maya:responses_jobs_resumed_total"] == 1 and metrics["maya:responses_jobs_claimed_total"] == 1
    assert metrics["maya:responses_jobs_resume_seconds_count"] == 1
    assert metrics["maya:responses_jobs_handed_over_total"] == 0
    # what the client is billed is the uncut answer's count, whoever wrote which part; the taker claimed the task,
    # it did not admit it again
    with b.http() as http:
        uncut = http.post("/v1/responses", json={"model": "m", "input": "Long request"}).json()["usage"]
    assert retrieve(b, job["id"]).json()["usage"]["output_tokens"] == uncut["output_tokens"]
    assert figures["admitted"] == 0, figures


def test_the_output_limit_of_a_resumed_task_counts_what_was_written_before_the_cut(fleet):
    """`max_output_tokens` 60, the owner killed after 20 or so: the taker writes only the rest, so the answer is
    `incomplete` at exactly 60 tokens and its text is the uncut answer's first 60 words."""
    a = fleet.start([TEXT], *LEASE, delay=DELAY)
    b = fleet.start([TEXT], delay=TAKER_DELAY)
    job = create(a, max_output_tokens=60)
    on_a = Reader(a, job["id"])
    running(on_a, deltas=20)
    a.kill()
    assert wait_for(lambda: status(b, job["id"]) not in ("queued", "in_progress"), SETTLE_S)
    final = retrieve(b, job["id"]).json()
    assert final["status"] == "incomplete" and final["incomplete_details"] == {"reason": "max_output_tokens"}
    assert final["usage"]["output_tokens"] == 60
    with b.http() as http:
        uncut = http.post("/v1/responses", json={"model": "m", "input": "Long request", "max_output_tokens": 60})
    assert answer_text(final) == answer_text(uncut.json())


def test_three_tasks_queued_on_a_replica_that_is_killed_all_complete_elsewhere(fleet):
    a = fleet.start([TEXT], *LEASE, delay=DELAY, environ={"MAYA_GLM_RESPONSES_JOB_WORKERS": "1"})
    b = fleet.start([TEXT], delay=TAKER_DELAY)
    busy = create(a)
    queued = [create(a) for _ in range(3)]
    running(Reader(b, busy["id"]), deltas=10)
    assert all(status(b, job["id"]) == "queued" for job in queued)
    a.kill()
    for job in [busy, *queued]:
        completed_with_whole_answer(b, job["id"])
        assert_whole(read(b, job["id"]))
    figures = jobs_status(b)
    assert figures["claimed"] == 4 and figures["resumed"] == 1, figures  # one was running, three never started


# -- SIGSTOP past the lease ------------------------------------------------------------------
def test_the_owner_stopped_past_its_lease_is_resumed_elsewhere_and_fenced_when_it_comes_back(fleet):
    a = fleet.start([TEXT], *LEASE, delay=DELAY)
    b = fleet.start([TEXT], delay=TAKER_DELAY)
    job = create(a)
    on_b = Reader(b, job["id"])
    running(on_b, deltas=20)
    a.pause()
    try:
        assert wait_for(lambda: jobs_status(b)["claimed"] == 1, SETTLE_S), jobs_status(b)
    finally:
        a.resume()
    events = on_b.ended()
    assert_whole(events)
    assert wait_for(lambda: jobs_status(a)["fenced"] >= 1, SETTLE_S), jobs_status(a)
    time.sleep(2)  # A's generation and heartbeat had time to try writing again
    for replica in (a, b):
        assert read(replica, job["id"]) == events  # nothing of A's after it lost the task
        completed_with_whole_answer(replica, job["id"])


# -- SIGTERM ---------------------------------------------------------------------------------
def test_sigterm_lets_the_running_task_finish_here_and_hands_the_queued_one_over(fleet):
    a = fleet.start([TEXT], delay=DELAY, environ={"MAYA_GLM_RESPONSES_JOB_WORKERS": "1"})
    b = fleet.start([TEXT], delay=TAKER_DELAY)
    runs, waits = create(a), create(a)
    on_runs, on_waits = Reader(b, runs["id"]), Reader(b, waits["id"])
    running(on_runs, deltas=10)
    a.terminate()
    assert a.wait(SETTLE_S) == 0, a.tail()  # within its grace: the running task finished on A
    for reader, job in ((on_runs, runs), (on_waits, waits)):
        assert_whole(reader.ended())
        completed_with_whole_answer(b, job["id"])
    figures = jobs_status(b)
    assert figures["claimed"] == 1 and figures["resumed"] == 0, figures  # B ran the queued one from its start
    assert figures["fleet"]["handed_over"] == 1, figures["fleet"]  # A handed the queued one over


def test_sigterm_with_no_grace_hands_the_running_task_over_and_it_completes_elsewhere(fleet):
    a = fleet.start([TEXT], "--job-shutdown-grace-s", "0", delay=DELAY)
    b = fleet.start([TEXT], delay=TAKER_DELAY)
    job = create(a)
    on_a, on_b = Reader(a, job["id"]), Reader(b, job["id"])
    running(on_b, deltas=20)
    a.terminate()
    assert a.wait(SETTLE_S) == 0, a.tail()
    cut = on_a.ended()  # A's reader got the shutdown's error and reconnects through B, after its last event
    assert cut[-1]["type"] == "error" and cut[-1]["code"] == "server_shutdown", cut[-3:]
    farewell = cut[-1]["sequence_number"]  # reserved for that reader: no other reader sees it
    rest = read(b, job["id"], starting_after=cut[-2]["sequence_number"])
    whole = on_b.ended()
    assert_whole(whole, reserved=(farewell,))
    assert cut[:-1] + rest == whole
    assert not any(e.get("code") == "response_cancelled" for e in whole)
    completed_with_whole_answer(b, job["id"])
    assert jobs_status(b)["resumed"] == 1


# -- who may take a task ---------------------------------------------------------------------
def test_a_replica_serving_another_model_never_takes_the_task_which_fails_after_the_claim_wait(fleet):
    a = fleet.start([TEXT], *LEASE, delay=DELAY)
    b = fleet.start([TEXT], *OTHER_MODEL, "--job-claim-wait-s", "2", delay=DELAY)
    job = create(a)
    on_b = Reader(b, job["id"])
    running(on_b, deltas=10)
    a.kill()
    events = on_b.ended()
    assert [e["type"] for e in events[-2:]] == ["error", "response.failed"], events[-3:]
    assert events[-2]["code"] == "background_owner_lost"
    assert numbers(events) == list(range(len(events)))
    figures = jobs_status(b)
    assert figures["claimed"] == 0 and figures["ended_unowned"] == {"background_owner_lost": 1}, figures
    final = retrieve(b, job["id"]).json()
    assert final["status"] == "failed"
    published = deltas_text(events)  # what the task had published is its answer, the open message closed incomplete
    assert len(published.split()) >= 10
    for response in (final, events[-1]["response"]):
        assert [(item["type"], item["status"]) for item in response["output"]] == [("message", "incomplete")]
        assert answer_text(response) == published


def test_a_task_taken_over_past_the_resume_limit_fails_with_its_code(fleet):
    replicas = [fleet.start([TEXT], *LEASE, delay=DELAY) for _ in range(5)]
    job = create(replicas[0])
    killed = 0
    while killed < 4:  # the owner, then each replica that resumed it: four owners, three resumptions
        owners = []
        assert wait_for(lambda: bool(owners.extend(owner_of(replicas)) or owners), SETTLE_S)
        assert deltas_text(read(owners[0], job["id"], limit=30))  # it is generating
        owners[0].kill()
        killed += 1
    watcher = next(replica for replica in replicas if replica.alive)
    assert wait_for(lambda: status(watcher, job["id"]) == "failed", SETTLE_S)
    events = read(watcher, job["id"])
    assert events[-2]["type"] == "error" and events[-2]["code"] == "background_resume_limit", events[-3:]
    assert numbers(events) == list(range(len(events)))


def test_a_rolling_deploy_that_meets_a_task_more_often_than_the_resume_limit_cancels_nothing(fleet):
    """Four graceful stops of the task's owner in turn (one more than `--job-resume-limit`): each hands the task
    over, which uses no resume, so it completes whole; only owners lost mid-task count."""
    replicas = [fleet.start([TEXT], *LEASE, "--job-shutdown-grace-s", "0", delay=DELAY) for _ in range(5)]
    job = create(replicas[0])
    for _ in range(4):
        owners = []
        assert wait_for(lambda: bool(owners.extend(owner_of(replicas)) or owners), SETTLE_S)
        assert deltas_text(read(owners[0], job["id"], limit=30))  # it is generating
        owners[0].terminate()
        assert owners[0].process.wait(SETTLE_S) == 0
    watcher = next(replica for replica in replicas if replica.alive)
    completed_with_whole_answer(watcher, job["id"])


# -- cancel and deadline across a hand-over --------------------------------------------------
def test_a_cancel_while_the_task_has_no_owner_cancels_it(fleet):
    a = fleet.start([TEXT], *LEASE, delay=DELAY)
    b = fleet.start([TEXT], *OTHER_MODEL, delay=DELAY)  # cannot take it: the task waits without an owner
    job = create(a)
    on_b = Reader(b, job["id"])
    running(on_b, deltas=10)
    a.kill()
    with b.http() as http:
        asked = http.post(f"/v1/responses/{job['id']}/cancel")
    assert asked.status_code == 200, asked.text
    events = on_b.ended()
    assert events[-1]["type"] == "error" and events[-1]["code"] == "response_cancelled", events[-3:]
    assert wait_for(lambda: status(b, job["id"]) == "cancelled", SETTLE_S)


def test_a_task_whose_deadline_passed_while_it_had_no_owner_is_not_resumed(fleet):
    environ = {"MAYA_GLM_RESPONSES_JOB_TIMEOUT_S": "3"}
    a = fleet.start([TEXT], *LEASE, delay=DELAY, environ=environ)
    b = fleet.start([TEXT], delay=DELAY, environ=environ)
    job = create(a)
    on_b = Reader(b, job["id"])
    running(on_b, deltas=5)
    a.kill()
    events = on_b.ended()
    assert [e["type"] for e in events[-2:]] == ["error", "response.failed"], events[-3:]
    assert events[-2]["code"] == "job_timeout"
    assert numbers(events) == list(range(len(events)))


# -- every family's syntax, cut anywhere -------------------------------------------------------
DSML = "｜DSML｜"
NOTE = " ".join(f"n{n}" for n in range(150))
"""A call's long string argument: 150 tokens, so that the owner can be killed while it streams."""
CALL_TOOLS = [{"type": "function", "name": "lookup", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}, "note": {"type": "string"}}}}]
CALL_ANSWERS = {
    "glm": ("\nI will look it up.\n</think>\nLet me check.\n<tool_call>lookup\n<arg_key>city</arg_key>"
            f"<arg_value>Paris</arg_value>\n<arg_key>note</arg_key><arg_value>{NOTE}</arg_value>\n</tool_call>"),
    "deepseek-v4": (f"I will look it up.</think>Let me check.\n\n<{DSML}tool_calls>\n<{DSML}invoke name=\"lookup\">\n"
                    f"<{DSML}parameter name=\"city\" string=\"true\">Paris</{DSML}parameter>\n"
                    f"<{DSML}parameter name=\"note\" string=\"true\">{NOTE}</{DSML}parameter>\n"
                    f"</{DSML}invoke>\n</{DSML}tool_calls>"),
    "deepseek-v4.1": (f"I will look it up.</think>Let me check.\n\n<{DSML} calls>\n<{DSML} invoke name=\"lookup\">\n"
                      f"<{DSML} parameter name=\"city\" string=\"true\">Paris</{DSML} parameter>\n"
                      f"<{DSML} parameter name=\"note\" string=\"true\">{NOTE}</{DSML} parameter>\n"
                      f"</{DSML} invoke>\n</{DSML} calls>"),
}
"""Reasoning, text and a call in each family's syntax, after a generation prompt that leaves the model thinking."""


def argument_deltas(events: list[dict]) -> str:
    return "".join(event["delta"] for event in events if event["type"] == "response.function_call_arguments.delta")


def in_call(reader: Reader, deltas: int) -> None:
    """The task streams its call's arguments: its reader has seen `deltas` of them."""
    def seen() -> int:
        return sum(event["type"] == "response.function_call_arguments.delta" for event in list(reader.events))
    assert wait_for(lambda: seen() >= deltas or not reader.is_alive(), SETTLE_S), reader.events[-3:]
    assert seen() >= deltas, f"the task did not reach its call: {reader.events[-3:]} {reader.failure!r}"


@pytest.mark.parametrize("family", [
    "glm", "deepseek-v4", "deepseek-v4.1",
])
def test_kill_9_of_the_owner_inside_a_tool_call_another_replica_writes_the_call_back_and_completes_it(fleet, family):
    answer, arguments = CALL_ANSWERS[family], json.dumps({"city": "Paris", "note": NOTE})
    a = fleet.start([answer], "--family", family, *LEASE, delay=DELAY)
    b = fleet.start([answer], "--family", family, delay=TAKER_DELAY)
    job = create(a, tools=CALL_TOOLS)
    on_b = Reader(b, job["id"])
    in_call(on_b, deltas=20)
    a.kill()
    events = on_b.ended()
    assert numbers(events) == list(range(len(events))), numbers(events)
    assert events[-1]["type"] == "response.completed", [e["type"] for e in events[-3:]]
    assert argument_deltas(events) == arguments  # nothing streamed twice or lost across the cut
    assert jobs_status(b)["resumed"] == 1
    output = retrieve(b, job["id"]).json()["output"]
    assert [item["type"] for item in output] == ["reasoning", "message", "function_call"], output
    assert output[0]["content"][0]["text"] == "I will look it up."
    assert answer_text({"output": output}) == "Let me check."
    assert output[2]["name"] == "lookup" and output[2]["arguments"] == arguments


def test_kill_9_mid_answer_of_a_glm_turn_with_empty_reasoning_resumes_the_answer_where_it_was_cut(fleet):
    words = " ".join(f"w{n}" for n in range(200))
    a = fleet.start(["</think>" + words], "--family", "glm", *LEASE, delay=DELAY)
    b = fleet.start(["</think>" + words], "--family", "glm", delay=TAKER_DELAY)
    job = create(a)
    on_b = Reader(b, job["id"])
    running(on_b, deltas=40)
    a.kill()
    assert_whole(on_b.ended(), text=words)
    completed_with_whole_answer(b, job["id"], text=words)
    assert jobs_status(b)["resumed"] == 1
