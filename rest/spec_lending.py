"""OpenAPI answer schemas of the lending endpoints, merged by `rest.spec.build`.

Semantics (units, what "crankable" means, the ratio buckets, the APR formula):
docs/api-lending.md.
"""

from __future__ import annotations

from indexer.store.queries_lending import RATIO_BUCKETS
from rest.routes.lending import V1_KINDS, V11_KINDS
from rest.spec import HEX64, TIME, UINT, Schema, array, nullable, obj, ref

CENTS = {**UINT, "description": "US cents (stablecoin base units)"}
SATS = {**UINT, "description": "sats"}
BP = {**UINT, "description": "annual interest, basis points"}
NFT_HASH = {**HEX64, "description": "owner NFT hash"}
PRICE_CENTS = {**UINT, "description": "US cents per BCH"}
MTP = {**TIME, "description": "median of the header times of the block and the 10 below it"}


def _row() -> dict[str, Schema]:
    """Fields every row carries: where it was confirmed."""
    return {"txid": HEX64, "height": UINT, "time": {**TIME, "description": "block header time"}}


def _loan(version: str) -> Schema:
    props: dict[str, Schema] = {
        **_row(),
        "vout": {**UINT, "description": "output index of the loan UTXO"},
        "borrower_hash": NFT_HASH,
    }
    if version == "v11":
        props["delegate_hash"] = nullable({**HEX64, "description": "the delegate's NFT hash"})
    props |= {
        "principal": CENTS,
        "rate_bp": BP,
        "loan_ts": {**TIME, "description": "the loan's timestamp (borrow, refinance, accrue)"},
        "collateral": SATS,
    }
    return obj(f"An active {version} loan (a loan UTXO).", props)


def _action(version: str) -> Schema:
    kinds = V11_KINDS if version == "v11" else V1_KINDS
    props: dict[str, Schema] = {
        **_row(),
        "mtp": MTP,
        "kind": {"enum": list(kinds)},
        "borrower_hash": NFT_HASH,
    }
    if version == "v11":
        props["delegate_hash"] = nullable(HEX64)
    for field, unit in (
        ("collateral", SATS),
        ("principal", CENTS),
        ("rate_bp", BP),
        ("loan_ts", TIME),
    ):
        props[f"{field}_before"] = nullable(unit)
        props[f"{field}_after"] = nullable(unit)
    owed = "interest owed at the block time, cents (repay, redeem, liquidation, refinance, accrue)"
    props["interest"] = nullable({**UINT, "description": owed})
    return obj(f"One {version} loan's action in one transaction.", props)


def _state(kind: str) -> Schema:
    props: dict[str, Schema] = {
        **_row(),
        "vout": UINT,
        "mtp": MTP,
        "staked": {**UINT, "description": "stablecoin base units (cents) staked"},
        "shares": UINT,
        "share_price": nullable({"type": "number", "description": "staked / shares"}),
    }
    if kind == "pool":
        props["bch_pot"] = {**SATS, "description": "sats seized from liquidations"}
    return obj(f"A state of the v11 {kind} (one re-creation of its UTXO).", props)


def _stats(version: str) -> Schema:
    buckets = obj(
        "Active loans per collateral-ratio bucket (percent; lower bound included).",
        dict.fromkeys(RATIO_BUCKETS, UINT),
    )
    return obj(
        f"Totals of the active {version} loans.",
        {
            "now": {**TIME, "description": "the time interest is owed at"},
            "loans": UINT,
            "collateral": SATS,
            "principal": CENTS,
            "debt": {**CENTS, "description": "principal plus interest owed at now"},
            "average_rate": nullable({"type": "number", "description": "principal-weighted bp"}),
            "oracle_price": nullable(PRICE_CENTS),
            "oracle_time": nullable({**TIME, "description": "the price update's timestamp"}),
            "collateral_ratio": nullable(buckets),
            "redeemable": nullable(
                {**UINT, "description": "loans whose rate_bp is at most the rate oracle's"}
            ),
            "rate_bp": nullable({**UINT, "description": "the interest-rate oracle's bp at now"}),
            "rate_time": nullable({**TIME, "description": "the rate update's timestamp"}),
        },
    )


SCHEMAS: dict[str, Schema] = {
    "LendingLoan": _loan("v11"),
    "LendingLoanV1": _loan("v1"),
    "LendingLoans": array(ref("LendingLoan")),
    "LendingLoansV1": array(ref("LendingLoanV1")),
    "LendingAction": _action("v11"),
    "LendingActionV1": _action("v1"),
    "LendingActions": array(ref("LendingAction")),
    "LendingActionsV1": array(ref("LendingActionV1")),
    "LendingBarStates": array(_state("bar")),
    "LendingPoolStates": array(_state("pool")),
    "LendingAllowances": array(
        obj(
            "An unspent output payable to the owner NFT hash (pay-to-NFT-hash).",
            {
                **_row(),
                "vout": UINT,
                "owner_hash": NFT_HASH,
                "sats": SATS,
                "category": nullable({**HEX64, "description": "token category, if any"}),
                "token_amount": {**UINT, "description": "fungible token base units"},
            },
        )
    ),
    "LendingCrankable": obj(
        "Active v11 loans a keeper may process now, funded to pay the fee.",
        {
            "now": TIME,
            "price": nullable({**PRICE_CENTS, "description": "the price used, cents per BCH"}),
            "rate_bp": nullable({**UINT, "description": "the rate oracle's bp used"}),
            "loans": array(
                obj(
                    "A crankable loan.",
                    {
                        **_loan("v11")["properties"],
                        "reason": {"enum": ["liquidate", "redeem", "accrue"]},
                        "interest": {**CENTS, "description": "interest owed at now"},
                        "debt": {**CENTS, "description": "principal + interest"},
                    },
                )
            ),
        },
    ),
    "LendingApr": obj(
        "Annualised growth of the bar's and the pool's share price over the window.",
        {
            "now": TIME,
            "window": {**UINT, "description": "seconds"},
            "bar": nullable({"type": "number", "description": "per year, 0.05 = 5 %"}),
            "pool": nullable({"type": "number", "description": "per year, excluding the BCH pot"}),
            "excludes_bch_pot": {"const": True},
        },
    ),
    "LendingStats": _stats("v11"),
    "LendingStatsV1": _stats("v1"),
}
