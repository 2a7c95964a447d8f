"""The Electrum Cash protocol server of a devnet node (TCP and WebSocket, JSON-RPC 2.0)."""
