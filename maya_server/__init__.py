"""Maya: open-weight models behind OpenAI's APIs."""

__version__ = "0.1.0"
