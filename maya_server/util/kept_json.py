"""JSON bytes meant to be kept (stored responses, job records): exactly as large as they are.

orjson sizes its output buffer for the worst case (every character escaped) and hands that
buffer back as the bytes object, so an 80 KB result can occupy 519 KB for as long as it is
kept. Fine for a response written once; a store that counts 64 MiB of JSON would hold several
times that. `dumps_kept` copies the result into an exact-size object.
"""

from __future__ import annotations

from typing import Any

import orjson


def dumps_kept(value: Any) -> bytes:
    return memoryview(orjson.dumps(value)).tobytes()
