"""Bitcoin Cash primitives: wire formats, scripts, addresses, signing and relay policy.

Pure functions and immutable values only; nothing here performs I/O.
"""

# Nothing is re-exported: the modules are the public surface (imported by their full name).
__all__: list[str] = []
