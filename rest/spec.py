"""The OpenAPI 3.1 document, built here and kept in `schemas/openapi.json` (a test checks the
file is current; regenerate with `python -m rest.spec > schemas/openapi.json`).

Operations come from the endpoint declarations (`rest.endpoints`), the same that parse the
requests. Answers: one schema per response shape, every object closed
(`additionalProperties: false`) so the tests' validation catches any undocumented field.
"""

from __future__ import annotations

import sys
from typing import Any

import orjson

from rest.declare import Endpoint
from rest.endpoints import ENDPOINTS

Schema = dict[str, Any]

HEX64 = {"type": "string", "pattern": "^[0-9a-f]{64}$"}
HEX40 = {"type": "string", "pattern": "^[0-9a-f]{40}$"}
POOL_ID = {"type": "string", "pattern": "^[0-9a-f]{64}:(0|[1-9][0-9]*)$"}
INT = {"type": "integer"}
UINT = {"type": "integer", "minimum": 0}
TIME = {"type": "integer", "minimum": 0, "description": "Unix seconds"}
PRICE = {"type": "number", "description": "sats per token base unit"}


def nullable(schema: Schema) -> Schema:
    t = schema.get("type")
    return (
        {**schema, "type": [t, "null"]}
        if isinstance(t, str)
        else {"anyOf": [schema, {"type": "null"}]}
    )


def obj(description: str, props: dict[str, Schema]) -> Schema:
    return {
        "type": "object",
        "description": description,
        "properties": props,
        "required": list(props),
        "additionalProperties": False,
    }


def ref(name: str) -> Schema:
    return {"$ref": f"#/components/schemas/{name}"}


def array(items: Schema) -> Schema:
    return {"type": "array", "items": items}


SCHEMAS: dict[str, Schema] = {
    "Error": obj(
        "Every non-2xx answer.",
        {
            "error": {
                "type": "object",
                "properties": {
                    "code": {
                        "type": "string",
                        "description": "machine-readable: invalid_parameter, missing_parameter, "
                        "unknown_parameter, ambiguous_symbol, not_found, unknown_token, "
                        "unknown_pool, method_not_allowed, rate_limited, not_synced, "
                        "database_unavailable, internal_error",
                    },
                    "message": {"type": "string"},
                    "parameter": {"type": "string", "description": "the offending parameter"},
                    "candidates": array(
                        obj(
                            "A token an ambiguous symbol names.",
                            {
                                "token_id": HEX64,
                                "symbol": nullable({"type": "string"}),
                                "name": nullable({"type": "string"}),
                            },
                        )
                    ),
                },
                "required": ["code", "message"],
                "additionalProperties": False,
            }
        },
    ),
    "Pool": obj(
        "A live pool UTXO.",
        {
            "owner_p2pkh_addr": {
                "type": "string",
                "description": "the owner's token-aware P2PKH CashAddr",
            },
            "owner_pkh": HEX40,
            "sats": UINT,
            "token_id": HEX64,
            "tokens": UINT,
            "tx_pos": {**UINT, "description": "output index of the UTXO"},
            "txid": HEX64,
            "pool_id": {
                **POOL_ID,
                "description": "the lineage: outpoint of the pool's first UTXO the index knows",
            },
        },
    ),
    "PoolActive": obj("Live pools of a token and/or owner.", {"active": array(ref("Pool"))}),
    "PoolPage": obj(
        "Live pools of every token at their latest state, by token then chain order.",
        {"pools": array(ref("Pool")), "total": {**UINT, "description": "all live pools"}},
    ),
    "TokenPoolTokens": obj(
        "Tokens with at least one live pool, in the order they appeared.",
        {
            "tokens": array(
                obj(
                    "A token.",
                    {
                        "token_id": HEX64,
                        "first_seen_height": {
                            **nullable(UINT),
                            "description": "null: its only pools are unconfirmed",
                        },
                        "first_seen_time": nullable(TIME),
                        "first_pool_id": POOL_ID,
                        "pools": {**UINT, "description": "live pools"},
                        "tvl_sats": UINT,
                        "tvl_tokens": UINT,
                    },
                )
            )
        },
    ),
    "PoolState": obj(
        "One state of a pool lineage (a UTXO).",
        {
            "k": {"type": "string", "pattern": "^[0-9]+$", "description": "sats × tokens"},
            "sats": UINT,
            "tokens": UINT,
            "timestamp": TIME,
            "txid": HEX64,
            "height": UINT,
        },
    ),
    "PoolHistory": obj(
        "A pool lineage's states in chain order.",
        {
            "pool_id": POOL_ID,
            "owner_pkh": HEX40,
            "token_id": HEX64,
            "history": array(ref("PoolState")),
        },
    ),
    "AggregatedApy": obj(
        "LP yield over a window (docs/api.md).",
        {
            "apy": {
                "type": "string",
                "pattern": "^-?[0-9]+\\.[0-9]{10}$",
                "description": "percent per year, decimal string",
            },
            "pools": {**UINT, "description": "pool lineages counted"},
        },
    ),
    "ContractCount": obj(
        "Pool contracts.",
        {
            "active": {**UINT, "description": "live pools"},
            "ended": {**UINT, "description": "withdrawn lineages"},
            "interactions": {**UINT, "description": "trades (transaction × token)"},
        },
    ),
    "FirstPool": obj(
        "The first UTXO of the token's first pool.",
        {
            "owner_p2pkh_addr": {"type": "string"},
            "owner_pkh": HEX40,
            "sats": UINT,
            "token_id": HEX64,
            "tokens": UINT,
            "tx_pos": UINT,
            "txid": HEX64,
            "pool_id": POOL_ID,
            "height": UINT,
            "timestamp": TIME,
        },
    ),
    "PriceCurrent": obj(
        "Liquidity-weighted marginal price: Σ sats / Σ tokens of the live pools.",
        {"price": nullable(PRICE)},
    ),
    "PriceAt": obj(
        "Execution price of the last trade at or before the time, and that trade's time.",
        {"price": nullable(PRICE), "timestamp": nullable(TIME)},
    ),
    "PriceHistory": obj(
        "Per interval with trades: volume-weighted average, min and max execution price.",
        {
            "history": array(
                obj(
                    "An interval.",
                    {
                        "avg": PRICE,
                        "max": PRICE,
                        "min": PRICE,
                        "time": {**TIME, "description": "interval start"},
                    },
                )
            )
        },
    ),
    "Candlesticks": obj(
        "Per interval with trades: OHLC of execution prices in time order, and volumes.",
        {
            "candlesticks": array(
                obj(
                    "A candle.",
                    {
                        "open": PRICE,
                        "high": PRICE,
                        "low": PRICE,
                        "close": PRICE,
                        "time": {**TIME, "description": "interval start"},
                        "volume_sats": UINT,
                        "volume_tokens": UINT,
                        "transaction_count": UINT,
                    },
                )
            )
        },
    ),
    "Bcmr": nullable(
        obj(
            "Registry metadata (null until a registry knows the token).",
            {
                "name": nullable({"type": "string"}),
                "description": nullable({"type": "string"}),
                "token": obj(
                    "Token part.",
                    {
                        "category": HEX64,
                        "decimals": nullable(INT),
                        "symbol": nullable({"type": "string"}),
                    },
                ),
                "uris": obj(
                    "Links.",
                    {"icon": nullable({"type": "string"}), "web": nullable({"type": "string"})},
                ),
            },
        )
    ),
    "TokenObject": obj(
        "A token as of the index tip (docs/api.md, token list).",
        {
            "token_id": HEX64,
            "display_name": nullable({"type": "string"}),
            "display_symbol": nullable({"type": "string"}),
            "price_now": nullable(PRICE),
            "price_now_usd": nullable({"type": "number"}),
            "price_24h": nullable(PRICE),
            "price_24h_usd": nullable({"type": "number"}),
            "price_7d": nullable(PRICE),
            "price_7d_usd": nullable({"type": "number"}),
            "change_24h_bp": nullable(INT),
            "change_24h_usd_bp": nullable(INT),
            "change_7d_bp": nullable(INT),
            "change_7d_usd_bp": nullable(INT),
            "apy_30d_bp": INT,
            "score": UINT,
            "score_rank": {"type": "integer", "minimum": 1},
            "trade_count": UINT,
            "trade_volume": {**UINT, "description": "sats, last 24 h"},
            "tvl_sats": UINT,
            "tvl_tokens": UINT,
            "pools": {**UINT, "description": "live pools"},
            "bcmr": ref("Bcmr"),
        },
    ),
    "TokenObjects": array(ref("TokenObject")),
    "VolumeList": obj(
        "Tokens by traded volume over a window.",
        {
            "period_start": TIME,
            "period_end": TIME,
            "tokens": array(
                obj(
                    "A token's volume.",
                    {
                        "token_id": HEX64,
                        "display_symbol": nullable({"type": "string"}),
                        "display_name": nullable({"type": "string"}),
                        "volume_sats": UINT,
                        "volume_tokens": UINT,
                        "trade_count": UINT,
                    },
                )
            ),
        },
    ),
    "Trade": obj(
        "One transaction's trade of one token.",
        {
            "txid": HEX64,
            "blockhash": HEX64,
            "height": UINT,
            "timestamp_guess": {**TIME, "description": "block header time"},
            "token_id": HEX64,
            "direction": {"enum": ["buy", "sell"]},
            "sats": {**UINT, "description": "BCH the trader paid (buy) or got (sell)"},
            "tokens": {**UINT, "description": "tokens the trader got (buy) or paid (sell)"},
            "volume_sats": UINT,
            "volume_tokens": UINT,
            "price": PRICE,
            "lp_fee": UINT,
            "pools": {**UINT, "description": "pools of this token traded with"},
            "pools_touched": {**UINT, "description": "pools the transaction changed"},
        },
    ),
    "TxLatest": array(ref("Trade")),
    "UniqueAddresses": array(
        {
            "type": "array",
            "description": '[month "YYYY-MM", addresses]',
            # anyOf, not prefixItems: schemathesis 4 rewrites prefixItems into a draft-4 items
            # list that its own 3.1 check then refuses.
            "items": {"anyOf": [{"type": "string", "pattern": "^[0-9]{4}-[0-9]{2}$"}, UINT]},
            "minItems": 2,
            "maxItems": 2,
        }
    ),
    "ValueLocked": obj("Sats locked in all pools.", {"satoshis": UINT}),
    "TokenValueLocked": obj(
        "Value locked in one token's pools.",
        {"satoshis": UINT, "token_amount": UINT, "token_id": HEX64},
    ),
    "Volume": obj(
        "Traded volume of every token over a window.",
        {"total_volume_sats": UINT, "period_start": TIME, "period_end": TIME},
    ),
    "TokenVolume": obj(
        "Traded volume of one token over a window.",
        {
            "volume_sats": UINT,
            "volume_tokens": UINT,
            "token_id": HEX64,
            "period_start": TIME,
            "period_end": TIME,
        },
    ),
    "Health": {
        **obj(
            "Index and database status.",
            {
                "status": {"enum": ["ok", "syncing", "empty", "unavailable"]},
                "database": {"enum": ["ok", "unavailable"]},
                "index_height": nullable(UINT),
                "index_hash": nullable(HEX64),
                "index_time": nullable(TIME),
                "chain_height": nullable(UINT),
                "lag_blocks": nullable(UINT),
                "lag_seconds": nullable(UINT),
                "synced": {"type": "boolean"},
                "uptime_seconds": UINT,
                "error": {"type": "string"},
            },
        ),
        "required": [
            "status",
            "database",
            "index_height",
            "index_hash",
            "index_time",
            "chain_height",
            "lag_blocks",
            "lag_seconds",
            "synced",
            "uptime_seconds",
        ],
    },
}


ERRORS = {
    "400": "bad parameter (which and why)",
    "404": "unknown token or pool",
    "405": "method not allowed",
    "429": "rate limited (see Retry-After)",
    "503": "index not synced past the requested time, or database unavailable",
}


def operation(endpoint: Endpoint[Any]) -> dict[str, Any]:
    """The GET operation: parameters and description from the declaration, the 200 answer's
    schema, and the error answers every endpoint shares."""
    out = endpoint.operation()
    out["operationId"] = "get_" + "_".join(
        part.strip("{}") for part in endpoint.path.strip("/").split("/")
    )
    responses: dict[str, Any] = {
        "200": {
            "description": "OK (headers: X-Index-Height, ETag, Cache-Control)",
            "content": {"application/json": {"schema": ref(endpoint.answer)}},
        },
        "304": {"description": "Not modified (If-None-Match matched the ETag)"},
    }
    for code in ERRORS:
        responses[code] = {"$ref": f"#/components/responses/E{code}"}
    out["responses"] = responses
    return out


def build() -> dict[str, Any]:
    # The oracle/registry and lending modules build on this one's helpers, hence the late import.
    from rest import spec_lending, spec_oracle_registry

    schemas = {**SCHEMAS, **spec_oracle_registry.SCHEMAS, **spec_lending.SCHEMAS}
    paths: dict[str, Any] = {e.path: {"get": operation(e)} for e in ENDPOINTS}
    paths["/health"] = {
        "get": {
            "operationId": "get_health",
            "summary": "Index height, lag behind the chain tip, database status",
            "responses": {
                "200": {
                    "description": "database readable",
                    "content": {"application/json": {"schema": ref("Health")}},
                },
                "503": {
                    "description": "database unavailable",
                    "content": {"application/json": {"schema": ref("Health")}},
                },
            },
        }
    }
    paths["/metrics"] = {
        "get": {
            "operationId": "get_metrics",
            "summary": "Prometheus metrics: requests and latencies per route, index height",
            "responses": {
                "200": {
                    "description": "text exposition format 0.0.4",
                    "content": {"text/plain": {"schema": {"type": "string"}}},
                }
            },
        }
    }
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "ladle data API",
            "version": "1.0.0",
            "description": "Cauldron DEX pools, prices, volume, value locked and tokens, read "
            "from the ladle index. Prices are sats per token base unit; timestamps are Unix "
            "seconds; values beyond 2^53 are decimal strings. Semantics: docs/api.md.",
        },
        "paths": paths,
        "components": {
            "schemas": schemas,
            "responses": {
                f"E{code}": {
                    "description": text,
                    "content": {"application/json": {"schema": ref("Error")}},
                }
                for code, text in ERRORS.items()
            },
        },
    }


def dumps() -> bytes:
    return orjson.dumps(build(), option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS) + b"\n"


if __name__ == "__main__":
    sys.stdout.buffer.write(dumps())
