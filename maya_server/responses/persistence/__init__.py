"""The store's part in one response: the history it continues, its save, and why a response is not there.

`stored_turn.py` is the store's part in one `POST /v1/responses` (`StoredTurn`: the continued history opened and
pinned before generation, every refusal first, and the save before the terminal event); `stored_items.py` turns
request input items into the JSON items the store keeps and `input_items` lists, and back; `unstored.py` remembers
recent `store: true` responses that ended without being saved, so that their 404 says why. The backends themselves
are `responses/store/`. It may import `responses/request/`, `responses/assembly/assembler.py` (`new_id`),
`responses/store/interface.py` and the layers below `responses/`, nothing else of `responses/`. The job managers
(`responses/jobs/`), a task taken over from another replica (`responses/background/resumable.py`) and the
endpoints (`responses/endpoints/`: the records, the routes) import it.
"""
