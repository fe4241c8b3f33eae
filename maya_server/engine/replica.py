"""One engine replica behind a replica set: its `UpstreamEngine`, its load, its identity, its way back.

A replica is out once a request to it failed (its `UpstreamHealth` says so:
it could not be reached, timed out or broke its stream; a refusal of one
request does not count). While out it gets no requests and a background task
asks it, every `replica_probe_s`, who it is (`/v1/models`, and `/props` on
llama-server), the question it answered at start-up; when it answers as the
same model it is back in, with what a restart may have changed (llama-server
draws a new image marker each start) taken over. A probe, not a request, finds
it back: no user's request is spent on an engine that may still be down.

Its identity is what two replicas of one model share: the model's name
(the last part of its path, since two hosts may keep one file in different
directories), llama-server's `meta` facts (vocabulary, parameter count, file
size, quantisation; not `n_ctx`, which is each one's own setting) and its chat
template. The set refuses replicas whose identities differ.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import replace
from pathlib import PurePosixPath

import httpx

from ..errors import EngineOptionError, UpstreamError
from .upstream import UpstreamEngine, UpstreamOptions
from .upstream_probe import model_card, probe_upstream

log = logging.getLogger("maya.engine")

IDENTITY_META = ("vocab_type", "n_vocab", "n_ctx_train", "n_embd", "n_params", "size", "ftype")
"""llama-server's `/v1/models` `meta` facts that belong to the model file, not to the server's settings."""


class Replica:
    def __init__(self, engine: UpstreamEngine, options: UpstreamOptions, identity: dict) -> None:
        self.engine = engine
        self.options = options
        self.identity = identity
        self.in_flight = 0
        """Maya's streams on it now."""
        self.routed = 0
        """Requests sent to it so far."""
        self._probe: asyncio.Task | None = None

    @classmethod
    def connect(cls, options: UpstreamOptions) -> "Replica":
        """Meet the engine as a single upstream is met (an `EngineOptionError` naming `url` or `tokenizer_dir` if
        it cannot be), and learn its identity."""
        engine = UpstreamEngine.connect(options)
        with _client(options) as client:
            try:
                identity = model_identity(client, engine.info.chat_template)
            except UpstreamError as exc:
                raise EngineOptionError("url", f"{exc.message} at {engine.health.url}") from None
        return cls(engine, options, identity)

    @property
    def url(self) -> str:
        """The URL without credentials (`public_url`): what status, logs and metric labels show."""
        return self.engine.health.url

    @property
    def up(self) -> bool:
        return self.engine.health.last_ok is not False

    @property
    def probing(self) -> bool:
        return self._probe is not None and not self._probe.done()

    def watch(self, interval: float) -> None:
        """Probe the replica every `interval` seconds until it is back; at most one probe task runs per replica.
        Called on the event loop when the replica was taken out."""
        if not self.probing:
            self._probe = asyncio.get_running_loop().create_task(self._watch(interval))

    async def _watch(self, interval: float) -> None:
        while not self.up:
            await asyncio.sleep(interval)
            if self.up:
                break  # a stream that was already running on it ended well
            try:
                await asyncio.to_thread(self._recheck)
            except UpstreamError as exc:
                self.engine.health.checked(False, exc.message)
                continue
            self.engine.health.checked(True)
            log.info("replica %s is back", self.url)

    def _recheck(self) -> None:
        """Ask the replica who it is (in a thread: httpx's blocking client, as at start-up); raise `UpstreamError`
        unless it answers as the same model. Its new facts replace the old (the model name sent stays)."""
        with _client(self.options) as client:
            info = probe_upstream(client)
            identity = model_identity(client, info.chat_template)
        if identity != self.identity:
            raise UpstreamError("it came back serving another model")
        self.engine.info = replace(info, model=self.engine.info.model)

    def stop_watching(self) -> None:
        if self._probe is not None:
            self._probe.cancel()

    def __repr__(self) -> str:
        return f"Replica({self.url}, {'up' if self.up else 'out'}, {self.in_flight}/{self.engine.slots} busy)"


def _client(options: UpstreamOptions) -> httpx.Client:
    headers = {"Authorization": f"Bearer {options.key}"} if options.key else {}
    timeout = httpx.Timeout(options.connect_timeout, read=options.read_timeout)
    return httpx.Client(base_url=options.url, timeout=timeout, headers=headers)


def model_identity(client: httpx.Client, chat_template: str | None) -> dict:
    """What must be the same on every replica of one model (see the module's docstring)."""
    card = model_card(client)
    name = card.get("id") if isinstance(card.get("id"), str) else None
    meta = card.get("meta") if isinstance(card.get("meta"), dict) else {}
    return {"model": PurePosixPath(name).name if name else None,
            **{key: meta[key] for key in IDENTITY_META if key in meta},
            "chat_template": chat_template}
