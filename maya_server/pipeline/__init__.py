"""The pipeline core: the neutral conversation, the events it becomes, and the generation service between them.

Nothing here knows HTTP, an API's wire format, or the CLI's configuration.
"""
