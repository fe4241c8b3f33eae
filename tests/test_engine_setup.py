"""The settings → engine mapping: each engine gets its settings as plain values, and refusals name the setting."""

from __future__ import annotations

import json
from dataclasses import fields, replace

import pytest

from maya_server.config import ServerConfig
from maya_server.engine.base import DEFAULT_CTX
from maya_server.engine.scripted import ScriptedEngine
from maya_server.engine_setup import (
    context_source, create_engine, embedded_options, resolve_family, upstream_options,
)
from maya_server.errors import ConfigError


def test_the_embedded_engine_gets_every_setting_it_reads():
    config = ServerConfig(engine="llamacpp", model="/m.gguf", slots=3, ctx=1024, threads=2, gpu_layers=7,
                          cache_ram_mib=64, mmproj="/p.gguf", tokenizer="/dir", upstream_read_timeout=9.0,
                          tokenize_cache_mib=5, tokenize_timeout=4.5, engine_args=("--no-repack",),
                          llama_server="/opt/llama-server")
    options = embedded_options(config)
    assert (options.model, options.slots, options.ctx, options.threads, options.gpu_layers, options.cache_ram_mib,
            options.mmproj, options.tokenizer_dir, options.read_timeout, options.tokenize_cache_mib,
            options.tokenize_timeout, options.extra_args, options.llama_server) == (
        "/m.gguf", 3, 1024, 2, 7, 64, "/p.gguf", "/dir", 9.0, 5, 4.5, ("--no-repack",), "/opt/llama-server")
    assert len(fields(options)) == 13


def test_the_upstream_engine_gets_every_setting_it_reads():
    config = ServerConfig(engine="upstream", upstream_url="http://up:8000", tokenizer="/dir",
                          upstream_key="secret-key-9", upstream_model="served", upstream_slots=5, ctx=2048,
                          upstream_connect_timeout=1.5, upstream_read_timeout=30.0)
    options = upstream_options(config)
    assert (options.url, options.tokenizer_dir, options.key, options.model, options.slots, options.context_size,
            options.connect_timeout, options.read_timeout) == (
        "http://up:8000", "/dir", "secret-key-9", "served", 5, 2048, 1.5, 30.0)
    assert "secret-key-9" not in repr(options)  # the key never reaches a log line
    assert len(fields(options)) == 8  # a new option needs its setting mapped in engine_setup (and here)


def test_the_scripted_engine_takes_the_script_file_and_the_default_context(tmp_path):
    script = tmp_path / "script.json"
    script.write_text(json.dumps(["hi"]))
    engine = create_engine(ServerConfig(engine="scripted", script=str(script), script_delay=0.5))
    assert isinstance(engine, ScriptedEngine) and engine.context_size == DEFAULT_CTX and engine.delay == 0.5


@pytest.mark.parametrize("config, setting", [
    (ServerConfig(engine="scripted"), "script"),
    (ServerConfig(engine="nonesuch"), "engine"),
])
def test_a_start_that_cannot_happen_names_the_setting(config, setting):
    with pytest.raises(ConfigError) as caught:
        create_engine(config)
    assert caught.value.name == setting


WARNED = "names no family Maya knows"


@pytest.mark.parametrize(("default", "names"), [("glm", "maya-ds4"), ("deepseek-v4", "needs maya")])
def test_a_model_with_no_family_in_its_template_is_served_by_default_with_a_warning(caplog, default, names):
    config = ServerConfig(family=default, family_explicit=False)
    with caplog.at_level("WARNING", logger="maya"):
        assert resolve_family(config, None).family == default
    [record] = [r for r in caplog.records if WARNED in r.getMessage()]
    assert record.levelname == "WARNING"
    assert names in record.getMessage() and "--family" in record.getMessage()


@pytest.mark.parametrize("config, detected", [
    (ServerConfig(family="glm", family_explicit=False), "chatml"),    # the template decides
    (ServerConfig(family="glm", family_explicit=True), None),         # the operator did
    (ServerConfig(family="glm", family_explicit=False, engine="scripted"), None),  # no model, no template
])
def test_no_warning_when_the_family_is_known(caplog, config, detected):
    with caplog.at_level("WARNING"):
        resolve_family(config, detected)
    assert not [r for r in caplog.records if WARNED in r.getMessage()]


def test_the_context_is_credited_where_it_came_from():
    assert context_source(ServerConfig(ctx=4096), 4096) == "--ctx"
    assert context_source(ServerConfig(ctx=16384), 8192) == \
        "--ctx asked 16384; llama-server caps it at the model's training context"
    assert context_source(ServerConfig(ctx=16384, engine="upstream"), 8192) == "--ctx asked 16384; the engine serves no more"
    assert context_source(ServerConfig(), 8192) == "the model's training context"
    assert context_source(ServerConfig(engine="upstream"), 32768) == "the engine's own"
    assert context_source(ServerConfig(engine="scripted"), DEFAULT_CTX) == "Maya's default"


def test_isolated_caches_turn_the_embedded_engines_shared_ram_cache_off():
    """llama-server's RAM prompt cache is keyed by tokens alone: with caches isolated per key it must be off."""
    two_keys = ServerConfig(model="m.gguf", api_keys=("kA", "kB"), cache_ram_mib=512)
    assert embedded_options(two_keys).cache_ram_mib == 0
    assert embedded_options(replace(two_keys, prompt_cache_isolation="shared")).cache_ram_mib == 512
    assert embedded_options(replace(two_keys, api_keys=("kA",))).cache_ram_mib == 512  # one key: one tenant
