"""OpenAI's Responses API: request validation, conversion, structured output and serving.

A request flows one way through its rooms, each a sub-package whose `__init__.py` says what it may import:
`request/` parses and validates the `POST /v1/responses` body; `conversion/` turns it into the neutral conversation
and settings the pipeline generates from; `assembly/` turns the pipeline's events into stream events and the
response object; `persistence/` is the store's part in one response (the history it continues, its save) and
`store/` the store's backends; `jobs/` runs background responses (admission, workers, event logs, leases) and
`background/` is their generation in a worker and their rebuild on another replica; `endpoints/` holds the HTTP
routes and where a response is found. Beside them `settings.py` (the `MAYA_GLM_RESPONSES_*` settings) and
`metrics.py` (the store's and the jobs' Prometheus collectors).
"""
