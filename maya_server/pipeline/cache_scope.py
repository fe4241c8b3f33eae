"""Whose cached prompts and answers a request may use: its API key's own, or everyone's.

Why: every cache of prompt or answer content is a channel. A hit that shortens
a prompt (the spelling memory), a count (`cached_tokens`, a metric's hits) or a
prefill that took less time says that *someone* sent that text recently, so a
key that can hit another key's entries can test guesses about its traffic
("…hunter2?"). OpenAI does not share prompt caches between organisations; Maya
does not share them between API keys: each request carries a cache scope, the
owner scope its key is stored under (`http/auth.owner_of`), and every cache
Maya keeps of prompt or answer content is keyed by it (the spelling memory, the
embedded engine's tokenize cache, the llama-server slot records), while the
engine's own prefix cache is told the scope as a salt (`cache_salt`).

`prompt_cache_isolation` chooses: `per-key` (the default) scopes by key once
two or more keys are configured; `shared` (or a server with no key or one key:
a single tenant) puts every request in one scope. `docs/pending-isolation.md`
says what each engine isolates, what it costs, and the timing channel left.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from enum import Enum

SHARED_SCOPE = ""
"""The one scope of a server whose requests share their caches."""
SALT_KEY = b"maya/prompt-cache-salt/v1"
"""The HMAC key the engine's salt is derived with: it separates the salt from the owner hash the store uses, so
the value an engine sees (and may log) is never one Maya uses for anything else."""


class PromptCacheIsolation(str, Enum):
    PER_KEY = "per-key"
    SHARED = "shared"


def isolates(isolation: str, api_keys: tuple[str, ...]) -> bool:
    """Whether requests get a scope per key: `per-key` with two or more keys (one key is one tenant)."""
    return PromptCacheIsolation(isolation) is PromptCacheIsolation.PER_KEY and len(set(api_keys)) > 1


def cache_salt(scope: str) -> str | None:
    """The salt the engine's prefix cache is told for `scope` (None: shared): an HMAC-SHA-256 of the owner scope,
    itself a hash of the key, so the salt never is the key nor lets anyone recover it; 256 bits, base64url
    without padding (43 characters, what vLLM asks of a salt)."""
    if scope == SHARED_SCOPE:
        return None
    digest = hmac.new(SALT_KEY, scope.encode("utf-8"), hashlib.sha256).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")
