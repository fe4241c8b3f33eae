"""A validated Responses request → the neutral `Conversation` and the generation settings (`convert.py`).

Responses history is a flat list of items, the neutral conversation a list of turns: here items become turns
(an assistant's reasoning, text and calls together, each call's result after it), `instructions` a system
message, and the request's sampling and output format the pipeline's settings. It may import
`responses/request/` and the layers below `responses/` (`neutral/`, the pipeline's settings, the engine's
defaults, `structured/`, `util/`, `errors`), nothing else of `responses/`. The endpoints
(`responses/endpoints/routes.py`) and a background task taken over from another replica
(`responses/background/resumable.py`) import it.
"""
