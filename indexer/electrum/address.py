"""Server URLs: `tcp://host:port`, `ssl://` or `tls://host:port`, `ws://host:port/path`,
`wss://host:port/path`. A missing port takes the conventional mainnet one."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal
from urllib.parse import urlsplit

Scheme = Literal["tcp", "tls", "ws", "wss"]

DEFAULT_PORTS: dict[Scheme, int] = {"tcp": 50001, "tls": 50002, "ws": 50003, "wss": 50004}
_SCHEMES: dict[str, Scheme] = {"tcp": "tcp", "ssl": "tls", "tls": "tls", "ws": "ws", "wss": "wss"}


@dataclass(frozen=True, slots=True)
class ServerAddress:
    scheme: Scheme
    host: str
    port: int
    path: str = ""  # WebSocket only

    @classmethod
    def parse(cls, url: str) -> ServerAddress:
        """Parse a server URL; raises ValueError naming what is wrong."""
        parts = urlsplit(url.strip())
        scheme = _SCHEMES.get(parts.scheme.lower())
        if scheme is None:
            raise ValueError(f"{url!r}: scheme must be one of tcp, ssl, tls, ws, wss")
        host = parts.hostname
        if not host:
            raise ValueError(f"{url!r}: no host")
        try:
            port = parts.port
        except ValueError:
            raise ValueError(f"{url!r}: invalid port") from None
        if parts.query or parts.fragment or parts.username or parts.password:
            raise ValueError(f"{url!r}: query, fragment and credentials are not allowed")
        path = parts.path
        if scheme in ("tcp", "tls"):
            if path not in ("", "/"):
                raise ValueError(f"{url!r}: a {scheme} server URL has no path")
            path = ""
        return cls(scheme, host, DEFAULT_PORTS[scheme] if port is None else port, path)

    @property
    def secure(self) -> bool:
        return self.scheme in ("tls", "wss")

    @property
    def websocket(self) -> bool:
        return self.scheme in ("ws", "wss")

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}:{self.port}{self.path}"

    def __str__(self) -> str:
        return self.url
