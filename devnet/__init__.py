"""A local Bitcoin Cash network speaking the Electrum Cash protocol."""

# Nothing is re-exported: the modules are the public surface (imported by their full name).
__all__: list[str] = []
