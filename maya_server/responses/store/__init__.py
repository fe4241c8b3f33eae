"""The response store: where finished responses are kept for `previous_response_id`, retrieve and input_items.

`interface.py` is what the Responses service needs of a store; two backends implement it: `memory.py` (this
process's memory, over the synchronous bounded store of `core.py`) and `redis.py` (one Redis shared by a fleet,
with its scripts in `redis_lua.py` and `redis_upkeep_lua.py`). Around them the byte format both keep
(`packing.py`), the Redis connection and its refusals (`redis_link.py`), what Redis's own settings will do to it
(`redis_config.py`), the engine replicas' shared affinity kept beside it (`redis_affinity.py`) and the choice of
backend from `--store` (`opening.py`). It may import `responses/settings.py`, `util/` and `errors` and nothing
else of `responses/`: the API's request, conversion and assembly sit above it, and `responses/jobs/` (whose Redis
logs use its link) imports it, never the reverse.
"""
