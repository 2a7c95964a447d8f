"""OpenAPI answer schemas of the oracle and registry endpoints, merged by `rest.spec.build`."""

from __future__ import annotations

from rest.spec import HEX64, TIME, UINT, Schema, array, nullable, obj, ref

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
