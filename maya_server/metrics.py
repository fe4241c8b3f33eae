"""Prometheus metrics, one registry per app (no global state).

Labels carry routes, statuses and finish reasons only: never a credential, a
model input or generated text.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120)


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.requests = Counter("maya:http_requests", "HTTP requests answered", ["route", "status"], registry=r)
        self.request_seconds = Histogram(
            "maya:http_request_duration_seconds", "Time to the end of the response", ["route"],
            buckets=LATENCY_BUCKETS, registry=r,
        )
        self.prompt_tokens = Counter("maya:prompt_tokens", "Prompt tokens sent to the engine", registry=r)
        self.cached_tokens = Counter("maya:cached_prompt_tokens", "Prompt tokens reused from the KV cache", registry=r)
        self.generated_tokens = Counter("maya:generated_tokens", "Tokens generated", registry=r)
        self.generations = Counter("maya:generations", "Finished generations", ["finish_reason"], registry=r)
        self.constrained_generations = Counter(
            "maya:constrained_generations", "Generations sent to the engine held to a grammar (structured output, "
            "a required call)", registry=r)
        self.first_token_seconds = Histogram(
            "maya:time_to_first_token_seconds", "From admission to the first generated token",
            buckets=LATENCY_BUCKETS, registry=r,
        )
        self.queue_wait_seconds = Histogram(
            "maya:engine_queue_wait_seconds", "Time spent waiting for an engine slot",
            buckets=LATENCY_BUCKETS, registry=r,
        )
        self.queue_waiting = Gauge("maya:engine_queue_waiting", "Requests waiting for an engine slot", registry=r)
        self.slots_busy = Gauge("maya:engine_slots_busy", "Engine slots in use", registry=r)
        self.slots_total = Gauge("maya:engine_slots", "Engine slots", registry=r)
        self.queue_rejections = Counter("maya:engine_queue_rejections", "Requests refused because the queue was full", registry=r)
        self.images = Counter("maya:images", "Images fetched or decoded and handed to the engine", ["source"], registry=r)
        self.image_bytes = Counter("maya:image_bytes", "Bytes of image inputs read (fetched bodies, decoded data URLs)", registry=r)
        self.image_rejections = Counter("maya:image_rejections", "Image inputs refused", ["reason"], registry=r)
        self.image_fetches = Gauge("maya:image_fetches", "Image fetches in progress", registry=r)
        self.image_memory_bytes = Gauge("maya:image_memory_bytes",
                                        "Image bytes held while images load (fetched bodies, decoded pixels)",
                                        registry=r)
        self.image_memory_limit_bytes = Gauge("maya:image_memory_limit_bytes",
                                              "The most image bytes held at once (image_server_bytes)", registry=r)
        self.image_seconds = Histogram("maya:image_load_seconds", "Fetching and decoding one request's images",
                                       buckets=LATENCY_BUCKETS, registry=r)

    def render(self) -> bytes:
        return generate_latest(self.registry)
