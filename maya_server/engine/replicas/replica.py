"""One engine replica behind a replica set: its `UpstreamEngine`, its load, its identity, its way back.

A replica is out once a request to it failed (its `UpstreamHealth` says so:
it could not be reached, timed out or broke its stream; a refusal of one
request does not count). While out it gets no requests and a background task
asks it, every `replica_probe_s`, who it is (`/v1/models`, and `/props` on
llama-server), the question it answered at start-up; when it answers as the
same model it is back in, with what a restart may have changed (llama-server
draws a new image marker each start) taken over. A probe, not a request, finds
it back: no user's request is spent on an engine that may still be down.

A replica in rotation is checked too (`check_every`): every `replica_check_s` it must
answer `GET /v1/models` within `replica_check_timeout`. An engine that accepts
connections but never answers (a stopped process, a wedged host) fails no request by
itself: without the check it would look healthy while its requests waited for the
read timeout (600 s by default, which a long prefill needs). A failed check takes the
replica out, and every request on it that has heard nothing since the check began
is ended at once: one that had nothing back yet is sent to another replica, as after
a refused connection. A client that gives up before the replica sent anything back
(`abandoned`) has it checked at once. A check answered in time is not evidence that
prompts are processed, only that the process serves: a busy engine still answers it
(llama-server's HTTP threads, vLLM's API server), so queued requests are left alone.

Its identity is what two replicas of one model share: the model's name
(the last part of its path, since two hosts may keep one file in different
directories), llama-server's `meta` facts (vocabulary, parameter count, file
size, quantisation; not `n_ctx`, which is each one's own setting) and its chat
template. The set refuses replicas whose identities differ.
"""

from __future__ import annotations

import asyncio
import logging
from contextlib import suppress
from dataclasses import replace
from pathlib import PurePosixPath
from typing import Callable

import httpx

from ...errors import EngineOptionError, UpstreamError
from ..defaults import REPLICA_CHECK_TIMEOUT_S
from ..upstream.engine import UpstreamEngine, UpstreamOptions
from ..upstream.probe import model_card, probe_upstream

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
        self._checks: asyncio.Task | None = None
        self._check_now: asyncio.Event | None = None
        self.check_timeout = REPLICA_CHECK_TIMEOUT_S
        """Seconds a check or probe may take (`replica_check_timeout`; set by the replica set)."""
        engine.on_abandoned = self.check_soon

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

    def check_every(self, interval: float, on_out: Callable[[], None]) -> None:
        """Check the replica every `interval` seconds while it is in rotation (see the module's docstring);
        `on_out` is called on the event loop when a check takes it out. Called on the event loop."""
        if self._checks is None or self._checks.done():
            self._check_now = asyncio.Event()
            self._checks = asyncio.get_running_loop().create_task(self._check_loop(interval, on_out))

    def check_soon(self) -> None:
        """Check it now, not at the next interval (a client gave up waiting on it)."""
        if self._check_now is not None:
            self._check_now.set()

    async def _check_loop(self, interval: float, on_out: Callable[[], None]) -> None:
        assert self._check_now is not None
        while True:
            with suppress(TimeoutError):
                async with asyncio.timeout(interval):
                    await self._check_now.wait()
            self._check_now.clear()
            if self.up and not self.probing:  # an out replica is the probe's (`watch`)
                if not await self.check():
                    on_out()

    async def check(self) -> bool:
        """Whether the replica answers `GET /v1/models` within `check_timeout`. If not it is out, and requests on
        it that heard nothing since the check began are ended (`UpstreamEngine.fail_silent`)."""
        began = asyncio.get_running_loop().time()
        failure = await self._liveness()
        if not self.up:
            return True  # a request found it out meanwhile: that failure is the record's
        if failure is None:
            self.engine.health.checked(True)
            return True
        self.engine.health.checked(False, failure)
        ended = self.engine.fail_silent(began, f"the upstream engine stopped answering ({failure})")
        log.warning("replica %s failed its check (%s); %d silent request(s) on it ended", self.url, failure, ended)
        return False

    async def _liveness(self) -> str | None:
        """None if the replica answered its check in time, else why not (our words, never the upstream's)."""
        headers = {"Authorization": f"Bearer {self.options.key}"} if self.options.key else {}
        timeout = httpx.Timeout(self.check_timeout)
        try:
            async with httpx.AsyncClient(base_url=self.options.url, timeout=timeout, headers=headers) as client:
                answer = await client.get("/v1/models")
        except httpx.TimeoutException:
            return f"no answer to a check within {self.check_timeout:g}s"
        except httpx.HTTPError:
            return "a check could not reach it"
        return None if answer.status_code == 200 else f"a check got HTTP {answer.status_code}"

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
            began = asyncio.get_running_loop().time()
            try:
                await asyncio.to_thread(self._recheck)
            except UpstreamError as exc:
                self.engine.health.checked(False, exc.message)
                # requests sent while every replica was out wait on it: those that heard nothing are ended
                self.engine.fail_silent(began, f"the upstream engine is not answering ({exc.message})")
                continue
            self.engine.health.checked(True)
            log.info("replica %s is back", self.url)

    def _recheck(self) -> None:
        """Ask the replica who it is (in a thread: httpx's blocking client, as at start-up); raise `UpstreamError`
        unless it answers as the same model. Its new facts replace the old (the model name sent stays)."""
        with _client(self.options, self.check_timeout) as client:
            info = probe_upstream(client)
            identity = model_identity(client, info.chat_template)
        if identity != self.identity:
            raise UpstreamError("it came back serving another model")
        self.engine.info = replace(info, model=self.engine.info.model)

    def stop_watching(self) -> None:
        for task in (self._probe, self._checks):
            if task is not None:
                task.cancel()

    def __repr__(self) -> str:
        return f"Replica({self.url}, {'up' if self.up else 'out'}, {self.in_flight}/{self.engine.slots} busy)"


def _client(options: UpstreamOptions, read_timeout: float | None = None) -> httpx.Client:
    """A blocking client for `options`' engine; `read_timeout` (else the stream's) bounds each answer: a probe of
    an engine that may be wedged must not wait as long as a prefill may take."""
    headers = {"Authorization": f"Bearer {options.key}"} if options.key else {}
    timeout = httpx.Timeout(options.connect_timeout, read=read_timeout or options.read_timeout)
    return httpx.Client(base_url=options.url, timeout=timeout, headers=headers)


def model_identity(client: httpx.Client, chat_template: str | None) -> dict:
    """What must be the same on every replica of one model (see the module's docstring)."""
    card = model_card(client)
    name = card.get("id") if isinstance(card.get("id"), str) else None
    meta = card.get("meta") if isinstance(card.get("meta"), dict) else {}
    return {"model": PurePosixPath(name).name if name else None,
            **{key: meta[key] for key in IDENTITY_META if key in meta},
            "chat_template": chat_template}
