"""The Responses API over HTTP: `POST /v1/responses`, and a response as a resource.

`routes.py` answers `POST /v1/responses` (validate, convert, generate, assemble; JSON, SSE, or a background job);
`resources.py` is GET / DELETE `/v1/responses/{id}`, its `input_items` and `POST …/cancel`; `records.py` decides,
once for both, where a response is found (a retained background job record, the store) and what each operation
does with it (`ResponseRecords`). It may import the other rooms of `responses/` (`request/`, `conversion/`,
`assembly/`, `persistence/`, `jobs/`, `store/`, and `background/worker_generation.py`) and the layers below,
`http/` included; none of them imports it. The composition root (`app.py`) mounts its routers and makes its
records.
"""
