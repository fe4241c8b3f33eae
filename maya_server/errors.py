"""Every error Maya reports, as one hierarchy rendered in one place.

    MayaError                      status, type, param, code, message
    ├── InvalidRequestError        400 invalid_request_error (param names the field)
    │   ├── ContextLengthExceeded  400 code=context_length_exceeded
    │   └── ImageError             400 invalid_image (an image that cannot be fetched, decoded or accepted)
    ├── AuthenticationError        401 invalid_api_key
    ├── NotFoundError              404
    ├── ConflictError              409
    ├── GoneError                  410 (a stream cursor whose events are no longer retained)
    ├── PermissionDeniedError      403 (a cross-site Origin, a Host that does not name this server)
    ├── StorageCapacityError       413 a snapshot too large for the response store
    ├── PayloadTooLargeError       413 a request body over the size limit
    │   └── PromptTooLarge         413 prompt_too_large (its text took past the tokenize deadline to split)
    ├── UnsupportedMediaTypeError  415 a POST body that is not application/json
    ├── RateLimitError             429 (a bounded queue, or the image memory pool, is full)
    ├── ToolPolicyError            500 invalid_tool_call (the model called an undeclared or disallowed tool)
    ├── StructuredOutputError      500 invalid_structured_output (the output broke text.format or a strict tool's schema)
    ├── JobTimeoutError            500 job_timeout (a background response passed its deadline)
    ├── EventLimitError            500 event_too_large (a background response made an event too large to retain)
    ├── EngineError                500 server_error (the engine failed mid-generation)
    │   └── UpstreamError          502 upstream_error (an upstream engine failed or answered nonsense)
    │       ├── UpstreamUnavailable    503 upstream_unavailable (cannot connect, timed out)
    │       └── UpstreamRejected       400/429 (the upstream refused the request itself, e.g. its context)
    └── ServiceUnavailableError    503
        ├── McpServerGone          503 mcp_server_unavailable (an MCP server given up for good)
        └── StoreUnavailableError  503 store_unavailable (the shared response store cannot be reached in time)

`http/errors.py` renders them as OpenAI's `{"error": {...}}`; anything else
becomes a generic 500 whose message never reaches the client.

Beside the tree, the exceptions that never reach a client as an API error:

    ConfigError         a bad setting, naming it: the CLI prints it and exits 2
    EngineStartError    llama-server did not come up: its signal, log tail and what to try (start-up: exit 2;
                        later: a restart)
    BackendUnavailable  `MAYA_LLAMA_SERVER_BACKENDS` names a backend the build cannot have (the build stops)
    EngineOptionError   an engine cannot start with a value it was given: which option, the value, what is wrong
                        (facts only: `engine_setup` words it as the ConfigError naming the setting)
    ClientGone          the client disconnected: the work stops, nothing is answered
    ShuttingDown        the server began shutting down under an open stream: it ends with a farewell
    UnsupportedVocabulary  a GGUF vocabulary Maya cannot decode (start-up: exit 2)
    TooDeep             JSON nested past the depth limit (a ValueError, refused like malformed JSON)
    JobCleanupError     shutdown could not confirm that every background job released the engine
    EventTooLarge       one event over a background log's byte limit: the job fails with EventLimitError
    StructuredOutputRejected  why an output fails validation, raised from inside the schema walk (the only
                        way to stop jsonschema midway); `StructuredValidator.validate` turns it into its verdict
    BadImage            an image or image URL that cannot be used, found where its param is unknown: the
                        image loader raises it again as an ImageError at the image's param
    DecodeCancelled     the request went away while its image was being scaled: the decode thread stops
"""

from __future__ import annotations


class MayaError(Exception):
    status = 500
    type = "server_error"
    code: str | None = None

    def __init__(self, message: str, *, param: str | None = None, code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.param = param
        if code is not None:
            self.code = code

    def body(self) -> dict:
        return {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}

    def headers(self) -> dict[str, str]:
        """HTTP headers the error's response carries besides its body."""
        return {}


class InvalidRequestError(MayaError):
    status = 400
    type = "invalid_request_error"


class ContextLengthExceeded(InvalidRequestError):
    code = "context_length_exceeded"


class AuthenticationError(MayaError):
    status = 401
    type = "invalid_request_error"
    code = "invalid_api_key"


class NotFoundError(MayaError):
    status = 404
    type = "invalid_request_error"
    code = "not_found"


class ConflictError(MayaError):
    status = 409
    type = "invalid_request_error"
    code = "conflict"


class GoneError(MayaError):
    status = 410
    type = "invalid_request_error"
    code = "gone"


class PermissionDeniedError(MayaError):
    status = 403
    type = "invalid_request_error"
    code = "permission_denied"


class PayloadTooLargeError(MayaError):
    status = 413
    type = "invalid_request_error"
    code = "request_too_large"


class PromptTooLarge(PayloadTooLargeError):
    """A prompt whose text took the tokenizer past its deadline: what it costs is the request's, so it is the
    client's to shorten (a 413, which clients do not retry as they would a 408 or a 503)."""

    code = "prompt_too_large"


class UnsupportedMediaTypeError(MayaError):
    status = 415
    type = "invalid_request_error"
    code = "unsupported_media_type"


class StorageCapacityError(MayaError):
    status = 413
    type = "invalid_request_error"
    code = "storage_capacity_exceeded"


class RateLimitError(MayaError):
    """Retryable pressure: the response says when to retry (`Retry-After`, seconds)."""

    status = 429
    type = "rate_limit_error"
    code = "rate_limit_exceeded"

    def __init__(self, message: str, *, param: str | None = None, code: str | None = None,
                 retry_after: int = 1) -> None:
        super().__init__(message, param=param, code=code)
        self.retry_after = retry_after

    def headers(self) -> dict[str, str]:
        return {"Retry-After": str(self.retry_after)}


class EngineError(MayaError):
    status = 500
    type = "server_error"
    code = "engine_error"


class ServiceUnavailableError(MayaError):
    status = 503
    type = "server_error"
    code = "service_unavailable"


class UpstreamError(EngineError):
    """An upstream engine (vLLM, SGLang, llama-server over HTTP) failed; its messages never carry its key."""

    status = 502
    code = "upstream_error"


class UpstreamUnavailable(UpstreamError):
    status = 503
    code = "upstream_unavailable"


class UpstreamRejected(UpstreamError):
    """The upstream refused this request (its own context limit, a bad parameter, overload): the client's
    problem or a retryable one, so it keeps the client-facing status and type rather than a 5xx."""

    def __init__(self, message: str, *, status: int, type: str, code: str, param: str | None = None) -> None:
        super().__init__(message, param=param, code=code)
        self.status = status
        self.type = type


class ToolPolicyError(MayaError):
    status = 500
    type = "server_error"
    code = "invalid_tool_call"


class StructuredOutputError(MayaError):
    """What the publish gate sends instead of an output it held and found invalid."""

    status = 500
    type = "server_error"
    code = "invalid_structured_output"


class JobTimeoutError(MayaError):
    code = "job_timeout"


class EventLimitError(MayaError):
    code = "event_too_large"


class ConfigError(ValueError):
    """A bad configuration, naming the field."""

    def __init__(self, name: str, message: str) -> None:
        super().__init__(f"{name}: {message}")
        self.name = name


class EngineOptionError(Exception):
    """An engine cannot start with one of the values it was given. Why not a `ConfigError`: the engines take
    plain option bags (`EmbeddedOptions`, `UpstreamOptions`, `ReplicaSetOptions`) and know nothing of how the
    operator set them (a flag, a config-file key, an environment variable), so they raise facts and
    `engine_setup`, which knows the settings, names the setting.

    `option`: the field of the engine's options whose value failed (`model`, `mmproj`, `tokenizer_dir`, `url`,
    `replicas`), or None when no one value is at fault (the engine's own binary, a child that answers oddly).
    `problem`: what is wrong, as a fact about the engine. `value`: the value, where one is at fault.
    `reason`: a short name for a refusal the edge words its own way (e.g. with what to change), else ""."""

    def __init__(self, option: str | None, problem: str, *, value: object = None, reason: str = "") -> None:
        super().__init__(problem)
        self.option = option
        self.problem = problem
        self.value = value
        self.reason = reason


class BackendUnavailable(RuntimeError):
    """`MAYA_LLAMA_SERVER_BACKENDS` names a backend whose toolchain is missing, or none Maya knows."""


class EngineStartError(RuntimeError):
    """llama-server did not come up; the message carries its last log lines, `returncode` its exit status when it
    died while loading (negative: the signal), so the edge can add what to try."""

    def __init__(self, message: str, *, returncode: int | None = None) -> None:
        super().__init__(message)
        self.returncode = returncode


class ClientGone(Exception):
    """The client disconnected before the work finished."""


class ShuttingDown(Exception):
    """The server began shutting down while a stream with a farewell was open."""


class ImageError(InvalidRequestError):
    code = "invalid_image"

    def __init__(self, message: str, *, param: str | None, reason: str) -> None:
        super().__init__(message, param=param)
        self.reason = reason


class BadImage(ValueError):
    """An image (or its URL) that cannot be used, found where the request's param is not known; the image
    loader raises it again as an `ImageError` at the image's param. `reason` is the metric label."""

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


class DecodeCancelled(Exception):
    """The request went away while its image was being scaled (polled between strips in the worker thread)."""


class McpServerGone(ServiceUnavailableError):
    code = "mcp_server_unavailable"


class StoreUnavailableError(ServiceUnavailableError):
    """The shared response store (Redis) did not connect or answer within its command timeout, or refused the
    command. `reason` says which, for the code that acts on it (never shown): `unreachable` (no connection, no
    answer in time), `oom` (Redis at its `maxmemory`), or a refusal Redis names (`redis_link.py`)."""

    code = "store_unavailable"

    def __init__(self, message: str, *, reason: str = "unreachable", param: str | None = None) -> None:
        super().__init__(message, param=param)
        self.reason = reason


class UnsupportedVocabulary(ValueError):
    """The GGUF's vocabulary is not one we can rebuild; the message says what to give instead."""


class TooDeep(ValueError):
    """JSON nested past the limit (a ValueError, so callers that refuse malformed JSON refuse this too)."""


class JobCleanupError(RuntimeError):
    """Shutdown could not confirm that every job released the engine."""


class EventTooLarge(Exception):
    """One encoded event is larger than a background response's whole event log may hold."""

    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"an event of {size} bytes exceeds the per-task event limit of {limit} bytes")


class StructuredOutputRejected(Exception):
    """Why an output cannot be published. An exception, not a value, because it must stop a jsonschema
    traversal from inside a keyword check; it never leaves `StructuredValidator.validate`."""
