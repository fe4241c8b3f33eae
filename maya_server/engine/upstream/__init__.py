"""The upstream engine: vLLM, SGLang or a llama-server over HTTP, as an `Engine`.

`engine.py` is the `Engine` (`UpstreamEngine`): Maya renders and tokenizes, the server generates. Around it the
wire each server speaks (`wire.py`), the lean per-token HTTP stream (`event_stream.py`) and its decoding into
tokens (`stream.py`), the start-up probe (`probe.py`), health and its metrics (`health.py`) and a llama-server's
slot choice (`slot_choice.py`). It may import the engine boundary and its shared parts (`engine/base.py`,
`defaults.py`, `detokenizer.py`, `prefill_gate.py`), `model/`, `neutral/`, `util/` and `errors`; never another
engine sub-package. `engine/llama_server/` (its child is an upstream on a socket), `engine/replicas/` (one
upstream a replica) and the composition root (`engine_setup.py`) import it.
"""
