"""The engines' option defaults, each defined once.

Why its own module: the option bags (`EmbeddedOptions`, `UpstreamOptions`,
`LlamaServerOptions`, `ReplicaSetOptions`, the stream's `Endpoint`) and the
settings (`ServerConfig`) all need these, and the settings must take them
without loading an engine (each engine's module is imported only when that
engine is configured, `engine_setup.py`). `DEFAULT_CTX` stays with the engine
boundary (`base.py`), which every engine imports anyway.
"""

from __future__ import annotations

CONNECT_TIMEOUT_S = 5.0
"""Seconds to connect to an upstream engine."""
READ_TIMEOUT_S = 600.0
"""Seconds to wait for an engine's next streamed token (a long prompt's prefill comes first)."""
CACHE_RAM_MIB = 2048
"""llama-server's RAM prompt cache (idle slots' KV kept for reuse across conversations; 0: off)."""
TOKENIZE_CACHE_MIB = 64
"""The embedded engine's cache of prompt text runs' token ids (`TokenCache`)."""
TOKENIZE_TIMEOUT_S = 30.0
"""Seconds the embedded engine waits for llama-server's `/tokenize` of one prompt text run."""
REPLICA_ROUTING = "affinity"
"""How requests are spread over replicas (`replicas/router.py`)."""
AFFINITY_ENTRIES = 131072
"""Prefix blocks (16 prompt tokens each) the affinity table remembers."""
AFFINITY_SHARED_TTL_S = 3600.0
"""Seconds a prompt's tip shared through Redis names its replica (`shared_affinity.py`): the store's own TTL."""
AFFINITY_SHARED_LOOKUP_BLOCKS = 256
"""Block keys (16 tokens each) of a prompt's deep end looked up in Redis: a turn of up to 4k new tokens."""
REPLICA_PROBE_S = 5.0
"""Seconds between checks of a replica taken out after a failure."""
REPLICA_CHECK_S = 5.0
"""Seconds between liveness checks of a replica in rotation: a wedged one is out within this plus the timeout."""
REPLICA_CHECK_TIMEOUT_S = 5.0
"""Seconds a replica has to answer a liveness check (`GET /v1/models`, which a live engine answers at once even
while busy: llama-server's HTTP threads, vLLM's API server) or a probe."""
