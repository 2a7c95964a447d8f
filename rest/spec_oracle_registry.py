"""OpenAPI schemas and paths of the oracle and registry endpoints, merged by `rest.spec.build`."""

from __future__ import annotations

from typing import Any

from rest import params as prm
from rest.routes.oracle import MAX_UPDATES
from rest.spec import (
    HEX64,
    TIME,
    UINT,
    Schema,
    _param,
    array,
    nullable,
    obj,
    op,
    q_time,
    ref,
)

STRING = {"type": "string"}

SCHEMAS: dict[str, Schema] = {
    "FeedPoint": obj(
        "One update of an oracle feed (a re-creation of its oracle UTXO).",
        {
            "time": {**TIME, "description": "the oracle's own timestamp"},
            "price": {**UINT, "description": "US cents per BCH"},
            "txid": HEX64,
            "blockhash": {**HEX64, "description": "the block that mined the update"},
            "sequence": {**UINT, "description": "the feed's update sequence"},
        },
    ),
    "FeedHistory": array(ref("FeedPoint")),
    "FeedClosestPoint": obj(
        "The feed update closest to a time.",
        {
            "oracle_timestamp": {**TIME, "description": "the oracle's own timestamp"},
            "oracle_price": {**UINT, "description": "US cents per BCH"},
            "oracle_sequence": {**UINT, "description": "the feed's update sequence"},
            "token_id": {**HEX64, "description": "the feed's token category (the oracle's)"},
            "txid": HEX64,
            "blockhash": {**HEX64, "description": "the block that mined the update"},
        },
    ),
    "FeedClosest": nullable(ref("FeedClosestPoint")),
    "RegistryEntry": obj(
        "A registry's current snapshot of the token's identity, flattened.",
        {
            "name": STRING,
            "description": STRING,
            "token": nullable(
                obj(
                    "The token part (null: the identity describes no token).",
                    {"category": HEX64, "symbol": STRING, "decimals": {**UINT, "maximum": 18}},
                )
            ),
            "uris": obj(
                "Links, as the registry gives them; null where it gives none.",
                {"icon": nullable(STRING), "web": nullable(STRING)},
            ),
            "filemeta": obj(
                "Where the entry comes from.",
                {
                    "expected_hash": {
                        **HEX64,
                        "description": "the hash published on chain (off chain, where "
                        "nothing publishes one: the stored copy's, = actual_hash)",
                    },
                    "actual_hash": {
                        **HEX64,
                        "description": "sha256 of the stored copy's raw bytes",
                    },
                    "source": {
                        "type": "string",
                        "description": "onchain, or the off-chain source's name",
                    },
                },
            ),
        },
    ),
    "RegistryToken": nullable(ref("RegistryEntry")),
    "RegistryTokenAll": array(ref("RegistryEntry")),
}

_FEED = {**HEX64, "description": "the feed's token category (64 hex)"}
_CATEGORY = {"type": "string", "description": "64-hex token id, or a symbol"}


def paths() -> dict[str, Any]:
    """Path → GET operation (built with `rest.spec.op`)."""
    step = _param(
        "stepsize",
        "query",
        {"type": "integer", "minimum": prm.MIN_STEP, "maximum": prm.MAX_STEP},
        "one entry per interval [start + k·stepsize, start + (k+1)·stepsize): the last update "
        f"in it; at most {prm.MAX_INTERVALS} intervals (default: every update, at most "
        f"{MAX_UPDATES})",
        False,
    )
    category = _param("category", "path", _CATEGORY, "token id (64 hex) or symbol", True)
    return {
        "/oracle/feed/{token}/history": op(
            "An oracle feed's updates",
            "FeedHistory",
            [
                _param("token", "path", _FEED, "the feed's token category (64 hex)", True),
                _param("start", "query", {**UINT, "maximum": prm.MAX_TIME}, "window start", True),
                q_time("end", "window end, inclusive (default: now)"),
                step,
            ],
            "Oldest first; [] when the feed has no update in the window (or is unknown).",
        ),
        "/oracle/feed/closest": op(
            "The update closest to a time",
            "FeedClosest",
            [
                _param("token_id", "query", _FEED, "the feed's token category (64 hex)", True),
                q_time("timestamp", "Unix seconds (default: now)"),
            ],
            "Ties go to the earlier update; null when the feed has no update. A malformed "
            "token_id is a 404.",
        ),
        "/registry/token/{category}": op(
            "The token's on-chain registry entry",
            "RegistryToken",
            [category],
            "null when no registry on the token's authchain has a stored copy describing it, "
            "or no token has the symbol.",
        ),
        "/registry/token/{category}/all": op(
            "Every registry's entry for the token",
            "RegistryTokenAll",
            [category],
            "On-chain first, then each configured off-chain source (by name) describing it; "
            "[] when none does, or no token has the symbol.",
        ),
    }
