"""Small JSON helpers every layer may use: bounded parsing, request validation with OpenAI error paths, compact dumps."""
