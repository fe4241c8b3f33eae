"""Memory a huge request held goes back to the system once it is answered.

Why: a request of tens of megabytes makes buffers of its size (the body, the
parsed text, the rendered prompt). glibc's malloc maps a block that large on
its own and unmaps it when freed, but then raises its threshold for mapping
to the size just freed (up to 32 MiB), so the next such buffers come from the
heap, which keeps their pages after they are freed: after six 8 MB prompts
Maya stayed at 435 MB where it idles at 99. Fixing the threshold
(`M_MMAP_THRESHOLD`) turns that adjustment off: every buffer of at least
`THRESHOLD` bytes is mapped for itself and returned whole when freed, at the
cost of a fresh mapping (page faults) per large buffer, a millisecond or two
for 8 MB. Only glibc has `mallopt`; elsewhere this does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util

M_MMAP_THRESHOLD = -3
THRESHOLD = 1 << 20
"""Buffers from 1 MiB up are mapped for themselves: larger than any ordinary request's, small enough that a
huge request's big ones all are."""


def return_large_buffers() -> bool:
    """Fix glibc's mmap threshold at `THRESHOLD` for this process; whether it was set."""
    name = ctypes.util.find_library("c")
    if name is None:
        return False
    try:
        mallopt = ctypes.CDLL(name).mallopt
    except (OSError, AttributeError):
        return False
    return mallopt(M_MMAP_THRESHOLD, THRESHOLD) == 1
