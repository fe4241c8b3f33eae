"""Two API keys on the real embedded engine: what one key's requests cached, the other's never reuse.

Key A sends a prompt; key B then sends the very same prompt. B's prompt is tokenized again (the tokenize cache's
misses move: A's runs are not B's hits), goes to a slot A did not leave (its `cached_tokens` is 0), and the child
runs without its shared RAM prompt cache. A's own next turn still reuses its slot.
"""

from __future__ import annotations

import pytest

from tests.embedded import embedded_server
from tests.server import prometheus_values

pytestmark = pytest.mark.slow

KEYS = ("key-A-0123456789", "key-B-0123456789")
PROMPT = [{"role": "user", "content": "Only key A knows this sentence about the quokka and the pangolin."}]


def tokenize_misses(server) -> float:
    page = server.http(headers={"Authorization": f"Bearer {KEYS[1]}"}).get("/metrics/prometheus").text
    return prometheus_values(page, "maya:tokenize_cache_misses")["maya:tokenize_cache_misses_total"]


def test_one_keys_prompt_is_nothing_another_key_reuses():
    with embedded_server(slots=2, api_keys=KEYS) as server:
        a, b = server.client(api_key=KEYS[0]), server.client(api_key=KEYS[1])
        a.chat.completions.create(model="m", messages=PROMPT, max_tokens=4, temperature=0)
        again = a.chat.completions.create(model="m", messages=PROMPT, max_tokens=4, temperature=0)
        assert again.usage.prompt_tokens_details.cached_tokens > 0  # A reuses its own slot

        before = tokenize_misses(server)
        probe = b.chat.completions.create(model="m", messages=PROMPT, max_tokens=4, temperature=0)

        assert probe.usage.prompt_tokens_details.cached_tokens == 0
        assert probe.usage.prompt_tokens == again.usage.prompt_tokens
        assert tokenize_misses(server) > before  # B's runs were not found in A's entries
        assert server.engine.process.options.cache_ram_mib == 0  # the child's shared RAM cache is off
