"""The API's pool id: a pool lineage's first outpoint as `<txid display hex>:<vout>`.

The id names rows of the Cauldron tables, written by the Cauldron decoder and read by the
store's queries; it lives here, below both.
"""

from __future__ import annotations

import re

from bch.tx import OutPoint

_POOL_ID = re.compile(r"^([0-9a-f]{64}):(0|[1-9][0-9]{0,9})$")


def format_pool_id(lineage: OutPoint) -> str:
    """`<txid display hex>:<vout>` of the lineage's first outpoint."""
    return f"{lineage.txid_hex}:{lineage.index}"


def parse_pool_id(pool_id: str) -> OutPoint:
    """Inverse of `format_pool_id`; ValueError for anything else (upper case, 63 hex, -1 …)."""
    m = _POOL_ID.match(pool_id)
    if m is None or int(m.group(2)) > 0xFFFFFFFF:
        raise ValueError(f"not a pool id (<64 lowercase hex>:<vout>): {pool_id!r}")
    return OutPoint.from_hex(m.group(1), int(m.group(2)))
