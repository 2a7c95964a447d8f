"""Bitcoin Cash primitives: wire formats, scripts, addresses, signing and relay policy.

Pure functions and immutable values only; nothing here performs I/O.
"""
