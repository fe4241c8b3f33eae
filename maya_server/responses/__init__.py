"""OpenAI's Responses API: request validation, conversion, structured output and serving."""
