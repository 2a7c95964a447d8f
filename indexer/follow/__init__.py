"""The chain follower: from a chain source (Electrum servers or a BCHN node) into the store,
blocks and mempool.

`Follower` runs the loop (catch up, mirror the mempool, wait for a notification); what it reads
is a `source.ChainSource` (`ElectrumSource`, `BitcoindSource`); the chain
walk with reorg handling is `chain.ChainFollower`, the pipelined block fetching `fetch`, the
mempool mirror (Rostrum listing or the Fulcrum fallback's watched addresses) `mempool`, and the
sync progress and structured logs `progress` and `logs`. The store does the indexing itself, so
nothing here knows a protocol — except the fallback's choice of addresses to watch (the pool
addresses of the snapshot's owners).
"""

from indexer.follow.chain import (
    CASHTOKENS_HEIGHT,
    MAINNET_GENESIS,
    CatchUp,
    ChainFollower,
    default_start_height,
    link_headers,
)
from indexer.follow.fetch import BlockPipeline, FetchedBlock, fetch_block
from indexer.follow.follower import DEFAULT_MEMPOOL_INTERVAL, Follower
from indexer.follow.mempool import MempoolFollower, pool_scripthashes
from indexer.follow.progress import Progress
from indexer.follow.source import ChainSource
from indexer.follow.source_bitcoind import BitcoindSource
from indexer.follow.source_electrum import ElectrumSource
from runtime.logs import configure_logging, fields

__all__ = [
    "CASHTOKENS_HEIGHT",
    "DEFAULT_MEMPOOL_INTERVAL",
    "MAINNET_GENESIS",
    "BitcoindSource",
    "BlockPipeline",
    "CatchUp",
    "ChainFollower",
    "ChainSource",
    "ElectrumSource",
    "FetchedBlock",
    "Follower",
    "MempoolFollower",
    "Progress",
    "configure_logging",
    "default_start_height",
    "fetch_block",
    "fields",
    "link_headers",
    "pool_scripthashes",
]
