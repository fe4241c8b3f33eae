"""`MAYA_GLM_RESPONSES_*` settings: defaults, both prefixes, the config `env` block, bad values."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import fields

import pytest

from maya_server.config import build_config
from maya_server.errors import ConfigError
from maya_server.responses.settings import ROWS, ResponsesSettings


def test_defaults_are_the_specs():
    s = ResponsesSettings.from_environ({})
    assert (s.cache_entries, s.cache_bytes, s.cache_ttl_s, s.entry_bytes) == (128, 64 << 20, 3600, 64 << 20)
    assert (s.owner_entries, s.owner_bytes, s.assembly_bytes) == (0, 0, 64 << 20)
    assert (s.job_workers, s.job_entries, s.job_owner_entries, s.job_timeout_s, s.job_ttl_s) == (2, 16, 4, 300, 900)
    assert (s.job_input_bytes, s.event_bytes, s.event_count) == (2 << 20, 2 << 20, 4096)
    assert (s.stream_readers, s.stream_owner_readers, s.stream_timeout_s) == (32, 8, 5)


def test_every_table_row_is_a_setting():
    assert {f.name.upper() for f in fields(ResponsesSettings)} == set(ROWS)


def test_maya_and_legacy_prefixes_maya_wins():
    s = ResponsesSettings.from_environ({
        "STRATA_GLM_RESPONSES_CACHE_ENTRIES": "7",
        "STRATA_GLM_RESPONSES_CACHE_TTL_S": "30",
        "MAYA_GLM_RESPONSES_CACHE_TTL_S": "40",
    })
    assert s.cache_entries == 7
    assert s.cache_ttl_s == 40


def test_owner_quotas_may_be_zero_others_may_not():
    assert ResponsesSettings.from_environ({"MAYA_GLM_RESPONSES_OWNER_BYTES": "0"}).owner_bytes == 0
    with pytest.raises(ConfigError) as caught:
        ResponsesSettings.from_environ({"MAYA_GLM_RESPONSES_CACHE_ENTRIES": "0"})
    assert caught.value.name == "MAYA_GLM_RESPONSES_CACHE_ENTRIES"


@pytest.mark.parametrize("name, value, fragment", [
    ("MAYA_GLM_RESPONSES_CACHE_BYTES", "lots", "integer"),
    ("MAYA_GLM_RESPONSES_CACHE_TTL_S", "1.5", "integer"),
    ("MAYA_GLM_RESPONSES_JOB_WORKERS", "33", "at most 32"),
    ("MAYA_GLM_RESPONSES_JOB_ENTRIES", "4097", "at most 4096"),
    ("MAYA_GLM_RESPONSES_EVENT_BYTES", "4095", "at least 4096"),
    ("MAYA_GLM_RESPONSES_OWNER_ENTRIES", "-1", "0 (off) or more"),
    ("STRATA_GLM_RESPONSES_STREAM_READERS", "-3", "at least 1"),
])
def test_bad_values_name_the_setting(name, value, fragment):
    with pytest.raises(ConfigError) as caught:
        ResponsesSettings.from_environ({name: value})
    assert caught.value.name == name
    assert fragment in str(caught.value)


def test_read_from_the_config_files_env_block_under_the_process_environment():
    config = build_config(
        {"env": {"MAYA_GLM_RESPONSES_CACHE_ENTRIES": 9, "MAYA_GLM_RESPONSES_CACHE_TTL_S": 10}},
        {"MAYA_GLM_RESPONSES_CACHE_TTL_S": "20"},
        {"engine": "scripted"},
    )
    s = ResponsesSettings.from_environ(config.environ)
    assert (s.cache_entries, s.cache_ttl_s) == (9, 20)


def test_the_cli_refuses_a_bad_setting_at_start_up(tmp_path):
    script = tmp_path / "script.json"
    script.write_text('["hi"]')
    config = tmp_path / "maya.json"
    config.write_text(json.dumps({"env": {"MAYA_GLM_RESPONSES_ASSEMBLY_BYTES": "many"}}))
    result = subprocess.run(
        [sys.executable, "-m", "maya_server", "--engine", "scripted", "--script", str(script), "--config", str(config)],
        capture_output=True, text=True, timeout=60,
    )
    assert result.returncode == 2
    assert "MAYA_GLM_RESPONSES_ASSEMBLY_BYTES" in result.stderr
    assert "Traceback" not in result.stderr
