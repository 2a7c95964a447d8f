"""The devnet on a real regtest node: BCHN (`bitcoind`) started by ladle, Fulcrum in front of it
when asked, and the backend that writes the devnet's transactions and blocks through to it."""

# Nothing is re-exported: the modules are the public surface (imported by their full name).
__all__: list[str] = []
