"""Stop strings over streamed text: hold back only what could still become a match."""

from __future__ import annotations


class StopStringMatcher:
    """Feed text pieces; get back the text that is safe to publish and whether a stop string was hit.

    The matched stop string and anything after it are never published.
    """

    def __init__(self, stops: tuple[str, ...]) -> None:
        self._stops = tuple(s for s in stops if s)
        self._held = ""
        self.matched = False

    def feed(self, text: str) -> str:
        if not self._stops:
            return text
        buffer = self._held + text
        first = min((i for i in (buffer.find(s) for s in self._stops) if i >= 0), default=-1)
        if first >= 0:
            self.matched = True
            self._held = ""
            return buffer[:first]
        keep = self._longest_partial_suffix(buffer)
        self._held = buffer[len(buffer) - keep :] if keep else ""
        return buffer[: len(buffer) - keep]

    def flush(self) -> str:
        held, self._held = self._held, ""
        return held

    def _longest_partial_suffix(self, buffer: str) -> int:
        best = 0
        for stop in self._stops:
            for size in range(min(len(stop) - 1, len(buffer)), best, -1):
                if stop.startswith(buffer[-size:]):
                    best = size
                    break
        return best
