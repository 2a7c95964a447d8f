"""The ledger: a JSON record of everything a scenario created, as the final chain holds it.

It is the oracle of the indexer's and the REST API's tests, so it records facts, not opinions:
every pool lineage and every state change of it with exact amounts, every buy and sell with
the addresses that funded it, the tokens with their registries, the oracle feed, the wallets.
Heights and times are those of the *final* chain (after the scenario's reorgs); entries of
transactions still in the mempool are kept apart, under `mempool`.

Conventions: hashes are display-order hex; a pool id is the outpoint that created the pool,
`<txid>:<vout>` (the indexer's lineage id); amounts are integers (sats, token base units).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

import orjson

EventKind = Literal["create", "buy", "sell", "deposit", "withdraw"]
CreatedVia = Literal["summon", "withdraw_recreate", "no_marker"]
TxKind = Literal[
    "faucet",
    "payout",
    "token_genesis",
    "bcmr_publication",
    "identity_burn",
    "token_distribution",
    "pool_create",
    "trade",
    "deposit",
    "withdraw",
    "oracle_genesis",
    "oracle_update",
    "decoy",
    "payment",
    "lending",
]


@dataclass(frozen=True, slots=True)
class Amounts:
    sats: int
    tokens: int

    @classmethod
    def from_json(cls, obj: Any) -> Amounts:
        return cls(int(obj["sats"]), int(obj["tokens"]))


def _amounts(obj: Any) -> Amounts | None:
    return None if obj is None else Amounts.from_json(obj)


@dataclass(frozen=True, slots=True)
class BcmrEntry:
    txid: str  # the authchain transaction carrying the publication
    uri: str  # as pushed on chain
    url: str  # where the devnet's HTTP server serves it
    hash: str  # the on-chain sha256 (hex of the digest, whatever the push encoding)
    hash_encoding: Literal["digest", "ascii-hex"]
    content_sha256: str  # sha256 of the bytes served
    mismatch: bool  # deliberate: the served bytes do not hash to the on-chain hash


@dataclass(frozen=True, slots=True)
class TokenEntry:
    category: str  # = the authbase txid
    genesis_txid: str
    symbol: str
    name: str
    decimals: int
    supply: int
    issuer_address: str
    bcmr: BcmrEntry | None
    # The authchain link that burned the identity (its output 0 is OP_RETURN), if any: the
    # registry published before it stays the token's last word.
    identity_burned_txid: str | None = None


@dataclass(frozen=True, slots=True)
class PoolEntry:
    pool_id: str
    category: str
    owner_pkh: str
    owner_address: str  # token-aware P2PKH (the API's owner_p2pkh_addr)
    pool_address: str  # token-aware P2SH32
    created_txid: str
    created_height: int | None
    created_time: int | None
    created_via: CreatedVia
    # Could an indexer see the pool when it was created? (SUMMON, a withdraw re-creation, or an
    # owner seen in an earlier block.) If not, it appears when first spent.
    visible_at_creation: bool
    initial: Amounts
    status: Literal["active", "withdrawn"]  # on the final chain
    withdrawn_txid: str | None
    utxo: str | None  # current outpoint on the final chain (None once withdrawn)
    state: Amounts | None
    live_utxo: str | None  # counting the mempool too
    live_state: Amounts | None


@dataclass(frozen=True, slots=True)
class PoolEvent:
    seq: int  # global order of submission (a topological order; heights never decrease)
    txid: str
    height: int | None
    time: int | None  # block time
    kind: EventKind
    pool_id: str
    category: str
    owner_pkh: str
    input_index: int | None  # None for create
    output_index: int | None  # None for withdraw
    before: Amounts | None  # None for create
    after: Amounts | None  # None for withdraw
    lp_fee: int | None  # trade path (buy, sell, deposit): abs(Δsats) × 3 // 1000
    pools_touched: int  # pool events in this transaction


@dataclass(frozen=True, slots=True)
class TradeEntry:
    """A buy or sell of one token through `pools` of its pools; sats/tokens are those pools'
    net change (sats > 0: the trader paid BCH), volumes sum each pool's absolute change.
    A token-to-token swap is two entries with one txid: the sell of one token, the buy of the
    other."""

    seq: int
    txid: str
    height: int | None
    time: int | None
    category: str
    direction: Literal["buy", "sell"]
    sats: int
    tokens: int
    volume_sats: int
    volume_tokens: int
    lp_fee: int
    pools: int
    pools_touched: int
    trader: str
    funding_addresses: tuple[str, ...]  # plain P2PKH CashAddrs of the non-pool inputs
    funding_pkhs: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class OracleUpdate:
    seq: int
    txid: str
    height: int | None
    time: int | None
    timestamp: int  # the commitment's timestamp
    price: int  # US cents per BCH
    sequence: int
    use_fee: int
    commitment: str


@dataclass(frozen=True, slots=True)
class PriceMessage:
    seq: int
    txid: str
    height: int | None
    time: int | None
    message: str
    signature: str
    pubkey: str
    timestamp: int
    message_sequence: int
    data_sequence: int
    price: int


@dataclass(frozen=True, slots=True)
class WalletEntry:
    name: str
    role: str
    wif: str
    address: str
    token_address: str
    pkh: str


@dataclass(frozen=True, slots=True)
class TxEntry:
    seq: int
    txid: str
    kind: TxKind
    height: int | None
    time: int | None


@dataclass(frozen=True, slots=True)
class ReorgEntry:
    time: int
    depth: int
    fork_height: int
    orphaned: tuple[str, ...]  # block hashes replaced


@dataclass(frozen=True, slots=True)
class DecoyEntry:
    """A BCH-only output paying an owner's pool bytecode: not a pool (anyone could drain it)."""

    outpoint: str
    owner_pkh: str
    sats: int


@dataclass(frozen=True, slots=True)
class ChainInfo:
    genesis_hash: str
    start_height: int  # the first block of the scenario
    start_time: int
    tip_height: int
    tip_hash: str
    end_time: int
    blocks: int  # blocks mined by the scenario (reorg replacements included)


@dataclass(frozen=True, slots=True)
class OracleInfo:
    category: str
    layout: Literal["delphi"]
    operator_address: str
    pubkey: str  # the key signing the GP messages


@dataclass(slots=True)
class MempoolPart:
    """Entries of transactions that are only in the mempool at the end of the scenario."""

    transactions: list[TxEntry] = field(default_factory=list)
    events: list[PoolEvent] = field(default_factory=list)
    trades: list[TradeEntry] = field(default_factory=list)
    oracle_updates: list[OracleUpdate] = field(default_factory=list)
    messages: list[PriceMessage] = field(default_factory=list)


@dataclass(slots=True)
class Ledger:
    version: int
    params: dict[str, object]
    chain: ChainInfo
    oracle: OracleInfo
    tokens: list[TokenEntry]
    pools: list[PoolEntry]
    events: list[PoolEvent]
    trades: list[TradeEntry]
    oracle_updates: list[OracleUpdate]
    messages: list[PriceMessage]
    wallets: list[WalletEntry]  # the printed test wallets
    actors: list[WalletEntry]  # everyone else who signed something (owners, traders, …)
    transactions: list[TxEntry]
    reorgs: list[ReorgEntry]
    decoys: list[DecoyEntry]
    mempool: MempoolPart
    extensions: dict[str, object] = field(default_factory=dict)  # e.g. lending, later

    # --- JSON -------------------------------------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        return orjson.loads(self.dumps())  # type: ignore[no-any-return]

    def dumps(self, *, indent: bool = False) -> bytes:
        """Canonical JSON bytes (sorted keys): equal ledgers give equal bytes."""
        option = orjson.OPT_SORT_KEYS | (orjson.OPT_INDENT_2 if indent else 0)
        return orjson.dumps(self, option=option)

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> Ledger:
        mp = obj["mempool"]
        return cls(
            version=int(obj["version"]),
            params=dict(obj["params"]),
            chain=ChainInfo(**obj["chain"]),
            oracle=OracleInfo(**obj["oracle"]),
            tokens=[_token(t) for t in obj["tokens"]],
            pools=[_pool(p) for p in obj["pools"]],
            events=[_event(e) for e in obj["events"]],
            trades=[_trade(t) for t in obj["trades"]],
            oracle_updates=[OracleUpdate(**u) for u in obj["oracle_updates"]],
            messages=[PriceMessage(**m) for m in obj["messages"]],
            wallets=[WalletEntry(**w) for w in obj["wallets"]],
            actors=[WalletEntry(**w) for w in obj["actors"]],
            transactions=[TxEntry(**t) for t in obj["transactions"]],
            reorgs=[ReorgEntry(**{**r, "orphaned": tuple(r["orphaned"])}) for r in obj["reorgs"]],
            decoys=[DecoyEntry(**d) for d in obj["decoys"]],
            mempool=MempoolPart(
                transactions=[TxEntry(**t) for t in mp["transactions"]],
                events=[_event(e) for e in mp["events"]],
                trades=[_trade(t) for t in mp["trades"]],
                oracle_updates=[OracleUpdate(**u) for u in mp["oracle_updates"]],
                messages=[PriceMessage(**m) for m in mp["messages"]],
            ),
            extensions=dict(obj.get("extensions", {})),
        )

    @classmethod
    def loads(cls, data: bytes | str) -> Ledger:
        return cls.from_json(orjson.loads(data))

    # --- queries the indexer and REST tests need ----------------------------------------------

    def token(self, category: str) -> TokenEntry:
        for t in self.tokens:
            if t.category == category:
                return t
        raise KeyError(category)

    def tokens_with_symbol(self, symbol: str) -> list[TokenEntry]:
        return [t for t in self.tokens if t.symbol == symbol]

    def pool(self, pool_id: str) -> PoolEntry:
        for p in self.pools:
            if p.pool_id == pool_id:
                return p
        raise KeyError(pool_id)

    def pool_events(self, pool_id: str, *, mempool: bool = False) -> list[PoolEvent]:
        """One lineage's events in order (confirmed; then the mempool's with `mempool`)."""
        found = [e for e in self.events if e.pool_id == pool_id]
        if mempool:
            found += [e for e in self.mempool.events if e.pool_id == pool_id]
        return found

    def pool_states_at(self, time: int) -> dict[str, Amounts]:
        """Every pool alive at `time` (block time) with its state then."""
        states: dict[str, Amounts] = {}
        for e in self.events:
            assert e.time is not None
            if e.time > time:
                break
            if e.after is None:
                states.pop(e.pool_id, None)
            else:
                states[e.pool_id] = e.after
        return states

    def trades_between(
        self, start: int, end: int, category: str | None = None
    ) -> Iterator[TradeEntry]:
        """Confirmed trades with start <= block time <= end (of one token, if given)."""
        for t in self.trades:
            assert t.time is not None
            if start <= t.time <= end and (category is None or t.category == category):
                yield t


def _token(obj: dict[str, Any]) -> TokenEntry:
    bcmr = obj.get("bcmr")
    return TokenEntry(**{**obj, "bcmr": None if bcmr is None else BcmrEntry(**bcmr)})


def _pool(obj: dict[str, Any]) -> PoolEntry:
    return PoolEntry(
        **{
            **obj,
            "initial": Amounts.from_json(obj["initial"]),
            "state": _amounts(obj["state"]),
            "live_state": _amounts(obj["live_state"]),
        }
    )


def _event(obj: dict[str, Any]) -> PoolEvent:
    return PoolEvent(**{**obj, "before": _amounts(obj["before"]), "after": _amounts(obj["after"])})


def _trade(obj: dict[str, Any]) -> TradeEntry:
    return TradeEntry(
        **{
            **obj,
            "funding_addresses": tuple(obj["funding_addresses"]),
            "funding_pkhs": tuple(obj["funding_pkhs"]),
        }
    )
