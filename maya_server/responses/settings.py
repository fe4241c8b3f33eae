"""The Responses service's integer settings: `MAYA_GLM_RESPONSES_<SUFFIX>`.

One row per line of the spec's settings table. They are read once, when the
service is created, from the merged environment (`ServerConfig.environ`: the
config file's `env` block under the process environment). The legacy
`STRATA_GLM_RESPONSES_<SUFFIX>` spelling is still read; `MAYA_` wins when
both are set. A value that is not an integer, not positive (owner quotas may
be 0, meaning off) or over its maximum stops start-up with a `ConfigError`
naming the variable.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Mapping

from ..errors import ConfigError

PREFIX = "MAYA_GLM_RESPONSES_"
LEGACY_PREFIX = "STRATA_GLM_RESPONSES_"

MIB = 1024 * 1024
GIB = 1024 * MIB
DAY_S = 86_400


@dataclass(frozen=True)
class Row:
    default: int
    maximum: int
    minimum: int = 1


ROWS: dict[str, Row] = {
    "CACHE_ENTRIES": Row(128, 1_000_000),
    "CACHE_BYTES": Row(64 * MIB, 64 * GIB),
    "CACHE_TTL_S": Row(3600, 30 * DAY_S),
    "ENTRY_BYTES": Row(64 * MIB, 64 * GIB),
    "OWNER_ENTRIES": Row(0, 1_000_000, minimum=0),
    "OWNER_BYTES": Row(0, 64 * GIB, minimum=0),
    "ASSEMBLY_BYTES": Row(64 * MIB, 64 * GIB),
    "JOB_WORKERS": Row(2, 32),
    "JOB_ENTRIES": Row(16, 4096),
    "JOB_OWNER_ENTRIES": Row(4, 4096),
    "JOB_TIMEOUT_S": Row(300, DAY_S),
    "JOB_TTL_S": Row(900, 30 * DAY_S),
    "JOB_INPUT_BYTES": Row(2 * MIB, 1 * GIB),
    "EVENT_BYTES": Row(2 * MIB, 1 * GIB, minimum=4096),
    "EVENT_COUNT": Row(4096, 1_000_000),
    "STREAM_READERS": Row(32, 65_536),
    "STREAM_OWNER_READERS": Row(8, 65_536),
    "STREAM_TIMEOUT_S": Row(5, 3600),
}
"""Defaults are the spec's; maxima are the spec's where it gives one, else a sanity bound."""


@dataclass(frozen=True)
class ResponsesSettings:
    cache_entries: int = ROWS["CACHE_ENTRIES"].default
    cache_bytes: int = ROWS["CACHE_BYTES"].default
    cache_ttl_s: int = ROWS["CACHE_TTL_S"].default
    entry_bytes: int = ROWS["ENTRY_BYTES"].default
    owner_entries: int = ROWS["OWNER_ENTRIES"].default
    owner_bytes: int = ROWS["OWNER_BYTES"].default
    assembly_bytes: int = ROWS["ASSEMBLY_BYTES"].default
    job_workers: int = ROWS["JOB_WORKERS"].default
    job_entries: int = ROWS["JOB_ENTRIES"].default
    job_owner_entries: int = ROWS["JOB_OWNER_ENTRIES"].default
    job_timeout_s: int = ROWS["JOB_TIMEOUT_S"].default
    job_ttl_s: int = ROWS["JOB_TTL_S"].default
    job_input_bytes: int = ROWS["JOB_INPUT_BYTES"].default
    event_bytes: int = ROWS["EVENT_BYTES"].default
    event_count: int = ROWS["EVENT_COUNT"].default
    stream_readers: int = ROWS["STREAM_READERS"].default
    stream_owner_readers: int = ROWS["STREAM_OWNER_READERS"].default
    stream_timeout_s: int = ROWS["STREAM_TIMEOUT_S"].default

    @property
    def snapshot_limit(self) -> int:
        """The largest single response snapshot either store keeps: past any of these bounds it could be stored
        but never held, or never continued (the assembly budget expands it whole)."""
        return min(self.entry_bytes, self.cache_bytes, self.owner_bytes or self.cache_bytes, self.assembly_bytes)

    @classmethod
    def from_environ(cls, environ: Mapping[str, str]) -> "ResponsesSettings":
        values = {}
        for f in fields(cls):
            suffix = f.name.upper()
            name = PREFIX + suffix
            raw = environ.get(name)
            if raw is None and LEGACY_PREFIX + suffix in environ:
                name = LEGACY_PREFIX + suffix
                raw = environ[name]
            if raw is not None:
                values[f.name] = _parse(name, raw, ROWS[suffix])
        return cls(**values)


def _parse(name: str, raw: str, row: Row) -> int:
    text = str(raw).strip()
    try:
        value = int(text, 10)
    except ValueError:
        raise ConfigError(name, f"must be an integer, got {raw!r}") from None
    if value < row.minimum:
        floor = "0 (off) or more" if row.minimum == 0 else f"at least {row.minimum}"
        raise ConfigError(name, f"must be {floor}, got {value}")
    if value > row.maximum:
        raise ConfigError(name, f"must be at most {row.maximum}, got {value}")
    return value
