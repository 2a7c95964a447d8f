"""The indexer: follows the chain over the Electrum Cash protocol into SQLite and the router's
live pool snapshot."""

# Nothing is re-exported: the modules are the public surface (imported by their full name).
__all__: list[str] = []
