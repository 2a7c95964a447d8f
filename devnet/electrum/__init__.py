"""The Electrum Cash protocol server of a devnet node (TCP and WebSocket, JSON-RPC 2.0)."""

# Nothing is re-exported: the modules are the public surface (imported by their full name).
__all__: list[str] = []
