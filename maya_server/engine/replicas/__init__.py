"""Several replicas of one model behind one Maya (`--upstream-url` given more than once), as one `Engine`.

`engine.py` is the `Engine` (`ReplicaSetEngine`); around it one replica with its health check (`replica.py`),
routing by load and prefix (`router.py`, `prefix_affinity.py`), the prefix affinity several Maya replicas share
(`shared_affinity.py`, kept in Redis by the caller's store) and the metrics (`metrics.py`, which read the set
through what it hands them). It may import `engine/upstream/` (each replica is one upstream engine), the engine
boundary and its shared parts (`engine/base.py`, `defaults.py`, `prefill_gate.py`) and `errors`; never
`engine/llama_server/` nor anything above `engine/`. The composition root (`engine_setup.py`, `app.py` for the
shared affinity) imports it.
"""
