"""docs/configuration.md against the code's own definitions, both ways: every flag `maya --help` has, every config
key `PARSERS` reads, every `MAYA_*` variable the server reads and every Responses setting (`ROWS`) has its row; every
row names a real one; a row's flag, key and variable are one setting; and a default written as a number is the one
`ServerConfig` holds. So a setting added to the CLI without its row fails here, and so does a row left behind."""

from __future__ import annotations

import re
from dataclasses import dataclass, fields
from pathlib import Path

import pytest

from maya_server.cli import build_parser
from maya_server.config import ENV_NAMES, PARSERS, ServerConfig
from maya_server.responses.settings import PREFIX, ROWS

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "configuration.md"
CONFIG_FILE_ALIASES = {"api_key": "api_keys", "cors_origin": "cors_origins", "allowed_host": "allowed_hosts"}
"""Config keys the file accepts for a single value (`config.load_config_file`), each the alias of a list key."""
ENV_ALIASES = {"MAYA_API_KEY": "api_keys"}
"""Variables read besides `ENV_NAMES`, and the setting each fills (`config.build_config`)."""
CODE = re.compile(r"`([^`]+)`")
ENV_IN_SOURCE = re.compile(r"\bMAYA_[A-Z][A-Z0-9_]*[A-Z0-9]\b")


@dataclass(frozen=True)
class Row:
    flags: tuple[str, ...]
    keys: tuple[str, ...]
    envs: tuple[str, ...]
    default: str


def table_rows(text: str) -> list[list[str]]:
    """The cells of every table row that is not a header or a rule (`\\|` inside a cell is a literal bar)."""
    rows = []
    for line in text.splitlines():
        if not line.startswith("|") or set(line) <= set("|-: "):
            continue
        cells = [cell.strip().replace("\\|", "|") for cell in re.split(r"(?<!\\)\|", line)[1:-1]]
        if cells and cells[0] not in ("flag", "environment"):
            rows.append(cells)
    return rows


def settings_rows(text: str) -> list[Row]:
    """The rows of the settings tables: flag | config key | environment | default."""
    rows = []
    for cells in table_rows(text):
        if len(cells) != 4:
            continue
        flags = tuple(code.split()[0] for code in CODE.findall(cells[0]) if code.startswith("--"))
        keys = tuple(code for code in CODE.findall(cells[1]) if re.fullmatch(r"[a-z][a-z0-9_]*", code))
        envs = tuple(code for code in CODE.findall(cells[2]) if code.startswith("MAYA_"))
        rows.append(Row(flags, keys, envs, cells[3]))
    return rows


def environment_rows(text: str) -> dict[str, str]:
    """The two-column tables: environment | default or meaning."""
    return {CODE.findall(cells[0])[0]: cells[1] for cells in table_rows(text)
            if len(cells) == 2 and CODE.findall(cells[0])}


def cli_flags() -> dict[str, str]:
    """Every long flag of `maya --help` -> the setting it fills (argparse's dest)."""
    return {option: action.dest for action in build_parser("maya")._actions
            for option in action.option_strings if option.startswith("--") and option != "--help"}


def server_environment() -> set[str]:
    """Every `MAYA_*` name spelled in the server's source, the prefix of the Responses settings aside."""
    names = set()
    for path in (ROOT / "maya_server").rglob("*.py"):
        names |= set(ENV_IN_SOURCE.findall(path.read_text()))
    return names - {PREFIX.rstrip("_")}


@pytest.fixture(scope="module")
def doc() -> str:
    return DOC.read_text()


def test_every_flag_has_its_row_and_every_row_flag_is_real(doc):
    documented = {flag for row in settings_rows(doc) for flag in row.flags}
    assert sorted(set(cli_flags()) - documented) == [], "flags without a row in docs/configuration.md"
    assert sorted(documented - set(cli_flags())) == [], "rows naming a flag maya --help does not have"


def test_every_config_key_has_its_row_and_every_row_key_is_real(doc):
    documented = {key for row in settings_rows(doc) for key in row.keys}
    assert sorted(set(PARSERS) - documented) == [], "config keys without a row in docs/configuration.md"
    assert sorted(documented - set(PARSERS) - set(CONFIG_FILE_ALIASES)) == [], "rows naming an unknown config key"


def test_every_variable_has_its_row_and_every_row_variable_is_real(doc):
    in_rows = {env for row in settings_rows(doc) for env in row.envs}
    expected = set(ENV_NAMES.values()) | set(ENV_ALIASES) | {"MAYA_CONFIG"}
    assert sorted(expected - in_rows) == [], "MAYA_* variables without a row"
    assert sorted(in_rows - expected) == [], "rows naming a variable the config does not read"
    others = set(environment_rows(doc))
    responses = {PREFIX + suffix for suffix in ROWS}
    assert sorted((server_environment() | responses) - in_rows - others) == [], "variables the server reads, undocumented"
    assert sorted(others - server_environment() - responses) == [], "documented variables the server never reads"


def test_a_rows_flag_key_and_variable_are_one_setting(doc):
    flags = cli_flags()
    for row in settings_rows(doc):
        key = next((CONFIG_FILE_ALIASES.get(k, k) for k in row.keys), None)
        for flag in row.flags:
            assert flags[flag] == (key or "config"), f"{flag} fills {flags[flag]}, but its row says {key}"
        for env in row.envs:
            assert ENV_NAMES.get(key) == env or ENV_ALIASES.get(env) == key or (key, env) == (None, "MAYA_CONFIG"), \
                f"{env} does not fill {key}"


def test_a_default_written_as_a_number_is_the_code_s(doc):
    defaults = {f.name: f.default for f in fields(ServerConfig)}
    checked = 0
    for row in settings_rows(doc):
        first = CODE.match(row.default)
        if not row.keys or first is None or not re.fullmatch(r"-?\d+(\.\d+)?", first.group(1)):
            continue
        key = CONFIG_FILE_ALIASES.get(row.keys[0], row.keys[0])
        assert float(first.group(1)) == float(defaults[key]), f"{key}: the doc says {first.group(1)}"
        checked += 1
    assert checked >= 30  # the check reads the tables it is meant to


def test_every_responses_setting_has_its_row_with_its_default(doc):
    rows = environment_rows(doc)
    documented = {name.removeprefix(PREFIX): text for name, text in rows.items() if name.startswith(PREFIX)}
    assert set(documented) == set(ROWS)
    for suffix, row in ROWS.items():
        assert CODE.match(documented[suffix]).group(1) == str(row.default), suffix
