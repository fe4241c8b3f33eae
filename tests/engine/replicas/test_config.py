"""Several upstream URLs: the repeated flag, the variable's commas, the config file's list; one URL as before."""

from __future__ import annotations

import json

import pytest

from maya_server.cli import load
from maya_server.config import ServerConfig
from maya_server.errors import ConfigError



def _load(argv, environ=None):
    return load(["--engine", "upstream", *argv], "maya", "glm", environ=environ or {})


def test_a_repeated_flag_names_each_replica_in_order(tokenizer_dir):
    config = _load(["--tokenizer", tokenizer_dir, "--upstream-url", "http://gpu1:8000/",
                    "--upstream-url", "http://gpu2:8000,http://gpu3:8000"])
    assert config.upstream_url == ("http://gpu1:8000", "http://gpu2:8000", "http://gpu3:8000")
    settings = (config.replica_routing, config.replica_affinity_entries, config.replica_probe_s)
    assert settings == ("affinity", 131072, 5.0)


def test_the_variable_takes_commas_and_the_file_a_list(tokenizer_dir, tmp_path):
    config = _load(["--tokenizer", tokenizer_dir], {"MAYA_UPSTREAM_URL": "http://gpu1:8000, http://gpu2:8000",
                                                    "MAYA_REPLICA_ROUTING": "round-robin"})
    assert config.upstream_url == ("http://gpu1:8000", "http://gpu2:8000")
    assert config.replica_routing == "round-robin"
    path = tmp_path / "maya.json"
    path.write_text(json.dumps({"upstream_url": ["http://a:1", "http://b:2"], "tokenizer": tokenizer_dir,
                                "replica_affinity_entries": 4096, "replica_probe_s": 0.5}))
    config = _load([], {"MAYA_CONFIG": str(path)})
    assert config.upstream_url == ("http://a:1", "http://b:2")
    assert (config.replica_affinity_entries, config.replica_probe_s) == (4096, 0.5)
    config = _load(["--upstream-url", "http://c:3"], {"MAYA_CONFIG": str(path)})
    assert config.upstream_url == ("http://c:3",)  # a flag replaces the file's list, as every flag does


def test_one_url_is_one_replica_as_before(tokenizer_dir, tmp_path):
    path = tmp_path / "maya.json"
    path.write_text(json.dumps({"upstream_url": "http://gpu1:8000/", "tokenizer": tokenizer_dir}))
    assert _load([], {"MAYA_CONFIG": str(path)}).upstream_url == ("http://gpu1:8000",)
    assert _load(["--tokenizer", tokenizer_dir], {"MAYA_UPSTREAM_URL": "http://gpu1:8000"}).upstream_url == \
        ("http://gpu1:8000",)
    assert ServerConfig(engine="upstream", upstream_url="http://x:1").upstream_url == ("http://x:1",)


@pytest.mark.parametrize(
    ("argv", "environ", "field"),
    [
        (["--upstream-url", "http://a:1", "--upstream-url", "http://a:1"], {}, "upstream_url"),
        (["--upstream-url", "http://a:1,"], {}, "upstream_url"),
        (["--upstream-url", "http://a:1,gpu2:8000"], {}, "upstream_url"),
        ([], {"MAYA_UPSTREAM_URL": "http://a:1,http://user:secret@b:2"}, "upstream_url"),
        (["--upstream-url", "http://a:1", "--replica-routing", "random"], {}, None),  # argparse's own choices
        ([], {"MAYA_UPSTREAM_URL": "http://a:1", "MAYA_REPLICA_ROUTING": "random"}, "replica_routing"),
        ([], {"MAYA_UPSTREAM_URL": "http://a:1", "MAYA_REPLICA_AFFINITY_ENTRIES": "0"}, "replica_affinity_entries"),
        ([], {"MAYA_UPSTREAM_URL": "http://a:1", "MAYA_REPLICA_PROBE_S": "0"}, "replica_probe_s"),
    ],
)
def test_invalid_replica_settings_name_the_field(argv, environ, field, tokenizer_dir):
    if field is None:
        with pytest.raises(SystemExit):
            _load(["--tokenizer", tokenizer_dir, *argv], environ)
        return
    with pytest.raises(ConfigError) as caught:
        _load(["--tokenizer", tokenizer_dir, *argv], environ)
    assert caught.value.name == field
    assert "secret" not in str(caught.value)


def test_a_config_file_list_must_hold_urls(tokenizer_dir, tmp_path):
    path = tmp_path / "maya.json"
    path.write_text(json.dumps({"upstream_url": ["http://a:1", 7], "tokenizer": tokenizer_dir}))
    with pytest.raises(ConfigError) as caught:
        _load([], {"MAYA_CONFIG": str(path)})
    assert caught.value.name == "upstream_url"
