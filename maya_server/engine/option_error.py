"""An engine that cannot start with a value it was given says which value and what is wrong, nothing more.

Why: the engines take plain option bags (`EmbeddedOptions`, `UpstreamOptions`,
`ReplicaSetOptions`) and know nothing of how the operator set them: a flag, a
config-file key, an environment variable. So a refusal carries facts (the
option's field name, the value, the problem, and a `reason` for refusals the
edge words its own way) and `engine_setup.py`, which knows the settings, turns
it into the `ConfigError` that names the setting.
"""

from __future__ import annotations


class EngineOptionError(Exception):
    """`option`: the field of the engine's options whose value failed (`model`, `mmproj`, `tokenizer_dir`, `url`,
    `replicas`), or None when no one value is at fault (the engine's own binary, a child that answers oddly).
    `problem`: what is wrong, as a fact about the engine. `reason`: a short name for a refusal the edge may word
    differently (e.g. with what to change), else ""."""

    def __init__(self, option: str | None, problem: str, *, value: object = None, reason: str = "") -> None:
        super().__init__(problem)
        self.option = option
        self.problem = problem
        self.value = value
        self.reason = reason
