"""The endpoints, one module per area; each exposes `ROUTES`."""
