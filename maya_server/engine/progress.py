"""How far an engine is through a prompt: llama.cpp's `prompt_progress` convention.

`processed` counts the prompt tokens in the engine's sequence so far, cached
ones included, so it starts at `cache` and ends at `total`; the work actually
timed is `(processed - cache) / (total - cache)`. llama-server reports these
itself (`return_progress`); for engines that report nothing the generation
pipeline synthesizes a start and an end from what it knows.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PromptProgress:
    total: int
    cache: int
    processed: int
    time_ms: int

    def body(self) -> dict:
        return {"total": self.total, "cache": self.cache, "processed": self.processed, "time_ms": self.time_ms}
