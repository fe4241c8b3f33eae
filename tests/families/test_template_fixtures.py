"""The official templates under tests/families/templates/ are the bytes PROVENANCE.md names."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pytest

TEMPLATE_DIR = Path(__file__).parent / "templates"
ROWS = dict(re.findall(r"^\| (\S+\.jinja) \| ([0-9a-f]{64}) \|", (TEMPLATE_DIR / "PROVENANCE.md").read_text(), re.M))


def test_every_template_is_listed():
    assert sorted(ROWS) == sorted(p.name for p in TEMPLATE_DIR.glob("*.jinja"))


@pytest.mark.parametrize("name", sorted(ROWS))
def test_each_template_is_byte_exact(name):
    assert hashlib.sha256((TEMPLATE_DIR / name).read_bytes()).hexdigest() == ROWS[name]
