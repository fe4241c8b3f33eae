"""The neutral vocabulary every layer shares: the conversation a request becomes and the events a generation yields.

It imports nothing of Maya's but errors, so engines, families, images and the APIs can all depend on it.
"""
