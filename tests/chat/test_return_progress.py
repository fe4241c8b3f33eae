"""return_progress: `prompt_progress` chunks before the first token, through the `openai` SDK.

The scripted engine reports nothing, so Maya synthesizes a start and an end; an engine that reports
progress itself (llama-server: tests/engine/upstream/test_engine.py) has its own forwarded instead.
"""

from __future__ import annotations

import openai
import pytest

from maya_server.neutral.events import PromptProgress
from maya_server.engine.upstream.wire import completion_request, native_completion_request, parse_event
from maya_server.engine.base import SamplingParams

from tests.scripted import RecordingScriptedEngine
from tests.server import RunningServer, scripted_config

ASK = [{"role": "user", "content": "Tell me something."}]
PROGRESS = {"return_progress": True}


def progress_of(chunk) -> dict | None:
    return (chunk.model_extra or {}).get("prompt_progress")


def test_a_stream_gets_progress_before_its_first_token(start_server):
    server = start_server(["Some words here."])
    chunks = list(server.client().chat.completions.create(model="m", messages=ASK, stream=True, extra_body=PROGRESS))
    first_text = next(i for i, c in enumerate(chunks) if c.choices and c.choices[0].delta.content)
    progress = [(i, progress_of(c)) for i, c in enumerate(chunks) if progress_of(c)]
    assert [i for i, _ in progress] and all(i < first_text for i, _ in progress)
    total = len(server.engine.prompts[0])
    assert [p for _, p in progress][0] == {"total": total, "cache": 0, "processed": 0, "time_ms": 0}
    last = progress[-1][1]
    assert (last["total"], last["processed"], last["cache"]) == (total, total, 0) and last["time_ms"] >= 0
    for i, _ in progress:
        assert chunks[i].choices[0].delta.content is None and chunks[i].choices[0].finish_reason is None
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "Some words here."


def test_the_end_of_the_prompt_reports_the_cached_prefix(start_server):
    server = start_server(["Sure."])
    client = server.client()
    client.chat.completions.create(model="m", messages=ASK)
    longer = ASK + [{"role": "assistant", "content": "Sure."}, {"role": "user", "content": "More."}]
    chunks = list(client.chat.completions.create(model="m", messages=longer, stream=True, extra_body=PROGRESS))
    last = [progress_of(c) for c in chunks if progress_of(c)][-1]
    assert last["cache"] > 0 and last["processed"] == last["total"] == len(server.engine.prompts[-1])


def test_without_return_progress_or_without_a_stream_nothing_changes(start_server):
    server = start_server(["Plain."])
    client = server.client()
    chunks = list(client.chat.completions.create(model="m", messages=ASK, stream=True))
    assert not any(progress_of(c) for c in chunks)
    completion = client.chat.completions.create(model="m", messages=ASK, extra_body=PROGRESS)
    assert completion.choices[0].message.content == "Plain." and "prompt_progress" not in (completion.model_extra or {})


class ReportingEngine(RecordingScriptedEngine):
    """A scripted engine that reports its own progress, as llama-server does."""

    reports_prompt_progress = True

    async def generate(self, generation):
        if generation.report_progress:
            total = len(generation.prompt_ids)
            for processed in (0, total // 2, total):
                yield PromptProgress(total, 0, processed, processed)
        async for token in super().generate(generation):
            yield token


def test_an_engines_own_progress_is_forwarded_instead_of_synthesized():
    config = scripted_config()
    server = RunningServer(config, ReportingEngine(["Yes."], context_size=config.ctx))
    try:
        chunks = list(server.client().chat.completions.create(model="m", messages=ASK, stream=True, extra_body=PROGRESS))
        total = len(server.engine.prompts[0])
        assert [progress_of(c)["processed"] for c in chunks if progress_of(c)] == [0, total // 2, total]
    finally:
        server.stop()


def test_bad_values_and_the_responses_endpoint_are_400s(start_server):
    server = start_server(["unused"])
    client = server.client()
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(model="m", messages=ASK, stream=True, extra_body={"return_progress": 1})
    assert caught.value.body["param"] == "return_progress"
    for extension in ("return_progress", "strata_mcp"):
        with pytest.raises(openai.BadRequestError) as caught:
            client.responses.create(model="m", input="hi", extra_body={extension: True})
        assert caught.value.body["param"] == extension and "/v1/chat/completions" in caught.value.body["message"]
    assert server.engine.calls == 0


def test_llama_server_is_asked_for_progress_and_its_chunks_are_read():
    params = SamplingParams(max_tokens=4)
    assert native_completion_request([1], params, report_progress=True)["return_progress"] is True
    assert "return_progress" not in native_completion_request([1], params)
    assert "return_progress" not in completion_request("vllm", "m", [1], params, (), report_progress=True)
    chunk = parse_event('{"choices":[{"text":"","index":0,"logprobs":null,"finish_reason":null}],'
                        '"object":"text_completion","prompt_progress":{"total":12,"cache":4,"processed":8,"time_ms":3}}')
    assert chunk.prompt_progress == PromptProgress(12, 4, 8, 3) and chunk.token_ids is None
    assert parse_event('{"choices":[],"prompt_progress":{"total":"x"}}').prompt_progress is None
