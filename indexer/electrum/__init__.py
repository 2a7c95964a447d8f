"""Electrum Cash client: transports (TCP, TLS, WS, WSS), one negotiated connection, failover
across servers with health scores, Rostrum capability detection with the Fulcrum fallback, and
the typed calls the indexer makes (`ElectrumClient`)."""

from indexer.electrum.address import ServerAddress
from indexer.electrum.capabilities import Capabilities
from indexer.electrum.client import ElectrumClient
from indexer.electrum.connection import ElectrumConnection
from indexer.electrum.errors import (
    BlockChanged,
    ElectrumClientError,
    ElectrumConnectionError,
    ElectrumError,
    ElectrumProtocolError,
    ElectrumTimeout,
    GenesisCoinbase,
    NotSupported,
    ServerBusy,
    UnknownTransaction,
    UnsupportedMethod,
)
from indexer.electrum.health import Backoff, ServerHealth
from indexer.electrum.pool import ElectrumPool
from indexer.electrum.results import HeaderNotice, Unspent, UtxoInfo, scripthash
from indexer.electrum.transport import ssl_context

__all__ = [
    "Backoff",
    "BlockChanged",
    "Capabilities",
    "ElectrumClient",
    "ElectrumClientError",
    "ElectrumConnection",
    "ElectrumConnectionError",
    "ElectrumError",
    "ElectrumPool",
    "ElectrumProtocolError",
    "ElectrumTimeout",
    "GenesisCoinbase",
    "HeaderNotice",
    "NotSupported",
    "ServerAddress",
    "ServerBusy",
    "ServerHealth",
    "UnknownTransaction",
    "Unspent",
    "UnsupportedMethod",
    "UtxoInfo",
    "scripthash",
    "ssl_context",
]
