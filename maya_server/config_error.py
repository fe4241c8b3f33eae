"""The one error a bad configuration raises, naming the field; the CLI prints it and exits 2.

Its own module so that parsers of nested settings (e.g. `mcp/config.py`) can raise it
without importing the whole configuration.
"""

from __future__ import annotations


class ConfigError(ValueError):
    def __init__(self, name: str, message: str) -> None:
        super().__init__(f"{name}: {message}")
        self.name = name
