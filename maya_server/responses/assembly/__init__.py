"""Pipeline events → Responses API stream events and the response object.

`assembler.py` is the `ResponseAssembler`: every wire event, with its sequence number, and the final object come
from one state, so the stream, the JSON answer and the stored copy never disagree; `envelope.py` the fields of a
response object that echo its request. It may import `responses/request/` and the layers below `responses/`
(`neutral/`, the engine's defaults, `structured/`, `errors`), nothing else of `responses/`. The store glue
(`responses/persistence/stored_items.py`, for `new_id`), the job managers (`responses/jobs/`), a task taken over
from another replica (`responses/background/resumable.py`) and the routes import it.
"""
