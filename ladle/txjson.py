"""Transactions rendered as JSON-ready dicts, with Cauldron activity, for the CLI and the APIs.

Hashes and categories are display-order hex; token amounts are decimal strings (they exceed
2^53), sats are integers.
"""

from __future__ import annotations

from typing import Any

from bch.cashaddr import locking_to_address
from bch.tx import Transaction, TxOutput
from protocols.cauldron.detect import detect


def output_json(output: TxOutput, index: int, prefix: str = "bitcoincash") -> dict[str, Any]:
    entry: dict[str, Any] = {
        "index": index,
        "value": output.value,
        "locking_bytecode": output.locking.hex(),
        "address": locking_to_address(
            output.locking, token_aware=output.token is not None, prefix=prefix
        ),
    }
    if output.token is not None:
        entry["token"] = output.token.to_json()
    return entry


def transaction_json(tx: Transaction, prefix: str = "bitcoincash") -> dict[str, Any]:
    """Everything `ladle tx decode` prints."""
    activity = detect(tx)
    return {
        "txid": tx.txid_hex,
        "version": tx.version,
        "locktime": tx.locktime,
        "size": tx.size(),
        "inputs": [
            {
                "index": i,
                "txid": txin.outpoint.txid_hex,
                "vout": txin.outpoint.index,
                "unlocking_bytecode": txin.unlocking.hex(),
                "sequence": txin.sequence,
            }
            for i, txin in enumerate(tx.inputs)
        ],
        "outputs": [output_json(o, i, prefix) for i, o in enumerate(tx.outputs)],
        "cauldron": {
            "pool_spends": [
                {
                    "input_index": s.input_index,
                    "kind": s.kind,
                    "owner_pkh": s.owner_pkh.hex(),
                    "continuation_output": s.continuation_index,
                }
                for s in activity.spends
            ],
            "pools_created": [
                {"output_index": c.output_index, "owner_pkh": c.owner_pkh.hex(), "via": c.via}
                for c in activity.created
            ],
            "summon_markers": [
                {"output_index": s.output_index, "owner_pkh": s.owner_pkh.hex()}
                for s in activity.summons
            ],
            "ignored_outputs": [
                {"output_index": o.output_index, "reason": o.reason} for o in activity.ignored
            ],
            "anomalies": [
                {"input_index": a.input_index, "reason": a.reason} for a in activity.anomalies
            ],
        },
    }
