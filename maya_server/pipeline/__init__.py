"""The pipeline core: the generation service that takes a neutral conversation through a family and an engine to events.

Nothing here knows HTTP, an API's wire format, or the CLI's configuration.
"""
