"""The swap router's pure core: pools (`pools`), route search (`route`), transaction building
(`build`), the safety gate (`gate`), request parsing (`params`), error codes (`errors`) and the
offline `ladle route` / `ladle build` commands (`cli`). No I/O outside `cli`: the WebSocket
daemon calls `route.quote` and `build.build` with its live `PoolBook`."""

from router import native

# First, before any module of the core is imported: the compiled core, where `make` built it.
native.install()

from router.build import BuildResult, build  # noqa: E402
from router.errors import ErrorCode, RouterError  # noqa: E402
from router.params import (  # noqa: E402
    BuildRequest,
    QuoteRequest,
    RouterConfig,
    Side,
    parse_build_params,
    parse_quote_params,
)
from router.pools import BCH, Pool, PoolBook, load_pools, parse_pools  # noqa: E402
from router.quotes import Quote, RouteKind, quote  # noqa: E402
from router.route import Direction, Hop, Leg, solve_hop  # noqa: E402

__all__ = [
    "BCH",
    "BuildRequest",
    "BuildResult",
    "Direction",
    "ErrorCode",
    "Hop",
    "Leg",
    "Pool",
    "PoolBook",
    "Quote",
    "QuoteRequest",
    "RouteKind",
    "RouterConfig",
    "RouterError",
    "Side",
    "build",
    "load_pools",
    "parse_build_params",
    "parse_pools",
    "parse_quote_params",
    "quote",
    "solve_hop",
]
