"""The REST data API over the SQLite index (`/tokenpool`, `/dex`, `/health`, `/metrics`,
`/openapi.json`, `/docs`): `rest.app.create_app(rest.config.RestConfig(...))`. See docs/api.md."""

# Nothing is re-exported: the modules are the public surface (imported by their full name).
__all__: list[str] = []
