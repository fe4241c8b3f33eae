"""Engines: things that turn prompt token ids into generated tokens."""
