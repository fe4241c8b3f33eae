"""Image inputs: address policy, fetching, decoding and encoding, bounded per image, per request and per server.

`loader.ImageLoader` is the entry point; it takes its limits as arguments.
"""
