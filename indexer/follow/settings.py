"""An Electrum client's settings in a form another process can take (`ClientSettings`)."""

from __future__ import annotations

import ssl
from dataclasses import dataclass

from indexer.electrum import ElectrumClient
from indexer.electrum.address import ServerAddress
from indexer.electrum.health import Backoff
from indexer.electrum.transport import ssl_context


@dataclass(frozen=True, slots=True)
class ClientSettings:
    """What `ElectrumClient(...)` was given, picklable: TLS as None (the default context) or
    `insecure` (any certificate), the two forms a context can be made again from."""

    servers: tuple[ServerAddress, ...]
    client_name: str
    timeout: float
    connect_timeout: float
    ping_interval: float | None
    max_batch: int
    retries: int
    max_timeouts: int
    backoff: Backoff
    give_up_after: float | None
    max_message: int
    extensions: bool
    genesis_hash: str | None
    insecure_tls: bool

    @classmethod
    def of(cls, client: ElectrumClient) -> ClientSettings | None:
        """`client`'s settings; None when its TLS context cannot be made again elsewhere (one
        verifying against certificates of its own)."""
        ctx = client.ssl_ctx
        if ctx is not None and not (ctx.verify_mode == ssl.CERT_NONE and not ctx.check_hostname):
            return None
        return cls(
            servers=client.servers,
            client_name=client.client_name,
            timeout=client.timeout,
            connect_timeout=client.connect_timeout,
            ping_interval=client.ping_interval,
            max_batch=client.max_batch,
            retries=client.retries,
            max_timeouts=client.max_timeouts,
            backoff=client.backoff,
            give_up_after=client.give_up_after,
            max_message=client.max_message,
            extensions=client.extensions,
            genesis_hash=client.genesis_hash,
            insecure_tls=ctx is not None,
        )

    def client(self) -> ElectrumClient:
        return ElectrumClient(
            self.servers,
            client_name=self.client_name,
            timeout=self.timeout,
            connect_timeout=self.connect_timeout,
            ping_interval=self.ping_interval,
            max_batch=self.max_batch,
            retries=self.retries,
            max_timeouts=self.max_timeouts,
            backoff=self.backoff,
            give_up_after=self.give_up_after,
            ssl_ctx=ssl_context(verify=False) if self.insecure_tls else None,
            max_message=self.max_message,
            extensions=self.extensions,
            genesis_hash=self.genesis_hash,
        )
