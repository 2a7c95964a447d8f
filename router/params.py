"""`quote` and `tx.build` params → typed requests, and the router's own configuration.

Everything a client sends is checked here, once, so the route search and the builder only ever
see well-formed values; every rejection is a `bad_request` naming the offending field. Unknown
fields are rejected too: a misspelt `min_ouput` must not silently disable slippage protection.

Field names are the specification's (`funding`, and `script_hex` in a funding input). The names
of the previous release, `funding_inputs` and `locking_script_hex`, are accepted for one more
release as deprecated aliases; a request giving both a name and its alias is refused, since the
two could disagree and neither is obviously the one meant.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from functools import lru_cache
from typing import Any

from bch.cashaddr import KNOWN_PREFIXES, Address, CashAddrError
from bch.script import ScriptKind, classify_locking
from bch.token import MAX_TOKEN_AMOUNT, TokenData
from bch.tx import MAX_SATS, OutPoint, TxOutput, hex_to_hash
from router.errors import bad_request
from router.pools import BCH, is_hex_id

MAX_FUNDING_INPUTS = 500
MIN_FEE_PER_BYTE = 1.0  # the relay floor
MAX_FEE_PER_BYTE = 1000.0  # beyond this a request is surely a unit mistake
MAX_FEE_BPS = 1000  # 10 %
DEFAULT_FEE_BPS = 10  # the spec's router fee rate
DEFAULT_PORT = 8765  # the daemon's WebSocket port

_CANONICAL = re.compile(r"0|[1-9][0-9]{0,24}")
_QUOTE_FIELDS = frozenset({"sell", "buy", "amount", "side", "fee_per_byte"})
# Deprecated aliases (one release): the previous release's names → the specification's.
FUNDING_ALIAS = "funding_inputs"
SCRIPT_ALIAS = "locking_script_hex"
_BUILD_FIELDS = _QUOTE_FIELDS | {
    "min_output",
    "receive_addr",
    "change_addr",
    "funding",
    FUNDING_ALIAS,
}
_FUNDING_FIELDS = frozenset(
    {"txid", "vout", "value", "script_hex", SCRIPT_ALIAS, "address", "token"}
)


class Side(StrEnum):
    SELL = "sell"  # exact in: `amount` of the sold asset
    BUY = "buy"  # exact out: `amount` of the bought asset


_SIDES = {side.value: side for side in Side}  # a dict look-up, not an enum call per request


def fee_rate_per_kb(fee_per_byte: float) -> int:
    """Sats per 1000 bytes: integer fee arithmetic from here on (1.1 sat/B is 1100 sat/kB)."""
    return round(fee_per_byte * 1000)


def miner_fee(size: int, fee_per_kb: int) -> int:
    """Sats for `size` bytes at `fee_per_kb`, rounded up (never below the asked rate)."""
    return -(-size * fee_per_kb // 1000)


@dataclass(frozen=True, slots=True)
class RouterConfig:
    """Operator settings shared by the daemon and the offline CLI.

    The router fee needs somewhere to go: without `fee_address` no fee is charged whatever
    `fee_bps` says. The fee address must be token-aware, because token→token fees are paid in
    tokens.
    """

    fee_bps: int = DEFAULT_FEE_BPS
    fee_address: str | None = None
    fee_per_byte: float = 1.0  # default miner fee rate when a request names none
    network: str | None = None  # CashAddr prefix every address must use; None: any, consistent
    _fee_locking: bytes | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if isinstance(self.fee_bps, bool) or not 0 <= self.fee_bps <= MAX_FEE_BPS:
            raise ValueError(f"fee_bps must be an integer from 0 to {MAX_FEE_BPS}")
        if not MIN_FEE_PER_BYTE <= self.fee_per_byte <= MAX_FEE_PER_BYTE:
            raise ValueError(
                f"fee_per_byte must be from {MIN_FEE_PER_BYTE} to {MAX_FEE_PER_BYTE} sat/byte"
            )
        if self.network is not None and self.network not in KNOWN_PREFIXES:
            raise ValueError(f"unknown network prefix {self.network!r}")
        if self.fee_address is not None:
            try:
                addr = Address.decode(self.fee_address, prefix=self.network)
            except CashAddrError as exc:
                raise ValueError(f"fee address is not a valid CashAddr: {exc}") from None
            if not addr.token_aware:
                raise ValueError(
                    "fee address must be token-aware (z… or r…): token→token fees are tokens"
                )
            object.__setattr__(self, "_fee_locking", addr.locking_bytecode())

    @property
    def fee_locking(self) -> bytes | None:
        return self._fee_locking

    @property
    def effective_fee_bps(self) -> int:
        return self.fee_bps if self.fee_address is not None else 0


@dataclass(frozen=True, slots=True)
class QuoteRequest:
    sell: str  # "bch" or a 64-hex token id (display order, lowercase)
    buy: str
    amount: int
    side: Side = Side.SELL
    fee_per_byte: float | None = None

    @property
    def exact_in(self) -> bool:
        return self.side is Side.SELL


@dataclass(frozen=True, slots=True)
class Destination:
    """An address the user named, decoded once."""

    address: str
    locking: bytes
    token_aware: bool
    prefix: str

    @classmethod
    def parse(cls, text: object, field: str, network: str | None) -> Destination:
        if not isinstance(text, str) or not text:
            raise bad_request(f"{field} must be a CashAddr string", field=field)
        try:
            return _decoded(text, network)
        except CashAddrError as exc:
            raise bad_request(f"{field} is not a valid CashAddr: {exc}", field=field) from None


@lru_cache(maxsize=4096)
def _decoded(text: str, network: str | None) -> Destination:
    """The `Destination` of a CashAddr: a pure function of its text, and decoding (checksum
    included) costs more than routing a small order; wallets send the same few addresses
    request after request. Failures are not cached (they raise)."""
    addr = Address.decode(text, prefix=network)
    return Destination(text, addr.locking_bytecode(), addr.token_aware, addr.prefix)


@dataclass(frozen=True, slots=True)
class FundingInput:
    """One UTXO the client offers to fund the trade (P2PKH, plain or token-aware)."""

    index: int  # position in the request's `funding`
    outpoint: OutPoint
    value: int
    locking: bytes
    token: TokenData | None = None

    @property
    def output(self) -> TxOutput:
        """The spent output exactly as the signer must see it."""
        return TxOutput(self.value, self.locking, self.token)


@dataclass(frozen=True, slots=True)
class BuildRequest:
    quote: QuoteRequest
    receive: Destination
    change: Destination
    funding: tuple[FundingInput, ...]
    min_output: int | None = None


# --- field parsers -----------------------------------------------------------------------------


def _require_object(params: object, what: str) -> Mapping[str, Any]:
    if not isinstance(params, dict):
        raise bad_request(f"{what} params must be a JSON object")
    return params


def _reject_unknown(params: Mapping[str, Any], allowed: frozenset[str], where: str) -> None:
    if allowed.issuperset(params):
        return
    unknown = sorted(set(params) - allowed)
    if unknown:
        raise bad_request(f"unknown {where}field(s): {', '.join(unknown)}", fields=unknown)


def parse_amount(value: object, field: str, *, minimum: int = 1, maximum: int) -> int:
    """An integer string (or JSON integer) in [minimum, maximum]."""
    if isinstance(value, bool):
        raise bad_request(f"{field} must be an integer string", field=field)
    if isinstance(value, int):
        n = value
    elif isinstance(value, str) and _CANONICAL.fullmatch(value):
        n = int(value)
    else:
        raise bad_request(
            f"{field} must be a decimal integer string (no sign, no leading zeros), got {value!r}",
            field=field,
        )
    if not minimum <= n <= maximum:
        raise bad_request(f"{field} must be from {minimum} to {maximum}, got {n}", field=field)
    return n


def parse_asset(value: object, field: str) -> str:
    if isinstance(value, str):
        text = value.lower()
        if text == BCH or is_hex_id(text):
            return text
    raise bad_request(f'{field} must be "bch" or a 64-hex token id, got {value!r}', field=field)


def parse_fee_per_byte(value: object) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise bad_request("fee_per_byte must be a number", field="fee_per_byte")
    rate = float(value)
    if not MIN_FEE_PER_BYTE <= rate <= MAX_FEE_PER_BYTE:
        raise bad_request(
            f"fee_per_byte must be from {MIN_FEE_PER_BYTE:g} to {MAX_FEE_PER_BYTE:g} sat/byte",
            field="fee_per_byte",
        )
    return rate


def _parse_quote_fields(p: Mapping[str, Any]) -> QuoteRequest:
    for name in ("sell", "buy", "amount"):
        if name not in p:
            raise bad_request(f"missing field: {name}", field=name)
    sell = parse_asset(p["sell"], "sell")
    buy = parse_asset(p["buy"], "buy")
    if sell == buy:
        raise bad_request("sell and buy must be different assets")
    side_text = p.get("side", "sell")
    side = _SIDES.get(side_text) if isinstance(side_text, str) else None
    if side is None:
        raise bad_request(f'side must be "sell" or "buy", got {side_text!r}', field="side")
    amount_asset = sell if side is Side.SELL else buy
    amount = parse_amount(
        p["amount"], "amount", maximum=MAX_SATS if amount_asset == BCH else MAX_TOKEN_AMOUNT
    )
    return QuoteRequest(sell, buy, amount, side, parse_fee_per_byte(p.get("fee_per_byte")))


def parse_quote_params(params: object) -> QuoteRequest:
    """`quote` params: `{sell, buy, amount, side?, fee_per_byte?}`."""
    p = _require_object(params, "quote")
    _reject_unknown(p, _QUOTE_FIELDS, "")
    return _parse_quote_fields(p)


def _aliased(entry: Mapping[str, Any], name: str, alias: str, where: str) -> object:
    """The value of a field that may come under its deprecated alias (None when absent)."""
    if alias not in entry:
        return entry.get(name)
    if name in entry:
        field = f"{where}{name}"
        raise bad_request(
            f"give {field} or its deprecated alias {where}{alias}, not both", field=field
        )
    return entry[alias]


def _parse_locking(entry: Mapping[str, Any], where: str, network: str | None) -> bytes:
    script_hex = _aliased(entry, "script_hex", SCRIPT_ALIAS, f"{where}.")
    address = entry.get("address")
    if script_hex is None and address is None:
        raise bad_request(f"{where}: give script_hex (or address)")
    locking: bytes | None = None
    if script_hex is not None:
        field = f"{where}.script_hex"
        if not isinstance(script_hex, str):
            raise bad_request(f"{field} must be a hex string", field=field)
        try:
            locking = bytes.fromhex(script_hex)
        except ValueError:
            raise bad_request(f"{field} is not hex", field=field) from None
    if address is not None:
        dest = Destination.parse(address, f"{where}.address", network)
        if locking is not None and locking != dest.locking:
            raise bad_request(f"{where}: address and script_hex disagree")
        locking = dest.locking
    assert locking is not None
    if classify_locking(locking)[0] is not ScriptKind.P2PKH:
        field = f"{where}.{'address' if script_hex is None else 'script_hex'}"
        raise bad_request(
            f"{field}: only P2PKH funding inputs are supported (plain or token-aware)", field=field
        )
    return locking


def _parse_funding_input(entry: object, i: int, network: str | None) -> FundingInput:
    where = f"funding[{i}]"
    if not isinstance(entry, dict):
        raise bad_request(f"{where} must be an object")
    _reject_unknown(entry, _FUNDING_FIELDS, f"{where} ")
    raw_txid = entry.get("txid")
    txid = raw_txid.lower() if isinstance(raw_txid, str) else ""
    if not is_hex_id(txid):
        raise bad_request(f"{where}.txid must be 64 hex characters", field=f"{where}.txid")
    vout = entry.get("vout")
    if isinstance(vout, bool) or not isinstance(vout, int) or not 0 <= vout <= 0xFFFFFFFF:
        raise bad_request(
            f"{where}.vout must be an integer from 0 to 4294967295", field=f"{where}.vout"
        )
    if "value" not in entry:
        raise bad_request(f"{where}: missing value")
    value = parse_amount(entry["value"], f"{where}.value", maximum=MAX_SATS)
    locking = _parse_locking(entry, where, network)
    token = None
    if entry.get("token") is not None:
        raw = entry["token"]
        if not isinstance(raw, dict):
            raise bad_request(f"{where}.token must be an object", field=f"{where}.token")
        try:
            token = TokenData.from_json(raw)
        except ValueError as exc:
            raise bad_request(f"{where}.token: {exc}", field=f"{where}.token") from None
    return FundingInput(i, OutPoint(hex_to_hash(txid), vout), value, locking, token)


def parse_build_params(params: object, config: RouterConfig | None = None) -> BuildRequest:
    """`tx.build` params (see schemas/rpc/tx.build.params.json); errors name the spec's
    fields (`funding`, `funding[i].script_hex`) even when the request used an alias."""
    network = config.network if config is not None else None
    p = _require_object(params, "tx.build")
    _reject_unknown(p, _BUILD_FIELDS, "")
    quote = _parse_quote_fields(p)
    raw_funding = _aliased(p, "funding", FUNDING_ALIAS, "")
    for name in ("receive_addr", "change_addr", "funding"):
        if name not in p and (name != "funding" or FUNDING_ALIAS not in p):
            raise bad_request(f"missing field: {name}", field=name)
    receive = Destination.parse(p["receive_addr"], "receive_addr", network)
    change = Destination.parse(p["change_addr"], "change_addr", network)
    if receive.prefix != change.prefix:
        raise bad_request(
            f"receive_addr ({receive.prefix}) and change_addr ({change.prefix}) are on "
            "different networks"
        )
    if quote.buy != BCH and not receive.token_aware:
        raise bad_request(
            "receive_addr must be a token-aware address (z… or r…) to receive tokens",
            field="receive_addr",
        )
    if not isinstance(raw_funding, list):
        raise bad_request("funding must be an array", field="funding")
    if not 1 <= len(raw_funding) <= MAX_FUNDING_INPUTS:
        raise bad_request(
            f"funding must hold 1 to {MAX_FUNDING_INPUTS} inputs, got {len(raw_funding)}",
            field="funding",
        )
    funding = tuple(
        _parse_funding_input(entry, i, network or receive.prefix)
        for i, entry in enumerate(raw_funding)
    )
    seen: set[OutPoint] = set()
    for f in funding:
        if f.outpoint in seen:
            raise bad_request(f"funding[{f.index}]: outpoint {f.outpoint} appears twice")
        seen.add(f.outpoint)
    min_output = None
    if p.get("min_output") is not None:
        min_output = parse_amount(
            p["min_output"],
            "min_output",
            minimum=0,
            maximum=MAX_SATS if quote.buy == BCH else MAX_TOKEN_AMOUNT,
        )
    return BuildRequest(quote, receive, change, funding, min_output)
