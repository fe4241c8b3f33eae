"""Taking a task over on a real Redis (`CLAIM`, `HAND_OVER` in `jobs/redis_lua.py`), below HTTP: a lapsed task is
claimed once, by a replica serving its model and family, under a new fence that shuts its late owner out; a task
that must not be taken says why (its deadline, the resume limit, a cancel, the claim wait); an owner that hands a
task over writes its last events and lets its lease go at once.

The record comes from `ADMIT` as `test_event_log_redis.admit` writes it: model `model`, family `chatml`, admitted
at 1000 with its lease until 1060 and its deadline at 1600."""

from __future__ import annotations

import orjson

from maya_server.responses.jobs.event_log_redis import RedisJobLog, RedisLogReader, unnumbered
from maya_server.responses.jobs.handover import packed_images, unpacked_images

from tests.responses.jobs.test_event_log_redis import admit, collect, delta, held, on_a_loop, open_logs, close, within

LAPSED = 1061.0
SERVES = ("model", "chatml")


async def claim(logs, job_id: str, fence: int, now: float = LAPSED, serves=SERVES, limit: int = 3,
                wait: float = 30.0) -> list:
    return await logs.scripts["CLAIM"]([logs.link.prefix, job_id, fence, now, *serves, limit, wait, "replica-b",
                                        now + 60])


def outcome(answer: list) -> list[str]:
    return [part.decode() if isinstance(part, bytes) else part for part in answer[:2]]


@on_a_loop
async def test_a_lapsed_task_is_claimed_once_under_a_new_fence_that_refuses_its_late_owner():
    logs = await open_logs()
    writer = await admit(logs, "resp_c1")
    assert outcome(await claim(logs, "resp_c1", writer.fence, now=1059.0)) == ["changed"]  # the lease still runs
    answer = await claim(logs, "resp_c1", writer.fence)
    assert answer[0] == b"claimed" and int(answer[1]) > writer.fence
    assert answer[2] == b"queued" and answer[3] == b"{}" and int(answer[10]) == 0  # state, request, resumes:
    # a task that never started lost nothing with its owner, so taking it over counts no resume
    assert float(answer[13]) == 1060.0  # free since its lease's end
    assert outcome(await claim(logs, "resp_c1", writer.fence)) == ["changed"]  # the race is won once
    record = (await held(logs, "resp_c1"))[0]
    assert record[b"r"] == b"replica-b" and int(record[b"rs"]) == 0 and float(record[b"lu"]) == LAPSED + 60
    writer.append(delta(1))  # the late owner's next write is refused: it stops, writing nothing
    await within(writer.drained(), "the late owner was not refused")
    assert writer.fenced
    await close(logs)


@on_a_loop
async def test_another_model_or_family_leaves_the_task_until_the_claim_wait_is_over():
    logs = await open_logs()
    writer = await admit(logs, "resp_c2")
    for serves in (("other-model", "chatml"), ("model", "glm")):
        assert outcome(await claim(logs, "resp_c2", writer.fence, serves=serves)) == ["other"]
    before = await held(logs, "resp_c2")
    assert outcome(await claim(logs, "resp_c2", writer.fence, serves=("other-model", "chatml"), now=1060 + 31)) \
        == ["end", "background_owner_lost"]  # past the wait: nobody took it; the caller ends it
    assert await held(logs, "resp_c2") == before  # answering changed nothing
    await close(logs)


@on_a_loop
async def test_what_ends_a_task_instead_of_a_claim():
    logs = await open_logs()
    writer = await admit(logs, "resp_c3")
    writer.mark("in_progress")
    await within(writer.confirmed(), "in_progress was not written")
    assert outcome(await claim(logs, "resp_c3", writer.fence, now=1601.0, wait=1000)) == ["end", "job_timeout"]
    assert outcome(await claim(logs, "resp_c3", writer.fence, limit=0)) == ["end", "background_resume_limit"]
    await logs.scripts["CANCEL"]([logs.link.prefix, "resp_c3", "owner"])
    assert outcome(await claim(logs, "resp_c3", writer.fence)) == ["end", "response_cancelled"]
    await close(logs)


@on_a_loop
async def test_a_task_handed_over_keeps_its_last_events_and_is_free_to_claim_at_once():
    logs = await open_logs()
    writer = await admit(logs, "resp_c4")
    writer.mark("in_progress")
    writer.append(delta(1))
    await within(writer.hand_over(), "the hand-over was not written")
    assert writer.closed and not writer.fenced
    record = (await held(logs, "resp_c4"))[0]
    assert record[b"rel"] == b"1" and record[b"s"] == b"in_progress" and float(record[b"lu"]) == 1000.0
    assert b"fin" not in record  # not finished: it goes on elsewhere
    events = await logs.everything("resp_c4")
    assert [event.type for event in events] == ["response.created", "response.queued", "response.output_text.delta"]
    answer = await claim(logs, "resp_c4", int(record[b"f"]), now=1000.5, limit=0)  # no lease to wait for, and
    assert answer[0] == b"claimed" and answer[2] == b"in_progress"       # no resume used: its owner let it go
    assert int(answer[10]) == 0 and b"rel" not in (await held(logs, "resp_c4"))[0]
    assert int((await held(logs, "resp_c4"))[4][b"handed_over"]) == 1
    await close(logs)


@on_a_loop
async def test_only_an_owner_lost_mid_task_uses_a_resume():
    """A task in progress whose lease lapsed (its owner died) counts one resume per taking over, and past the limit
    ends `background_resume_limit`; handing over at a shutdown, or taking over a task that never started, is free."""
    logs = await open_logs()
    writer = await admit(logs, "resp_c6")
    writer.mark("in_progress")
    await within(writer.confirmed(), "in_progress was not written")
    answer = await claim(logs, "resp_c6", writer.fence, limit=1)  # its owner died: the first resume
    assert answer[0] == b"claimed" and int(answer[10]) == 1
    fence, now = int(answer[1]), LAPSED + 61  # the taker dies too: its lease (to LAPSED + 60) lapses
    assert outcome(await claim(logs, "resp_c6", fence, now=now, limit=1)) == ["end", "background_resume_limit"]
    assert int((await held(logs, "resp_c6"))[0][b"rs"]) == 1
    await close(logs)


@on_a_loop
async def test_a_hand_over_moves_the_fence_so_the_old_owner_can_write_nothing_more():
    """After `HAND_OVER` the owner's fence is stale: its `APPEND` and its `KEEP_IMAGES` are refused, so nothing it
    still had in flight lands in a log another replica is about to continue."""
    logs = await open_logs()
    writer = await admit(logs, "resp_c7")
    writer.mark("in_progress")
    writer.append(delta(1))
    await within(writer.hand_over(), "the hand-over was not written")
    record = (await held(logs, "resp_c7"))[0]
    assert int(record[b"f"]) > writer.fence
    late = RedisJobLog(logs, "resp_c7", dict, lease_s=60, clock=lambda: 1000.5, on_cancel=lambda: None,
                       on_fenced=lambda: None)
    late.fence = writer.fence  # the owner's fence, as a write still in flight would carry it
    late.append(delta(2))
    await within(late.drained(), "the stale owner's append was not refused")
    assert late.fenced
    kept = await logs.scripts["KEEP_IMAGES"]([logs.link.prefix, "resp_c7", writer.fence, b"img", b"[3]"])
    assert kept != b"ok"
    events = await logs.everything("resp_c7")
    assert [event.type for event in events][-1] == "response.output_text.delta" and len(events) == 3
    assert b"img" not in (await held(logs, "resp_c7"))[0]
    await close(logs)


@on_a_loop
async def test_a_hand_over_run_twice_leaves_the_record_as_once():
    """Retried after a timeout when its first try went through: the second run answers 'ok' (the owner is not told
    it was fenced) and writes nothing: no event twice, the fence moved once."""
    logs = await open_logs()
    writer = await admit(logs, "resp_c8")
    args = [logs.link.prefix, "resp_c8", writer.fence, 1000.0, logs.max_count, logs.max_bytes, b"{}",
            "in_progress", b"", *unnumbered(delta(1))]
    assert await logs.scripts["HAND_OVER"](args) == b"ok"
    first = await held(logs, "resp_c8")
    assert await logs.scripts["HAND_OVER"](args) == b"ok"
    assert await held(logs, "resp_c8") == first
    assert [event.type for event in await logs.everything("resp_c8")].count("response.output_text.delta") == 1
    await close(logs)


@on_a_loop
async def test_reap_ends_a_claimed_task_its_taker_cannot_run_with_the_code_it_names():
    logs = await open_logs()
    writer = await admit(logs, "resp_c5")
    answer = await claim(logs, "resp_c5", writer.fence)
    fence = int(answer[1])
    failed = {"id": "resp_c5", "object": "response", "status": "failed", "output": []}
    events = [{"type": "error", "code": "background_resume_lost", "message": "lost", "param": None},
              {"type": "response.failed", "response": failed}]
    args = [logs.link.prefix, "resp_c5", fence, 1062.0, logs.max_count, logs.max_bytes, orjson.dumps(failed),
            "failed", "background_resume_lost", 1, *(part for event in events for part in unnumbered(event))]
    assert await logs.scripts["REAP"](args) == 1  # held: its lease (until 1121) is not looked at
    ended = await collect(RedisLogReader(logs, "resp_c5", 0, 0).follow(-1))
    assert [e["type"] for e in ended[-2:]] == ["error", "response.failed"] and ended[-2]["code"] == "background_resume_lost"
    figures = (await held(logs, "resp_c5"))[4]
    assert int(figures[b"ended:background_resume_lost"]) == 1
    await close(logs)


@on_a_loop
async def test_images_kept_by_the_owner_come_with_the_claim_and_a_late_owner_cannot_keep_any():
    logs = await open_logs()
    writer = await admit(logs, "resp_c6")
    images = [b"\x89PNG first", b"\x89PNG\nsecond,with a comma"]
    joined, lengths = packed_images(images)
    keep = logs.scripts["KEEP_IMAGES"]
    assert await keep([logs.link.prefix, "resp_c6", writer.fence, joined, lengths]) == b"ok"
    answer = await claim(logs, "resp_c6", writer.fence)
    assert answer[0] == b"claimed" and unpacked_images(answer[14], answer[15]) == images
    assert await keep([logs.link.prefix, "resp_c6", writer.fence, b"late", "4"]) == b"fenced"
    assert unpacked_images(b"", b"") == []
    await close(logs)


def test_kept_images_take_the_place_of_loading_in_order_when_their_count_matches():
    from maya_server.images.loader import with_image_data
    from maya_server.neutral.conversation import Conversation, ImagePart, Message, TextPart, image_parts

    turn = Message("user", (TextPart("look"), ImagePart("https://example.invalid/a.png"),
                            ImagePart("https://example.invalid/b.png")))
    conversation = Conversation((turn,))
    loaded = with_image_data(conversation, [b"A", b"B"])
    assert [part.data for part in image_parts(loaded)] == [b"A", b"B"]
    assert with_image_data(conversation, [b"A"]) is conversation  # a count that differs: loaded again
