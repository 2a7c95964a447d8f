"""The data API's settings: one immutable value built by the CLI, `ladle up` or a test."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from rest.index_tokens import MAINNET_USD_FEED, IndexRegistry, IndexUsdOracle
from rest.tokens import TOKEN_ID, NoUsdOracle, TokenRegistry, UsdOracle

DEFAULT_DB = Path("data/index.sqlite")
DEFAULT_PORT = 8000
DEFAULT_RATE_LIMIT = 600  # requests per client per minute (token bucket, burst = the same)

# The chain's tip height as the follower sees it (None while unknown). `ladle up` passes the
# follower's view so /health can report the lag in blocks and "synced" needs no guessing.
ChainTipSource = Callable[[], Awaitable[int | None]]


@dataclass(frozen=True, slots=True)
class RestConfig:
    db_path: Path | str = DEFAULT_DB  # stored as a Path
    # Requests per client per minute; 0 disables the limit.
    rate_limit: int = DEFAULT_RATE_LIMIT
    # The bucket table file every worker of the server shares (`rest.ratelimit.shared_table`);
    # None: this process's own.
    rate_table: Path | None = None
    # Behind a reverse proxy, take the client from the first X-Forwarded-For address.
    trust_forwarded: bool = False
    cors_origins: tuple[str, ...] = ("*",)
    readers: int = 4  # read-only SQLite connections
    poll_interval: float = 0.5  # seconds between checks of the index tip
    # Without a chain tip source, the index counts as synced up to "now" while its tip block is
    # at most this old (seconds); an older tip means the indexer is behind or stopped. 0: never.
    stale_after: int = 7200
    max_age: int = 5  # Cache-Control max-age of data answers, seconds
    gzip_min_size: int = 1024  # bodies at least this long are gzipped for clients that accept it
    cache_entries: int = 4096  # answers kept (LRU; a new index version invalidates them all)
    cache_bytes: int = 128 << 20  # ... and at most this many bytes of them
    series_tokens: int = 256  # tokens whose hourly candle series stay in memory (LRU)
    # Recompute the token list and extend the busiest tokens' candle series after each block,
    # in the background (off: everything is computed on first use).
    warm: bool = True
    # CashAddr prefix of owner addresses; None: the network of the index's genesis block.
    address_prefix: str | None = None
    # Token symbols and metadata: by default the index's own registry tables (bound to db_path).
    registry: TokenRegistry = field(default_factory=IndexRegistry)
    # USD figures: by default the indexed BCH/USD oracle feed `usd_feed` (64-hex category,
    # display order); usd_feed=None turns them off (every *_usd field null).
    usd: UsdOracle = field(default_factory=IndexUsdOracle)
    usd_feed: str | None = MAINNET_USD_FEED
    chain_tip: ChainTipSource | None = None
    clock: Callable[[], float] = time.time
    # Serve GET /bench/ceiling (a trivial endpoint: the benchmark's ceiling). Off by default.
    bench_ceiling: bool = False
    # The explorer's view of the other services (router, broadcast API, Electrum WebSocket,
    # devnet wallets), read on each /explorer/config.json; None: a data-only explorer.
    explorer_env: Callable[[], Mapping[str, object]] | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "db_path", Path(self.db_path))
        if self.usd_feed is not None and not TOKEN_ID.match(self.usd_feed):
            raise ValueError("usd_feed must be a 64-hex token category (or None)")
        if isinstance(self.registry, IndexRegistry) and self.registry.db_path is None:
            object.__setattr__(self, "registry", IndexRegistry(self.db_path))
        if isinstance(self.usd, IndexUsdOracle) and self.usd.category is None:
            usd = (
                NoUsdOracle()
                if self.usd_feed is None
                else IndexUsdOracle(self.usd_feed, self.db_path)
            )
            object.__setattr__(self, "usd", usd)
        if self.rate_limit < 0:
            raise ValueError("rate_limit must be >= 0 (0 disables it)")
        if self.readers < 1:
            raise ValueError("readers must be >= 1")
        if self.poll_interval <= 0:
            raise ValueError("poll_interval must be > 0")
        if self.stale_after < 0 or self.max_age < 0 or self.gzip_min_size < 0:
            raise ValueError("stale_after, max_age and gzip_min_size must be >= 0")
        if self.cache_entries < 0 or self.cache_bytes < 0 or self.series_tokens < 1:
            raise ValueError("cache_entries, cache_bytes must be >= 0 and series_tokens >= 1")
