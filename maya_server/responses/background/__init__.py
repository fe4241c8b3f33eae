"""A background response's generation as its worker runs it, here or on the replica that took the task over.

`worker_generation.py` is what a worker runs (`in_worker`: the images fetched and the generation prepared in the
worker, then generated); `resumable.py` rebuilds a task taken over from a replica that stopped (`Resumer`: the
request validated again, converted against its pinned history, its assembler restored where the log says the task
stood). The job managers, event logs and leases that run these are `responses/jobs/`. It may import
`responses/request/`, `conversion/`, `assembly/`, `persistence/`, `jobs/`, `store/` and the layers below
`responses/`; nothing of `responses/` imports it but the routes (`in_worker`), and the composition root (`app.py`)
gives the job manager its `Resumer`.
"""
