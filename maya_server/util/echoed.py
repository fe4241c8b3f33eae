"""A client's value as an error message quotes it: at most `ECHOED_CHARS` characters.

An error names the id it could not find so a client sees which one it sent; but an id is whatever the client
sent, so echoing it whole lets one request make the answer as large as the request (a 1 MB
`previous_response_id` came back as a 1 MB 404). Real ids are well under the bound (Maya's are 37
characters), so an id that names something is still shown whole.
"""

from __future__ import annotations

ECHOED_CHARS = 64
"""The most characters of a client's value an error quotes (a constant: it only shapes a message, and every
id Maya generates fits)."""


def echoed(value: str, limit: int = ECHOED_CHARS) -> str:
    """`value` as an error message quotes it: whole when short, else its first `limit` characters and "…"."""
    return value if len(value) <= limit else value[:limit] + "…"
