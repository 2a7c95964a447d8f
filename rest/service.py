"""Running the API under uvicorn in the running loop (`start_server`: tests and embedding);
`ladle rest` serves it from worker processes (`rest.cli`, `runtime.workers`)."""

from __future__ import annotations

from rest.app import create_app
from rest.config import DEFAULT_PORT, RestConfig
from runtime.serve import RunningServer, start_app


async def start_server(
    config: RestConfig,
    *,
    host: str = "127.0.0.1",
    port: int = DEFAULT_PORT,
    log_level: str = "warning",
) -> RunningServer:
    """Serve on host:port (0 picks a free port); returns once connections are accepted."""
    return await start_app(
        create_app(config), host=host, port=port, name="REST", log_level=log_level
    )
