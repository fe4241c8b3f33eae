"""The embedded engine: llama.cpp's `llama-server`, built by Maya and run as its private child on a GGUF.

`engine.py` is the `Engine` (`LlamaCppEngine`, an upstream engine on the child's Unix socket); around it the
build and its GPU backends (`build.py`, `backends.py`, `vulkan_headers.py`), the checks of a given binary
(`check.py`), the child process (`child.py`), the devices it reports (`devices.py`) and tokenization through it
(`tokenizer.py`). It may import the engine boundary and its defaults (`engine/base.py`, `defaults.py`),
`engine/upstream/` (the wire it speaks to its child), `model/`, `util/` and `errors`; never `engine/replicas/`
nor anything above `engine/`. Only the composition root (`engine_setup.py`) imports it, lazily, when the
embedded engine is configured (the benches and tests aside).
"""
