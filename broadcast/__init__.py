"""The broadcast service: one signed transaction to many nodes at once, their verdicts, a status
record per transaction, and the checks a client can ask for before anything is sent (protection
rules, dry run) or after a failure (diagnosis)."""

# Nothing is re-exported: the modules are the public surface (imported by their full name).
__all__: list[str] = []
