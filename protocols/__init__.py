"""DeFi protocols on Bitcoin Cash, as pure functions over `bch` values (no I/O)."""

# Nothing is re-exported: the modules are the public surface (imported by their full name).
__all__: list[str] = []
