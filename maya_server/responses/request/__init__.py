"""The `POST /v1/responses` body, parsed and validated before anything else runs.

`request.py` is the body as a whole (`ResponsesRequest`, `parse_responses_request`: every parameter of OpenAI's
API, those Maya cannot honour refused by name). Its nested collections are parsed by hand, so an error keeps its
full path: `items.py` the `input` (messages, function calls and their outputs, reasoning), `tools.py` the `tools`
and `tool_choice`, `text_format.py` the `text` (output format, verbosity). It may import `structured/`,
`neutral/`, `util/` and `errors`, and nothing else of `responses/`: the conversion, the assembly, the store glue,
the background tasks and the endpoints import it, never the reverse.
"""
