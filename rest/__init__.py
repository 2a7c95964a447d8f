"""The REST data API over the SQLite index (`/tokenpool`, `/dex`, `/health`, `/metrics`,
`/openapi.json`, `/docs`): `rest.app.create_app(rest.config.RestConfig(...))`. See docs/api.md."""
