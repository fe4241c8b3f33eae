"""The relay bench: Maya in front of a replayed GPU engine (see README.md)."""
