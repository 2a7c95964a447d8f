"""Every endpoint of the data API, declared once (`rest.declare`): its parameters with their
types, bounds, patterns and defaults, its answer's schema and its documented refusals. The
route modules bind a handler to each (`ENDPOINT.route(handler)`); `rest.spec` builds the
OpenAPI document from the same declarations.

Bounds live here so that `docs/api.md` and the document quote one source.
"""

from typing import Annotated, Any, Literal, get_args

from msgspec import Meta

from indexer.store import queries_lending as ql
from rest.declare import Args, Endpoint, NoArgs, Refusal
from rest.tokenlist import SORT_KEYS
from rest.tokens import SYMBOL_CHAR

MAX_TIME = 32_503_680_000  # year 3000: anything later is a typo
DAY = 86_400
DEFAULT_VOLUME_SPAN = DAY  # /dex/volume, list_by_volume: the last 24 h
DEFAULT_SERIES_SPAN = 30 * DAY  # price history, candlesticks, APY: the last 30 days
DEFAULT_STEP = 3_600
MIN_STEP = 60
MAX_STEP = 366 * DAY
MIN_APY_WINDOW = 3_600
MAX_OFFSET = 100_000
MAX_POOLS_PAGE = 10_000
MAX_IDS = 100
MAX_QUERY = 64
MAX_UPDATES = 10_000  # oracle history entries without stepsize
MAX_PRICE = 0xFFFF_FFFF  # Delphi prices are u32 cents per BCH
MAX_RATE_BP = 0xFFFF  # the rate oracle's bp value is a u16

HEX64 = "[0-9a-fA-F]{64}"
# What str.isspace (and so str.strip) calls whitespace, spelled out: `\s` and `\S` differ
# between Python's regular expressions and JSON Schema's (ECMA 262).
SPACE = (
    "\\u0009-\\u000d\\u001c-\\u0020\\u0085\\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029"
    "\\u202f\\u205f\\u3000"
)
# A 64-hex id, or a symbol (`rest.tokens.SYMBOL`; a symbol is never 33+ hex digits, so the
# two cannot be confused).
TOKEN_PATTERN = f"^([0-9a-fA-F]{{64}}|{SYMBOL_CHAR}{{1,32}})$"
U32 = (
    "(0|[1-9][0-9]{0,8}|[1-3][0-9]{9}|4[01][0-9]{8}|42[0-8][0-9]{7}|429[0-3][0-9]{6}"
    "|4294[0-8][0-9]{5}|42949[0-5][0-9]{4}|429496[0-6][0-9]{3}|4294967[01][0-9]{2}"
    "|42949672[0-8][0-9]|429496729[0-5])"
)

Time = Annotated[int, Meta(ge=0, le=MAX_TIME, description="Unix seconds")]
TokenRef = Annotated[str, Meta(pattern=TOKEN_PATTERN, description="token id (64 hex) or symbol")]
Pkh = Annotated[
    str, Meta(pattern="^[0-9a-fA-F]{40}$", description="owner public key hash (40 hex)")
]
Hash64 = Annotated[str, Meta(pattern=f"^{HEX64}$")]
Offset = Annotated[int, Meta(ge=0, le=MAX_OFFSET, description="items to skip")]
SearchText = Annotated[
    str,
    Meta(
        min_length=1,
        max_length=MAX_QUERY,
        pattern=f"[^{SPACE}]",
        description="symbol, name or id prefix (spaces around it are trimmed)",
    ),
]
SortKey = Literal["score", "tvl", "volume", "price_change", "apy", "trade_count", "name"]
assert get_args(SortKey) == SORT_KEYS, "rest.tokenlist.SORT_KEYS and SortKey must agree"
Order = Annotated[
    Literal["asc", "desc"], Meta(description="sort order (default: desc; asc for name)")
]
Stepsize = Annotated[int, Meta(ge=MIN_STEP, le=MAX_STEP, description="interval length in seconds")]


# --- parameters -----------------------------------------------------------------------------


class TokenArgs(Args, frozen=True, kw_only=True):
    token: TokenRef


class PoolActiveArgs(Args, frozen=True, kw_only=True):
    token: TokenRef | None = None
    pkh: Pkh | None = None
    user: (
        Annotated[
            str, Meta(pattern="^[0-9a-fA-F]{40}$", description="another name for pkh (not both)")
        ]
        | None
    ) = None


class PoolsArgs(Args, frozen=True, kw_only=True):
    limit: (
        Annotated[
            int,
            Meta(ge=1, le=MAX_POOLS_PAGE, description="at most this many pools (default: all)"),
        ]
        | None
    ) = None
    offset: Offset = 0


class PoolHistoryArgs(Args, frozen=True, kw_only=True):
    pool_id: Annotated[
        str,
        Meta(
            pattern=f"^{HEX64}:{U32}$",
            description="<txid>:<vout> of the lineage's first UTXO",
        ),
    ]
    start: (
        Annotated[int, Meta(ge=0, le=MAX_TIME, description="only states from this time on")] | None
    ) = None


class ApyArgs(Args, frozen=True, kw_only=True):
    token: TokenRef | None = None
    pkh: Pkh | None = None
    start: (
        Annotated[int, Meta(ge=0, le=MAX_TIME, description="window start (default: end − 30 days)")]
        | None
    ) = None
    end: (
        Annotated[int, Meta(ge=0, le=MAX_TIME, description="window end, inclusive (default: now)")]
        | None
    ) = None


class PriceAtArgs(Args, frozen=True, kw_only=True):
    token: TokenRef
    timestamp: Time


class SeriesArgs(Args, frozen=True, kw_only=True):
    token: TokenRef
    start: (
        Annotated[int, Meta(ge=0, le=MAX_TIME, description="window start (default: end − 30 days)")]
        | None
    ) = None
    end: (
        Annotated[int, Meta(ge=0, le=MAX_TIME, description="window end, inclusive (default: now)")]
        | None
    ) = None
    stepsize: Stepsize = DEFAULT_STEP


class WindowArgs(Args, frozen=True, kw_only=True):
    """A volume window: the last 24 h by default."""

    start: (
        Annotated[int, Meta(ge=0, le=MAX_TIME, description="window start (default: end − 24 h)")]
        | None
    ) = None
    end: (
        Annotated[int, Meta(ge=0, le=MAX_TIME, description="window end, inclusive (default: now)")]
        | None
    ) = None


class TokenWindowArgs(WindowArgs, frozen=True, kw_only=True):
    token: TokenRef


class ByVolumeArgs(WindowArgs, frozen=True, kw_only=True):
    limit: Annotated[int, Meta(ge=1, le=1_000, description="page size")] = 100
    offset: Offset = 0


class SearchByVolumeArgs(WindowArgs, frozen=True, kw_only=True):
    search_query: SearchText
    limit: Annotated[int, Meta(ge=1, le=100, description="page size")] = 20
    offset: Offset = 0


class ListCachedArgs(Args, frozen=True, kw_only=True):
    limit: Annotated[int, Meta(ge=1, le=1_000, description="page size")] = 100
    offset: Offset = 0
    by: Annotated[SortKey, Meta(description="sort key")] = "score"
    order: Order | None = None


class ByIdsArgs(Args, frozen=True, kw_only=True):
    ids: Annotated[
        str,
        Meta(
            pattern=f"^ *{HEX64} *(, *{HEX64} *){{0,{MAX_IDS - 1}}}$",
            description=f"comma-separated 64-hex ids (at most {MAX_IDS}); unknown ids are omitted",
        ),
    ]
    by: Annotated[SortKey, Meta(description="sort key")] = "score"
    order: Order | None = None


class SearchCachedArgs(Args, frozen=True, kw_only=True):
    q: SearchText
    limit: Annotated[int, Meta(ge=1, le=100, description="page size")] = 20
    offset: Offset = 0
    by: Annotated[SortKey, Meta(description="sort key")] = "score"
    order: Order | None = None


class TxLatestArgs(Args, frozen=True, kw_only=True):
    limit: Annotated[int, Meta(ge=1, le=500, description="page size")] = 50
    offset: Offset = 0
    token: TokenRef | None = None


class ValueLockedArgs(Args, frozen=True, kw_only=True):
    time: (
        Annotated[int, Meta(ge=0, le=MAX_TIME, description="as of this time (default: now)")] | None
    ) = None


class TokenValueLockedArgs(ValueLockedArgs, frozen=True, kw_only=True):
    token: TokenRef


class FeedHistoryArgs(Args, frozen=True, kw_only=True):
    token: Annotated[str, Meta(pattern=f"^{HEX64}$", description="the feed's token category")]
    start: Annotated[int, Meta(ge=0, le=MAX_TIME, description="window start")]
    end: (
        Annotated[int, Meta(ge=0, le=MAX_TIME, description="window end, inclusive (default: now)")]
        | None
    ) = None
    stepsize: (
        Annotated[
            int,
            Meta(
                ge=MIN_STEP,
                le=MAX_STEP,
                description="one entry per interval [start + k·stepsize, start + (k+1)·stepsize): "
                f"the last update in it (default: every update, at most {MAX_UPDATES})",
            ),
        ]
        | None
    ) = None


class FeedClosestArgs(Args, frozen=True, kw_only=True):
    token_id: Annotated[
        str,
        Meta(
            min_length=1,
            description="the feed's token category (64 hex; anything else names no feed: 404)",
        ),
    ]
    timestamp: (
        Annotated[int, Meta(ge=0, le=MAX_TIME, description="Unix seconds (default: now)")] | None
    ) = None


class CategoryArgs(Args, frozen=True, kw_only=True):
    category: TokenRef


class LendingPageArgs(Args, frozen=True, kw_only=True):
    offset: Offset = 0
    limit: Annotated[int, Meta(ge=1, le=ql.LOANS_MAX, description="page size")] = ql.LOANS_DEFAULT


class LendingHistoryArgs(Args, frozen=True, kw_only=True):
    offset: Offset = 0
    limit: Annotated[int, Meta(ge=1, le=ql.HISTORY_MAX, description="page size")] = (
        ql.HISTORY_DEFAULT
    )
    nfth: (
        Annotated[
            str,
            Meta(
                pattern=f"^{HEX64}(,{HEX64}){{0,{ql.NFTHS_MAX - 1}}}$",
                description=f"comma-separated 64-hex borrower NFT hashes (at most {ql.NFTHS_MAX}): "
                "only their loans' actions",
            ),
        ]
        | None
    ) = None


class BorrowerArgs(Args, frozen=True, kw_only=True):
    borrower_hash: Annotated[str, Meta(pattern=f"^{HEX64}$", description="the borrower's NFT hash")]


class OwnerArgs(Args, frozen=True, kw_only=True):
    owner_hash: Annotated[str, Meta(pattern=f"^{HEX64}$", description="the owner's NFT hash")]


class StatesArgs(Args, frozen=True, kw_only=True):
    since: Annotated[int, Meta(ge=0, le=MAX_TIME, description="only states with mtp > since")] = 0
    limit: Annotated[int, Meta(ge=1, le=ql.STATE_MAX, description="page size")] = ql.STATE_DEFAULT


class AprArgs(Args, frozen=True, kw_only=True):
    window: Annotated[int, Meta(ge=1, le=MAX_TIME, description="seconds before now")] = (
        ql.APR_WINDOW_DEFAULT
    )


class CrankableArgs(Args, frozen=True, kw_only=True):
    now: (
        Annotated[int, Meta(ge=0, le=MAX_TIME, description="the time to judge at (default: now)")]
        | None
    ) = None
    price: (
        Annotated[
            int,
            Meta(
                ge=1,
                le=MAX_PRICE,
                description="cents per BCH to judge at (default: the oracle's price at now)",
            ),
        ]
        | None
    ) = None
    rate_bp: (
        Annotated[
            int,
            Meta(
                ge=0,
                le=MAX_RATE_BP,
                description="the interest-rate oracle's bp value to judge at (default: the indexed "
                "rate oracle's value at now; without one no loan is redeemable)",
            ),
        ]
        | None
    ) = None


# --- endpoints ------------------------------------------------------------------------------

_LATEST_DESC = (
    "Pools at their latest state: a pool a mempool transaction spent is left out, the pools "
    "mempool transactions created are in (after the confirmed ones)."
)
_ACTIVE_DESC = (
    "At least one of token and pkh (or user); both = pools of that owner and token. " + _LATEST_DESC
)
_NEITHER = Refusal("missing_parameter", "token", "neither token nor pkh (or user) given")
_BOTH_NAMES = Refusal("invalid_parameter", "user", "both pkh and user given (one filter)")
_SHORT_APY = Refusal(
    "invalid_parameter",
    "start",
    f"end − start under {MIN_APY_WINDOW} s (a shorter window annualises a few trades' fees "
    "into a meaningless, unboundedly long figure)",
)
_TOO_MANY_UPDATES = Refusal(
    "invalid_parameter",
    "stepsize",
    f"without stepsize, more than {MAX_UPDATES} updates in the window",
)

TOKENPOOL_ACTIVE = Endpoint(
    "/tokenpool/pool/active",
    PoolActiveArgs,
    "PoolActive",
    "Live pools",
    _ACTIVE_DESC,
    (_NEITHER, _BOTH_NAMES),
)
TOKENPOOL_POOLS = Endpoint(
    "/tokenpool/pools",
    PoolsArgs,
    "PoolPage",
    "Every live pool, at its latest state",
    "Every live pool unless limit pages. " + _LATEST_DESC,
)
TOKENPOOL_TOKENS = Endpoint(
    "/tokenpool/tokens",
    NoArgs,
    "TokenPoolTokens",
    "Tokens with at least one live pool",
    _LATEST_DESC,
)
DEX_POOL_ACTIVE = Endpoint(
    "/dex/pool/active",
    PoolActiveArgs,
    "PoolActive",
    "Live pools (as /tokenpool/pool/active)",
    _ACTIVE_DESC,
    (_NEITHER, _BOTH_NAMES),
)
APY = Endpoint(
    "/dex/pool/aggregated_apy",
    ApyArgs,
    "AggregatedApy",
    "LP yield (APY)",
    "No parameters: all owners and tokens.",
    (_SHORT_APY,),
)
POOL_HISTORY = Endpoint(
    "/dex/pool/history/{pool_id}", PoolHistoryArgs, "PoolHistory", "A pool lineage's states"
)
CONTRACT_COUNT = Endpoint("/dex/contract/count", NoArgs, "ContractCount", "Pool contract counts")
TOKEN_CONTRACT_COUNT = Endpoint(
    "/dex/contract/count/{token}", TokenArgs, "ContractCount", "A token's pool contract counts"
)
FIRST_POOL = Endpoint(
    "/dex/token/{token}/first_pool", TokenArgs, "FirstPool", "The token's first pool"
)
PRICE_CURRENT = Endpoint("/dex/price/{token}/current", TokenArgs, "PriceCurrent", "Current price")
PRICE_AT = Endpoint(
    "/dex/price/{token}/at/{timestamp}", PriceAtArgs, "PriceAt", "Price at or before a time"
)
PRICE_HISTORY = Endpoint(
    "/dex/price/{token}/history",
    SeriesArgs,
    "PriceHistory",
    "Price history",
    "Intervals without trades are omitted; start after end is an empty window.",
)
CANDLESTICKS = Endpoint(
    "/dex/price/{token}/candlesticks",
    SeriesArgs,
    "Candlesticks",
    "Candlesticks",
    "Intervals without trades are omitted; start after end is an empty window.",
)
LIST_BY_VOLUME = Endpoint(
    "/dex/tokens/list_by_volume", ByVolumeArgs, "VolumeList", "Tokens by volume"
)
LIST_CACHED = Endpoint("/dex/tokens/list_cached", ListCachedArgs, "TokenObjects", "Token list")
LIST_CACHED_BY_IDS = Endpoint(
    "/dex/tokens/list_cached_by_ids", ByIdsArgs, "TokenObjects", "Token list for given ids"
)
SEARCH_BY_VOLUME = Endpoint(
    "/dex/tokens/search_by_volume", SearchByVolumeArgs, "VolumeList", "Search tokens, by volume"
)
SEARCH_CACHED = Endpoint(
    "/dex/tokens/search_cached", SearchCachedArgs, "TokenObjects", "Search the token list"
)
TX_LATEST = Endpoint("/dex/tx/latest", TxLatestArgs, "TxLatest", "Latest trades, newest first")
UNIQUE_ADDRESSES = Endpoint(
    "/dex/user/unique_addresses", NoArgs, "UniqueAddresses", "Unique trader addresses per month"
)
VALUE_LOCKED = Endpoint("/dex/valuelocked", ValueLockedArgs, "ValueLocked", "Value locked")
TOKEN_VALUE_LOCKED = Endpoint(
    "/dex/valuelocked/{token}", TokenValueLockedArgs, "TokenValueLocked", "A token's value locked"
)
VOLUME = Endpoint(
    "/dex/volume", WindowArgs, "Volume", "Volume", "start after end is an empty window."
)
TOKEN_VOLUME = Endpoint(
    "/dex/volume/{token}",
    TokenWindowArgs,
    "TokenVolume",
    "A token's volume",
    "start after end is an empty window.",
)
FEED_HISTORY = Endpoint(
    "/oracle/feed/{token}/history",
    FeedHistoryArgs,
    "FeedHistory",
    "An oracle feed's updates",
    "Oldest first; [] when the feed has no update in the window (or is unknown), start after "
    "end included.",
    (_TOO_MANY_UPDATES,),
)
FEED_CLOSEST = Endpoint(
    "/oracle/feed/closest",
    FeedClosestArgs,
    "FeedClosest",
    "The update closest to a time",
    "Ties go to the earlier update; null when the feed has no update. A malformed token_id "
    "is a 404.",
)
REGISTRY_TOKEN = Endpoint(
    "/registry/token/{category}",
    CategoryArgs,
    "RegistryToken",
    "The token's on-chain registry entry",
    "null when no registry on the token's authchain has a stored copy describing it, or no "
    "token has the symbol.",
)
REGISTRY_TOKEN_ALL = Endpoint(
    "/registry/token/{category}/all",
    CategoryArgs,
    "RegistryTokenAll",
    "Every registry's entry for the token",
    "On-chain first, then each configured off-chain source (by name) describing it; [] when "
    "none does, or no token has the symbol.",
)

_V11, _V1 = "/lending/v11", "/lending"
LENDING_ALLOWANCES = Endpoint(
    f"{_V11}/allowances/{{owner_hash}}",
    OwnerArgs,
    "LendingAllowances",
    "Unspent outputs payable to an owner NFT hash",
    "In chain order; an unknown hash is an empty list.",
)
LENDING_BAR_HISTORY = Endpoint(
    f"{_V11}/bar/history", StatesArgs, "LendingBarStates", "Bar states, newest first"
)
LENDING_CRANKABLE = Endpoint(
    f"{_V11}/crankable", CrankableArgs, "LendingCrankable", "Loans a keeper may process now"
)
LENDING_POOL_HISTORY = Endpoint(
    f"{_V11}/pool/history",
    StatesArgs,
    "LendingPoolStates",
    "Liquidation pool states, newest first",
)
LENDING_APR = Endpoint(
    f"{_V11}/staking/apr", AprArgs, "LendingApr", "Staking yield of the bar and the pool"
)


LENDING_HISTORY = Endpoint(
    f"{_V11}/history", LendingHistoryArgs, "LendingActions", "v11 loan actions, newest first"
)
LENDING_LOAN = Endpoint(
    f"{_V11}/loan/{{borrower_hash}}/history",
    BorrowerArgs,
    "LendingActions",
    "One v11 borrower's actions in chain order",
    "An unknown hash is an empty list.",
)
LENDING_ACTIVE = Endpoint(
    f"{_V11}/loans/active",
    LendingPageArgs,
    "LendingLoans",
    "Active v11 loans",
    "Chain order (stable for paging).",
)
LENDING_STATS = Endpoint(f"{_V11}/stats", NoArgs, "LendingStats", "Totals of the active v11 loans")
LENDING_V1_HISTORY = Endpoint(
    f"{_V1}/history", LendingHistoryArgs, "LendingActionsV1", "v1 loan actions, newest first"
)
LENDING_V1_LOAN = Endpoint(
    f"{_V1}/loan/{{borrower_hash}}/history",
    BorrowerArgs,
    "LendingActionsV1",
    "One v1 borrower's actions in chain order",
    "An unknown hash is an empty list.",
)
LENDING_V1_ACTIVE = Endpoint(
    f"{_V1}/loans/active",
    LendingPageArgs,
    "LendingLoansV1",
    "Active v1 loans",
    "Chain order (stable for paging).",
)
LENDING_V1_STATS = Endpoint(
    f"{_V1}/stats", NoArgs, "LendingStatsV1", "Totals of the active v1 loans"
)

ENDPOINTS: tuple[Endpoint[Any], ...] = tuple(
    v for v in list(globals().values()) if isinstance(v, Endpoint)
)


# --- what a parameter means beyond its schema -----------------------------------------------


def window(start: int | None, end: int | None, now: int, span: int) -> tuple[int, int]:
    """(start, end): end defaults to now (or start, if later), start to end − span. A start
    after end is an empty window, answered as one (nothing happened in it)."""
    if end is None:
        end = now if start is None else max(now, start)
    if start is None:
        start = max(0, end - span)
    return start, end


def hex_list(text: str | None) -> tuple[str, ...]:
    """Comma-separated hex ids (already matched by their pattern) → lower case, in order,
    duplicates folded."""
    if text is None:
        return ()
    return tuple(dict.fromkeys(p.strip().lower() for p in text.split(",")))
