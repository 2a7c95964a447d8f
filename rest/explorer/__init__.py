"""The explorer and the API docs viewer, served by the data API's own process.

Everything here is static files plus one small JSON document (`/explorer/config.json`): the
pages are plain HTML, their scripts ES modules that call the public APIs from the browser (the
data API on this origin, the router over WebSocket, the broadcast API, an Electrum server for a
wallet's coins). The server never sees a private key: signing happens in the page with libauth.

Third-party browser code (Swagger UI, lightweight-charts, libauth) comes from the project's
`node_modules`, installed by `npm ci` from package-lock.json, and is served by `/vendor/…`
from a whitelist: nothing is fetched from a CDN at run time.
"""

from __future__ import annotations

from rest.explorer.routes import ExplorerEnv, explorer_routes

__all__ = ["ExplorerEnv", "explorer_routes"]
