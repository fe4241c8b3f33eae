"""`Engine.generate`: the one place a sequence's counts and finish reason are kept, whatever the engine.

A tiny in-test engine says only what it knows (its tokens, its counts, how it ended); the base class
must turn that into `generation.stats` exactly: one token counted per token yielded unless the engine
gives its own count, `cancelled` when the reader leaves early or the engine stops on `cancel()`,
`error` when an `EngineError` escapes.
"""

from __future__ import annotations

import ast
import asyncio
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

import maya_server
from maya_server.engine.base import (
    Counts, Engine, Finish, GeneratedToken, Generation, GenerationStats, SamplingParams,
)
from maya_server.neutral.events import PromptProgress
from maya_server.engine.scripted import ScriptTokenizer
from maya_server.errors import EngineError

ENGINE_PACKAGE = Path(maya_server.__file__).parent / "engine"


@dataclass
class Tiny(Engine):
    """Yields `texts` as tokens after reporting its prompt counts, then ends as told."""

    texts: list[str]
    finish: str | None = "stop"
    fail_after: int | None = None
    cached: int = 0
    own_count: int | None = None
    progress: bool = False
    closed: bool = False
    name = "tiny"
    context_size = 64

    def __post_init__(self) -> None:
        self.tokenizer = ScriptTokenizer()

    async def _stream(self, generation):
        try:
            yield Counts(prompt_tokens=len(generation.prompt_ids), cached_tokens=self.cached)
            if self.progress:
                yield PromptProgress(total=3, cache=0, processed=3, time_ms=1)
            for index, text in enumerate(self.texts):
                if generation.cancelled:
                    return
                if index == self.fail_after:
                    raise EngineError("the tiny engine failed")
                yield GeneratedToken(index, text)
            if self.own_count is not None:
                yield Counts(generated_tokens=self.own_count)
            if self.finish is not None:
                yield Finish(self.finish)
        finally:
            self.closed = True


def generation(max_tokens: int = 16) -> Generation:
    return Generation(prompt_ids=[1, 2, 3], params=SamplingParams(max_tokens=max_tokens))


def drain(engine: Engine, gen: Generation, *, leave_after: int | None = None) -> list:
    """What a reader gets from `engine.generate(gen)`, leaving (closing the stream) after `leave_after` outputs."""
    async def scenario():
        outputs = []
        stream = engine.generate(gen)
        try:
            async for output in stream:
                outputs.append(output)
                if leave_after is not None and len(outputs) >= leave_after:
                    break
        finally:
            await stream.aclose()
        return outputs

    return asyncio.run(scenario())


def test_the_docstring_example_holds():
    engine = Tiny(["Hello", " there"])
    gen = Generation(prompt_ids=[1, 2, 3], params=SamplingParams(max_tokens=16))
    printed = []

    async def example():
        async for token in engine.generate(gen):
            printed.append((token.id, token.text))

    asyncio.run(example())
    assert printed == [(0, "Hello"), (1, " there")]
    assert gen.stats.finish_reason == "stop"


def test_each_yielded_token_is_counted_and_the_prompt_counts_are_the_engines():
    gen = generation()
    outputs = drain(Tiny(["a", "b", "c"], cached=2), gen)
    assert [o.text for o in outputs] == ["a", "b", "c"]
    assert gen.stats == GenerationStats(prompt_tokens=3, cached_tokens=2, generated_tokens=3, finish_reason="stop")


def test_the_count_is_live_while_the_reader_reads():
    gen = generation()
    seen = []

    async def read():
        async for _ in Tiny(["a", "b"]).generate(gen):
            seen.append(gen.stats.generated_tokens)  # the pipeline times the first token by this

    asyncio.run(read())
    assert seen == [1, 2]


def test_the_engines_length_finish_is_kept():
    gen = generation()
    drain(Tiny(["a", "b"], finish="length"), gen)
    assert gen.stats.finish_reason == "length" and gen.stats.generated_tokens == 2


def test_an_engines_own_count_replaces_the_count_of_yielded_tokens():
    gen = generation()
    drain(Tiny(["ab", "cd"], own_count=5), gen)  # an upstream's usage: 5 tokens in two text chunks
    assert gen.stats.generated_tokens == 5 and gen.stats.finish_reason == "stop"


def test_counts_and_the_finish_never_reach_the_reader_and_progress_is_not_a_token():
    gen = generation()
    outputs = drain(Tiny(["a"], own_count=None, progress=True), gen)
    assert [type(o) for o in outputs] == [PromptProgress, GeneratedToken]
    assert gen.stats.generated_tokens == 1


def test_a_reader_that_leaves_early_is_cancelled_and_closes_the_engines_stream():
    engine = Tiny(["a", "b", "c", "d"])
    gen = generation()
    outputs = drain(engine, gen, leave_after=2)
    assert len(outputs) == 2 and engine.closed
    assert gen.stats.finish_reason == "cancelled" and gen.stats.generated_tokens == 2


def test_an_engine_that_stops_on_cancel_without_a_finish_is_cancelled():
    gen = generation()

    async def read():
        async for _ in Tiny(["a", "b", "c"]).generate(gen):
            gen.cancel()  # from anywhere; the engine stops before its next token

    asyncio.run(read())
    assert gen.stats.finish_reason == "cancelled" and gen.stats.generated_tokens == 1


def test_an_engine_error_is_raised_and_recorded_as_error():
    engine = Tiny(["a", "b", "c"], fail_after=2)
    gen = generation()
    with pytest.raises(EngineError):
        drain(engine, gen)
    assert gen.stats.finish_reason == "error" and gen.stats.generated_tokens == 2 and engine.closed


def _imported_modules(path: Path, package: tuple[str, ...] = ("maya_server", "engine")) -> set[str]:
    """Absolute names of the modules `path` (a module of `package`) imports, relative imports resolved."""
    names = set()
    if path.is_relative_to(ENGINE_PACKAGE):  # a sub-package's module: `.` is its sub-package
        package = ("maya_server", "engine", *path.relative_to(ENGINE_PACKAGE).parent.parts)
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            within = list(package[: len(package) + 1 - node.level]) if node.level else []
            base = ".".join(within + ([node.module] if node.module else []))
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names)  # `from .. import config`
    return names


def test_no_engine_module_imports_the_cli_config():
    modules = sorted(ENGINE_PACKAGE.rglob("*.py"))
    assert len(modules) > 25  # the package and its sub-packages were found
    for path in modules:
        imported = _imported_modules(path)
        for forbidden in ("maya_server.config", "maya_server.cli"):
            assert not any(n == forbidden or n.startswith(forbidden + ".") for n in imported), (path.name, forbidden)


def test_the_import_check_sees_relative_and_absolute_imports(tmp_path):
    path = tmp_path / "probe.py"
    path.write_text("from ..config import ServerConfig\nfrom .base import Engine\nfrom .. import cli\n"
                    "import maya_server.config.sub\n")
    assert {"maya_server.config", "maya_server.engine.base", "maya_server.cli",
            "maya_server.config.sub"} <= _imported_modules(path)


def test_importing_every_engine_loads_no_config_at_all():
    names = [".".join(("maya_server", "engine", *p.relative_to(ENGINE_PACKAGE).with_suffix("").parts))
             for p in sorted(ENGINE_PACKAGE.rglob("*.py")) if p.stem != "__init__"]
    code = ("import importlib, sys\n"
            f"for name in {names!r}: importlib.import_module(name)\n"
            "print(sorted(m for m in ('maya_server.config', 'maya_server.cli') if m in sys.modules))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert result.stdout.strip() == "[]"
