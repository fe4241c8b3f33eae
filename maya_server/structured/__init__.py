"""Structured output, a neutral stage both APIs share: output formats, schema checks, the validator and the publish gate.

Chat and Responses import it; neither imports the other.
"""
