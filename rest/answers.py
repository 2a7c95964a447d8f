"""The data API's answers as msgspec Structs: the schema half of each endpoint's declaration
(`rest.endpoints` names its answer; a name here is a Struct or an alias of a list or a
nullable one), published in the OpenAPI document by `rest.spec`. Every object is closed
(`forbid_unknown_fields` → `additionalProperties: false`) and every field required unless it
says otherwise, so the tests' validation of real answers catches any undocumented or missing
field. The handlers build the same shapes (`rest.shapes`, the route modules)."""

from typing import Annotated, Literal

import msgspec
from msgspec import UNSET, Meta, UnsetType

from indexer.store.queries_lending import RATIO_BUCKETS

# The record kinds of each lending version (`/lending/history`'s `kind`).
V1_KINDS = ("borrow", "repay", "redeem", "refinance", "add_collateral", "liquidation")
V11_KINDS = (*V1_KINDS, "delegate", "accrue")

Hex64 = Annotated[str, Meta(pattern="^[0-9a-f]{64}$")]
Hex40 = Annotated[str, Meta(pattern="^[0-9a-f]{40}$")]
PoolId = Annotated[str, Meta(pattern="^[0-9a-f]{64}:(0|[1-9][0-9]*)$")]
UInt = Annotated[int, Meta(ge=0)]
Time = Annotated[int, Meta(ge=0, description="Unix seconds")]
Price = Annotated[float, Meta(description="sats per token base unit")]
Text = str | None


def described(text: str) -> Meta:
    return Meta(description=text)


class Answer(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """Base of every answer object."""


# --- errors and health -----------------------------------------------------------------------


class Candidate(Answer):
    """A token an ambiguous symbol names."""

    token_id: Hex64
    symbol: Text
    name: Text


class ErrorDetail(Answer):
    code: Annotated[
        str,
        described(
            "machine-readable: invalid_parameter, missing_parameter, unknown_parameter, "
            "ambiguous_symbol, not_found, unknown_token, unknown_pool, method_not_allowed, "
            "rate_limited, not_synced, database_unavailable, internal_error"
        ),
    ]
    message: str
    parameter: Annotated[str, described("the offending parameter")] | UnsetType = UNSET
    candidates: list[Candidate] | UnsetType = UNSET


class Error(Answer):
    """Every non-2xx answer."""

    error: ErrorDetail


class Freshness(Answer):
    """How far the index lags the best chain tip the indexer heard of (from every Electrum
    server it connects to), as the indexer last wrote it."""

    index_height: UInt | None
    best_height: Annotated[UInt | None, described("best tip height heard of")]
    best_hash: Hex64 | None
    best_time: Annotated[Time | None, described("header time of the best tip heard of")]
    lag_blocks: UInt | None
    lag_seconds: Annotated[
        float | None,
        described(
            "seconds the index has possibly been out of date: 0 while it holds the best tip "
            "heard and a server is connected; else since the first block it lacks was heard of "
            "or since the last server went away"
        ),
    ]
    servers: Annotated[UInt, described("Electrum servers configured")]
    connected: Annotated[UInt, described("Electrum servers connected")]


class Health(Answer):
    """Index and database status."""

    status: Literal["ok", "syncing", "empty", "unavailable"]
    database: Literal["ok", "unavailable"]
    index_height: UInt | None
    index_hash: Hex64 | None
    index_time: Time | None
    chain_height: UInt | None
    lag_blocks: UInt | None
    lag_seconds: UInt | None
    synced: bool
    uptime_seconds: UInt
    freshness: Annotated[
        Freshness | None, described("null when no indexer ever wrote the tips it heard")
    ] = None
    error: str | UnsetType = UNSET


# --- pools -----------------------------------------------------------------------------------


class Pool(Answer):
    """A live pool UTXO."""

    owner_p2pkh_addr: Annotated[str, described("the owner's token-aware P2PKH CashAddr")]
    owner_pkh: Hex40
    sats: UInt
    token_id: Hex64
    tokens: UInt
    tx_pos: Annotated[UInt, described("output index of the UTXO")]
    txid: Hex64
    pool_id: Annotated[
        PoolId, described("the lineage: outpoint of the pool's first UTXO the index knows")
    ]


class PoolActive(Answer):
    """Live pools of a token and/or owner."""

    active: list[Pool]


class PoolPage(Answer):
    """Live pools of every token at their latest state, by token then chain order."""

    pools: list[Pool]
    total: Annotated[UInt, described("all live pools")]


class PoolToken(Answer):
    """A token."""

    token_id: Hex64
    first_seen_height: Annotated[UInt | None, described("null: its only pools are unconfirmed")]
    first_seen_time: Time | None
    first_pool_id: PoolId
    pools: Annotated[UInt, described("live pools")]
    tvl_sats: UInt
    tvl_tokens: UInt


class TokenPoolTokens(Answer):
    """Tokens with at least one live pool, in the order they appeared."""

    tokens: list[PoolToken]


class PoolState(Answer):
    """One state of a pool lineage (a UTXO)."""

    k: Annotated[str, Meta(pattern="^[0-9]+$", description="sats × tokens")]
    sats: UInt
    tokens: UInt
    timestamp: Time
    txid: Hex64
    height: UInt


class PoolHistory(Answer):
    """A pool lineage's states in chain order."""

    pool_id: PoolId
    owner_pkh: Hex40
    token_id: Hex64
    history: list[PoolState]


class AggregatedApy(Answer):
    """LP yield over a window (docs/api.md)."""

    apy: Annotated[
        str,
        Meta(pattern="^-?[0-9]+\\.[0-9]{10}$", description="percent per year, decimal string"),
    ]
    pools: Annotated[UInt, described("pool lineages counted")]


class ContractCount(Answer):
    """Pool contracts."""

    active: Annotated[UInt, described("live pools")]
    ended: Annotated[UInt, described("withdrawn lineages")]
    interactions: Annotated[UInt, described("trades (transaction × token)")]


class FirstPool(Answer):
    """The first UTXO of the token's first pool."""

    owner_p2pkh_addr: str
    owner_pkh: Hex40
    sats: UInt
    token_id: Hex64
    tokens: UInt
    tx_pos: UInt
    txid: Hex64
    pool_id: PoolId
    height: UInt
    timestamp: Time


# --- prices ----------------------------------------------------------------------------------


class PriceCurrent(Answer):
    """Liquidity-weighted marginal price: Σ sats / Σ tokens of the live pools."""

    price: Price | None


class PriceAt(Answer):
    """Execution price of the last trade at or before the time, and that trade's time."""

    price: Price | None
    timestamp: Time | None


class HistoryPoint(Answer):
    """An interval."""

    avg: Price
    max: Price
    min: Price
    time: Annotated[Time, described("interval start")]


class PriceHistory(Answer):
    """Per interval with trades: volume-weighted average, min and max execution price."""

    history: list[HistoryPoint]


class Candle(Answer):
    """A candle."""

    open: Price
    high: Price
    low: Price
    close: Price
    time: Annotated[Time, described("interval start")]
    volume_sats: UInt
    volume_tokens: UInt
    transaction_count: UInt


class Candlesticks(Answer):
    """Per interval with trades: OHLC of execution prices in time order, and volumes."""

    candlesticks: list[Candle]


# --- tokens ----------------------------------------------------------------------------------


class BcmrToken(Answer):
    """Token part."""

    category: Hex64
    decimals: int | None
    symbol: Text


class Uris(Answer):
    """Links, as the registry gives them; null where it gives none."""

    icon: Text
    web: Text


class Bcmr(Answer):
    """Registry metadata (null until a registry knows the token)."""

    name: Text
    description: Text
    token: BcmrToken
    uris: Uris


class TokenObject(Answer):
    """A token as of the index tip (docs/api.md, token list)."""

    token_id: Hex64
    display_name: Text
    display_symbol: Text
    price_now: Price | None
    price_now_usd: float | None
    price_24h: Price | None
    price_24h_usd: float | None
    price_7d: Price | None
    price_7d_usd: float | None
    change_24h_bp: int | None
    change_24h_usd_bp: int | None
    change_7d_bp: int | None
    change_7d_usd_bp: int | None
    apy_30d_bp: int
    score: UInt
    score_rank: Annotated[int, Meta(ge=1)]
    trade_count: UInt
    trade_volume: Annotated[UInt, described("sats, last 24 h")]
    tvl_sats: UInt
    tvl_tokens: UInt
    pools: Annotated[UInt, described("live pools")]
    bcmr: Bcmr | None


class TokenVolumeItem(Answer):
    """A token's volume."""

    token_id: Hex64
    display_symbol: Text
    display_name: Text
    volume_sats: UInt
    volume_tokens: UInt
    trade_count: UInt


class VolumeList(Answer):
    """Tokens by traded volume over a window."""

    period_start: Time
    period_end: Time
    tokens: list[TokenVolumeItem]


TokenObjects = list[TokenObject]


# --- activity --------------------------------------------------------------------------------


class Trade(Answer):
    """One transaction's trade of one token."""

    txid: Hex64
    blockhash: Hex64
    height: UInt
    timestamp_guess: Annotated[Time, described("block header time")]
    token_id: Hex64
    direction: Literal["buy", "sell"]
    sats: Annotated[UInt, described("BCH the trader paid (buy) or got (sell)")]
    tokens: Annotated[UInt, described("tokens the trader got (buy) or paid (sell)")]
    volume_sats: UInt
    volume_tokens: UInt
    price: Price
    lp_fee: UInt
    pools: Annotated[UInt, described("pools of this token traded with")]
    pools_touched: Annotated[UInt, described("pools the transaction changed")]


# [month "YYYY-MM", addresses]. Items as anyOf, not a tuple: schemathesis 4 rewrites a
# tuple's prefixItems into a draft-4 items list that its own 3.1 check then refuses.
MonthCount = Annotated[
    list[Annotated[str, Meta(pattern="^[0-9]{4}-[0-9]{2}$")] | UInt],
    Meta(min_length=2, max_length=2, description='[month "YYYY-MM", addresses]'),
]


TxLatest = list[Trade]
UniqueAddresses = list[MonthCount]


class ValueLocked(Answer):
    """Sats locked in all pools."""

    satoshis: UInt


class TokenValueLocked(Answer):
    """Value locked in one token's pools."""

    satoshis: UInt
    token_amount: UInt
    token_id: Hex64


class Volume(Answer):
    """Traded volume of every token over a window."""

    total_volume_sats: UInt
    period_start: Time
    period_end: Time


class TokenVolume(Answer):
    """Traded volume of one token over a window."""

    volume_sats: UInt
    volume_tokens: UInt
    token_id: Hex64
    period_start: Time
    period_end: Time


# --- oracle and registry ---------------------------------------------------------------------


class FeedPoint(Answer):
    """One update of an oracle feed (a re-creation of its oracle UTXO)."""

    time: Annotated[Time, described("the oracle's own timestamp")]
    price: Annotated[UInt, described("US cents per BCH")]
    txid: Hex64
    blockhash: Annotated[Hex64, described("the block that mined the update")]
    sequence: Annotated[UInt, described("the feed's update sequence")]


class FeedClosestPoint(Answer):
    """The feed update closest to a time."""

    oracle_timestamp: Annotated[Time, described("the oracle's own timestamp")]
    oracle_price: Annotated[UInt, described("US cents per BCH")]
    oracle_sequence: Annotated[UInt, described("the feed's update sequence")]
    token_id: Annotated[Hex64, described("the feed's token category (the oracle's)")]
    txid: Hex64
    blockhash: Annotated[Hex64, described("the block that mined the update")]


class RegistryTokenPart(Answer):
    """The token part (null: the identity describes no token)."""

    category: Hex64
    symbol: str
    decimals: Annotated[int, Meta(ge=0, le=18)]


class FileMeta(Answer):
    """Where the entry comes from."""

    expected_hash: Annotated[
        Hex64,
        described(
            "the hash published on chain (off chain, where nothing publishes one: the stored "
            "copy's, = actual_hash)"
        ),
    ]
    actual_hash: Annotated[Hex64, described("sha256 of the stored copy's raw bytes")]
    source: Annotated[str, described("onchain, or the off-chain source's name")]


class RegistryEntry(Answer):
    """A registry's current snapshot of the token's identity, flattened."""

    name: str
    description: str
    token: RegistryTokenPart | None
    uris: Uris
    filemeta: FileMeta


FeedHistory = list[FeedPoint]
FeedClosest = FeedClosestPoint | None
RegistryToken = RegistryEntry | None
RegistryTokenAll = list[RegistryEntry]


# --- lending (docs/api-lending.md) -----------------------------------------------------------

Cents = Annotated[int, Meta(ge=0, description="US cents (stablecoin base units)")]
Sats = Annotated[int, Meta(ge=0, description="sats")]
Bp = Annotated[int, Meta(ge=0, description="annual interest, basis points")]
NftHash = Annotated[str, Meta(pattern="^[0-9a-f]{64}$", description="owner NFT hash")]
PriceCents = Annotated[int, Meta(ge=0, description="US cents per BCH")]
Mtp = Annotated[
    int,
    Meta(ge=0, description="median of the header times of the block and the 10 below it"),
]
BlockTime = Annotated[int, Meta(ge=0, description="block header time")]


class LendingLoanV1(Answer):
    """An active v1 loan (a loan UTXO)."""

    txid: Hex64
    height: UInt
    time: BlockTime
    vout: Annotated[UInt, described("output index of the loan UTXO")]
    borrower_hash: NftHash
    principal: Cents
    rate_bp: Bp
    loan_ts: Annotated[Time, described("the loan's timestamp (borrow, refinance, accrue)")]
    collateral: Sats


class LendingLoan(LendingLoanV1):
    """An active v11 loan (a loan UTXO)."""

    delegate_hash: Annotated[Hex64, described("the delegate's NFT hash")] | None


OWED = "interest owed at the block time, cents (repay, redeem, liquidation, refinance, accrue)"


class _Action(Answer):
    txid: Hex64
    height: UInt
    time: BlockTime
    mtp: Mtp
    borrower_hash: NftHash
    collateral_before: Sats | None
    collateral_after: Sats | None
    principal_before: Cents | None
    principal_after: Cents | None
    rate_bp_before: Bp | None
    rate_bp_after: Bp | None
    loan_ts_before: Time | None
    loan_ts_after: Time | None
    interest: Annotated[UInt, described(OWED)] | None


class LendingActionV1(_Action):
    """One v1 loan's action in one transaction."""

    kind: Annotated[str, Meta(extra_json_schema={"enum": list(V1_KINDS)})]


class LendingAction(_Action):
    """One v11 loan's action in one transaction."""

    kind: Annotated[str, Meta(extra_json_schema={"enum": list(V11_KINDS)})]
    delegate_hash: Hex64 | None


class _State(Answer):
    txid: Hex64
    height: UInt
    time: BlockTime
    vout: UInt
    mtp: Mtp
    staked: Annotated[UInt, described("stablecoin base units (cents) staked")]
    shares: UInt
    share_price: Annotated[float, described("staked / shares")] | None


class LendingBarState(_State):
    """A state of the v11 bar (one re-creation of its UTXO)."""


class LendingPoolState(_State):
    """A state of the v11 pool (one re-creation of its UTXO)."""

    bch_pot: Annotated[UInt, described("sats seized from liquidations")]


class LendingAllowance(Answer):
    """An unspent output payable to the owner NFT hash (pay-to-NFT-hash)."""

    txid: Hex64
    height: UInt
    time: BlockTime
    vout: UInt
    owner_hash: NftHash
    sats: Sats
    category: Annotated[Hex64, described("token category, if any")] | None
    token_amount: Annotated[UInt, described("fungible token base units")]


class CrankableLoan(LendingLoan):
    """A crankable loan."""

    reason: Literal["liquidate", "redeem", "accrue"]
    interest: Annotated[Cents, described("interest owed at now")]
    debt: Annotated[Cents, described("principal + interest")]


class LendingCrankable(Answer):
    """Active v11 loans a keeper may process now, funded to pay the fee."""

    now: Time
    price: Annotated[PriceCents, described("the price used, cents per BCH")] | None
    rate_bp: Annotated[UInt, described("the rate oracle's bp used")] | None
    loans: list[CrankableLoan]


class LendingApr(Answer):
    """Annualised growth of the bar's and the pool's share price over the window."""

    now: Time
    window: Annotated[UInt, described("seconds")]
    bar: Annotated[float, described("per year, 0.05 = 5 %")] | None
    pool: Annotated[float, described("per year, excluding the BCH pot")] | None
    excludes_bch_pot: Literal[True]


class RatioBuckets(Answer):
    """Active loans per collateral-ratio bucket (percent; lower bound included)."""

    below_120: UInt = msgspec.field(name="<120")
    from_120: UInt = msgspec.field(name="120-150")
    from_150: UInt = msgspec.field(name="150-200")
    from_200: UInt = msgspec.field(name="200-300")
    from_300: UInt = msgspec.field(name=">=300")


assert tuple(f.encode_name for f in msgspec.structs.fields(RatioBuckets)) == RATIO_BUCKETS


class LendingStats(Answer):
    """Totals of the active v11 loans."""

    now: Annotated[Time, described("the time interest is owed at")]
    loans: UInt
    collateral: Sats
    principal: Cents
    debt: Annotated[Cents, described("principal plus interest owed at now")]
    average_rate: Annotated[float, described("principal-weighted bp")] | None
    oracle_price: PriceCents | None
    oracle_time: Annotated[Time, described("the price update's timestamp")] | None
    collateral_ratio: RatioBuckets | None
    redeemable: (
        Annotated[UInt, described("loans whose rate_bp is at most the rate oracle's")] | None
    )
    rate_bp: Annotated[UInt, described("the interest-rate oracle's bp at now")] | None
    rate_time: Annotated[Time, described("the rate update's timestamp")] | None


class LendingStatsV1(LendingStats):
    """Totals of the active v1 loans."""


LendingLoans = list[LendingLoan]
LendingLoansV1 = list[LendingLoanV1]
LendingActions = list[LendingAction]
LendingActionsV1 = list[LendingActionV1]
LendingBarStates = list[LendingBarState]
LendingPoolStates = list[LendingPoolState]
LendingAllowances = list[LendingAllowance]
