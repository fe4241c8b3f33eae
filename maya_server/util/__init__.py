"""Small helpers every layer may use: bounded JSON parsing, request validation with OpenAI error paths, compact
dumps, the `--store` URL's check (`store_url.py`)."""
