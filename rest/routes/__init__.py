"""The endpoints, one module per area; each exposes `ROUTES`."""

# Nothing is re-exported: the modules are the public surface (imported by their full name).
__all__: list[str] = []
