"""Background responses (`background: true`): admission, workers, the lifecycle, event logs and their readers.

`manager.py` is the job manager of one process (`JobManager`: admission, workers, records, the one-way lifecycle)
and `redis.py` the one a fleet shares on Redis (`RedisJobManager`: leases, fencing, taking over a stopped replica's
tasks and handing them over at shutdown; its scripts in `redis_lua.py`, what a take-over carries and how a task
without an owner ends in `handover.py`). A job's events are kept in an event log: `event_log.py` (the log's contract and the memory log)
and `event_log_redis.py` (a Redis Stream any replica reads). `over_http.py` is the HTTP side: creating a job and
streaming its events to readers. It may import `responses/store/` (the Redis link, the store interface),
`responses/settings.py`, `responses/assembly/assembler.py` and `responses/persistence/stored_turn.py` (a job
assembles and saves its response like a foreground one), and the layers below `responses/`; the API's routes,
records and resources import it, never the reverse.
"""
