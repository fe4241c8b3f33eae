"""The scripted engine as tests drive it: it also records what it was asked.

Why here and not in `maya_server/engine/scripted.py`: the server never reads
what an engine was asked, so the shipped engine keeps no such state; tests do
need to assert what the model was given (the prompt ids, the sampling settings),
how many generations reached it, and whether the pipeline closed a stream early.
"""

from __future__ import annotations

from array import array
from collections import deque
from typing import AsyncIterator, Sequence

from maya_server.engine.base import Finish, Generation, StreamItem
from maya_server.engine.scripted import ScriptedEngine, ScriptEntry
from maya_server.errors import EngineError

RECORDED_REQUESTS = 256
"""Prompts and settings kept: the latest ones, so a long fuzz run stays bounded."""


class RecordingScriptedEngine(ScriptedEngine):
    """`ScriptedEngine` plus `calls`, `prompts`, `params`, `salts`, `grammars`, `cancelled`, `last_prompt_text` and `set_script`."""

    def __init__(self, script: Sequence[object], **kwargs) -> None:
        super().__init__(script, **kwargs)
        self.calls = 0
        """Generations that reached the engine (a request refused before it counts none)."""
        self.prompts: deque[array] = deque(maxlen=RECORDED_REQUESTS)  # 4 bytes an id, not a list's 8
        self.params: deque = deque(maxlen=RECORDED_REQUESTS)
        self.salts: deque = deque(maxlen=RECORDED_REQUESTS)
        """Each generation's `cache_salt` (None: the caches shared)."""
        self.grammars: deque = deque(maxlen=RECORDED_REQUESTS)
        """Each generation's `grammar` (None: not held to one)."""
        self.cancelled = 0
        """Streams that ended before their finish or failure: the pipeline closed them, or the generation
        was cancelled."""

    @property
    def last_prompt_text(self) -> str:
        return self.tokenizer.decode(self.prompts[-1]) if self.prompts else ""

    def set_script(self, script: Sequence[object]) -> None:
        """Replace the remaining completions (tests use this between requests)."""
        self.entries = [ScriptEntry.parse(item) for item in script]

    async def _stream(self, generation: Generation) -> AsyncIterator[StreamItem]:
        self.calls += 1
        self.prompts.append(array("I", generation.prompt_ids))
        self.params.append(generation.params)
        self.salts.append(generation.cache_salt)
        self.grammars.append(generation.grammar)
        ended = False
        replay = super()._stream(generation)
        try:
            async for item in replay:
                ended = isinstance(item, Finish)
                yield item
        except EngineError:  # a scripted failure ends the stream; it is not a cancellation
            ended = True
            raise
        finally:
            await replay.aclose()
            if not ended:
                self.cancelled += 1


def piece_ids(tokenizer, *pieces: str) -> list[int]:
    """The ids a model writing these pieces generates (`{"pieces": [...]}` in a script): one id a piece."""
    return [tokenizer.piece_id(piece) for piece in pieces]


def holds_run(ids, run) -> bool:
    """Whether `run` occurs in `ids`, in order and unbroken."""
    ids, run = list(ids), list(run)
    return any(ids[i:i + len(run)] == run for i in range(len(ids) - len(run) + 1))
