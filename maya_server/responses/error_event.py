"""The fields of a Responses `error` stream event, readable by both of its published shapes.

OpenAI's API (and its SDKs' `ResponseErrorEvent`) puts `code`, `message` and `param` at
the top of the event; the Open Responses schema requires them, with the error `type`,
nested under `error`. Maya sends both, so every client finds what it looks for.
"""

from __future__ import annotations


def error_event_fields(*, type: str, code: str | None, message: str, param: str | None) -> dict:
    return {"code": code, "message": message, "param": param,
            "error": {"type": type, "code": code, "message": message, "param": param}}
