"""JSON shapes of the answers: headers, unspent outputs, verbose transactions."""

from __future__ import annotations

from bch.script import ScriptKind, classify_locking, electrum_scripthash
from bch.tx import Transaction, TxOutput
from devnet.blocks import BlockRecord, is_coinbase
from devnet.node import HistoryItem, Unspent

SATS_PER_BCH = 100_000_000


def header_json(height: int, block: BlockRecord) -> dict[str, object]:
    return {"height": height, "hex": block.header_bytes.hex()}


def unspent_json(u: Unspent) -> dict[str, object]:
    out: dict[str, object] = {
        "height": u.height,
        "tx_hash": u.outpoint.txid_hex,
        "tx_pos": u.outpoint.index,
        "value": u.output.value,
    }
    if u.output.token is not None:
        out["token_data"] = u.output.token.to_json()
    return out


def history_json(item: HistoryItem) -> dict[str, object]:
    out: dict[str, object] = {"height": item.height, "tx_hash": item.tx_hash}
    if item.fee is not None:
        out["fee"] = item.fee
    return out


def utxo_info_json(u: Unspent) -> dict[str, object]:
    out: dict[str, object] = {}
    if u.height > 0:
        out["confirmed_height"] = u.height
    out["scripthash"] = electrum_scripthash(u.output.locking)
    out["value"] = u.output.value
    if u.output.token is not None:
        out["token_data"] = u.output.token.to_json()
    return out


def _output_json(n: int, out: TxOutput) -> dict[str, object]:
    kind, _ = classify_locking(out.locking)
    names = {
        ScriptKind.P2PKH: "pubkeyhash",
        ScriptKind.P2SH20: "scripthash",
        ScriptKind.P2SH32: "scripthash",
        ScriptKind.OP_RETURN: "nulldata",
    }
    entry: dict[str, object] = {
        "value": out.value / SATS_PER_BCH,
        "n": n,
        "scriptPubKey": {"hex": out.locking.hex(), "type": names.get(kind, "nonstandard")},
    }
    if out.token is not None:
        entry["tokenData"] = out.token.to_json()
    return entry


def verbose_tx_json(
    tx: Transaction, block: BlockRecord | None, confirmations: int
) -> dict[str, object]:
    """The subset of BCHN's `getrawtransaction … 1` a client relies on."""
    vin: list[dict[str, object]] = []
    for inp in tx.inputs:
        if is_coinbase(tx):
            vin.append({"coinbase": inp.unlocking.hex(), "sequence": inp.sequence})
        else:
            vin.append(
                {
                    "txid": inp.outpoint.txid_hex,
                    "vout": inp.outpoint.index,
                    "scriptSig": {"hex": inp.unlocking.hex()},
                    "sequence": inp.sequence,
                }
            )
    out: dict[str, object] = {
        "txid": tx.txid_hex,
        "hash": tx.txid_hex,
        "hex": tx.hex(),
        "size": tx.size(),
        "version": tx.version,
        "locktime": tx.locktime,
        "vin": vin,
        "vout": [_output_json(n, o) for n, o in enumerate(tx.outputs)],
    }
    if block is not None:
        out.update(
            blockhash=block.hash_hex,
            confirmations=confirmations,
            time=block.header.time,
            blocktime=block.header.time,
        )
    return out
