"""The `devnet.*` control methods, served next to the Electrum methods when enabled.

Each is a thin wrapper over the Python API (`Node.mine`, `Node.reorg`, `Network.faucet`,
`Node.set_faults` …), so a scenario can drive the devnet either way with the same effects.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from bch.cashaddr import Address, CashAddrError
from bch.tx import Transaction
from devnet.acceptance import TxRejected
from devnet.chain import ChainError
from devnet.electrum.errors import BAD_REQUEST, DAEMON_ERROR, RpcError, bad_params, rejected
from devnet.electrum.params import as_int, as_str
from devnet.electrum.registry import Call, Kind, method
from devnet.faucet import FaucetEmpty
from devnet.node import DEFAULT_REJECT_MESSAGE, Node, ScriptVerificationUnavailable

if TYPE_CHECKING:
    from devnet.service import Devnet

FAULT_KINDS = ("down", "slow", "reject", "partition", "drop")


def _devnet(call: Call) -> Devnet:
    devnet = call.server.devnet
    if devnet is None:
        raise RpcError(BAD_REQUEST, "this server is not part of a devnet")
    return devnet


def _target(call: Call, node: object) -> Node:
    if node is None:
        return call.server.node
    nodes = _devnet(call).nodes
    index = as_int(node, "node", minimum=0)
    if index >= len(nodes):
        raise bad_params(f"no node {index} (the devnet has {len(nodes)})")
    return nodes[index]


def locking_for(destination: str) -> bytes:
    """A CashAddr (any known network prefix) or raw locking bytecode hex."""
    try:
        return Address.decode(destination).locking_bytecode()
    except CashAddrError:
        pass
    try:
        return bytes.fromhex(destination)
    except ValueError:
        raise bad_params(f"not an address or locking bytecode hex: {destination!r}") from None


def _transactions(txs: object) -> list[Transaction]:
    if txs is None:
        return []
    if not isinstance(txs, list):
        raise bad_params("txs must be a list of raw transaction hex strings")
    try:
        return [Transaction.from_hex(as_str(t, "txs[]")) for t in txs]
    except ValueError as exc:
        raise bad_params(f"txs: {exc}") from None


def _node_json(call: Call, node: Node) -> dict[str, object]:
    server = _devnet(call).server_for(node)
    return {
        "node": node.index,
        "height": node.height,
        "tip": node.chain.tip.hash_hex,
        "mempool": len(node.mempool),
        "faults": node.faults.to_json(),
        "tcp_port": server.tcp_port,
        "ws_port": server.ws_port,
    }


@method("devnet.info", kind=Kind.CONTROL)
async def info(call: Call) -> object:
    devnet = _devnet(call)
    return {
        "node": call.server.node.index,
        "time": devnet.clock.now(),
        "delay": devnet.network.delay,
        "verify": devnet.config.verify,
        "genesis_hash": devnet.network.genesis.hash_hex,
        "miner_address": devnet.network.miner.address,
        "nodes": [_node_json(call, n) for n in devnet.nodes],
    }


@method("devnet.mine", "count", "address", "txs", "node", "spacing", required=0, kind=Kind.CONTROL)
async def mine(
    call: Call,
    count: object = 1,
    address: object = None,
    txs: object = None,
    node: object = None,
    spacing: object = None,
) -> object:
    """Mine `count` blocks (to `address`, default the miner); the first also carries `txs`."""
    target = _target(call, node)
    n = as_int(count, "count", minimum=1)
    locking = None if address is None else locking_for(as_str(address, "address"))
    gap = None if spacing is None else as_int(spacing, "spacing", minimum=0)
    try:
        blocks = target.mine(n, locking=locking, txs=_transactions(txs), spacing=gap)
    except ChainError as exc:
        raise RpcError(BAD_REQUEST, exc.reason) from None
    return {"height": target.height, "blocks": [b.hash_hex for b in blocks]}


@method("devnet.reorg", "depth", "txs", "node", required=1, kind=Kind.CONTROL)
async def reorg(call: Call, depth: object, txs: object = None, node: object = None) -> object:
    """Replace the last `depth` blocks by `depth + 1` new ones; the first carries `txs`."""
    target = _target(call, node)
    k = as_int(depth, "depth", minimum=1)
    try:
        blocks = target.reorg(k, _transactions(txs))
    except ChainError as exc:
        raise RpcError(BAD_REQUEST, exc.reason) from None
    return {
        "height": target.height,
        "fork_height": target.height - len(blocks),
        "blocks": [b.hash_hex for b in blocks],
    }


@method("devnet.advance_clock", "seconds", kind=Kind.CONTROL)
async def advance_clock(call: Call, seconds: object) -> object:
    return {"time": _devnet(call).clock.advance(as_int(seconds, "seconds", minimum=0))}


@method("devnet.faucet", "address", "amount", "mine", "node", required=2, kind=Kind.CONTROL)
async def faucet(
    call: Call, address: object, amount: object, mine: object = False, node: object = None
) -> object:
    """Pay `amount` sats to `address` (CashAddr or locking hex) from the miner; optionally mine
    the payment at once. Returns the txid."""
    target = _target(call, node)
    locking = locking_for(as_str(address, "address"))
    sats = as_int(amount, "amount", minimum=1)
    try:
        txid = await _devnet(call).network.faucet(target, locking, sats)
    except FaucetEmpty as exc:
        raise RpcError(BAD_REQUEST, str(exc)) from None
    except TxRejected as exc:
        raise rejected(exc.message) from None
    except ScriptVerificationUnavailable as exc:
        raise RpcError(DAEMON_ERROR, f"script verification unavailable: {exc}") from None
    if mine is True:
        target.mine(1)
    return txid


def _fault_change(kind: str, value: object) -> dict[str, object]:
    if kind == "down":
        return {"down": bool(value)}
    if kind == "partition":
        return {"partitioned": bool(value)}
    if kind == "slow":
        if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
            raise bad_params("slow takes a number of seconds")
        return {"slow": float(value)}
    if kind == "reject":
        if isinstance(value, str):
            return {"reject": value}
        return {"reject": DEFAULT_REJECT_MESSAGE if value else None}
    if kind == "drop":
        if value is True:
            return {"drop": -1}
        if value is False:
            return {"drop": 0}
        return {"drop": as_int(value, "drop", minimum=-1)}
    raise bad_params(f"unknown fault {kind!r}: one of {', '.join(FAULT_KINDS)}")


@method("devnet.fault", "kind", "value", "node", required=1, kind=Kind.CONTROL)
async def fault(call: Call, kind: object, value: object = True, node: object = None) -> object:
    """Inject a fault: down, slow (seconds), reject (bool or node message), partition, drop
    (bool, or the number of next requests whose connection is dropped)."""
    target = _target(call, node)
    target.set_faults(**_fault_change(as_str(kind, "kind"), value))
    await _settle_faults(call, target)
    return target.faults.to_json()


@method("devnet.clear_faults", "node", required=0, kind=Kind.CONTROL)
async def clear_faults(call: Call, node: object = None) -> object:
    targets = _devnet(call).nodes if node is None else [_target(call, node)]
    for target in targets:
        target.clear_faults()
        await _settle_faults(call, target)
    return [t.faults.to_json() for t in targets]


async def _settle_faults(call: Call, target: Node) -> None:
    # The caller's own server closes after this answer is queued (its listener task does it);
    # other servers are brought in line now, so the caller can rely on the effect.
    if target is not call.server.node:
        await _devnet(call).server_for(target).apply_faults()


@method("devnet.set_delay", "seconds", kind=Kind.CONTROL)
async def set_delay(call: Call, seconds: object) -> object:
    if isinstance(seconds, bool) or not isinstance(seconds, int | float) or seconds < 0:
        raise bad_params("seconds must be a non-negative number")
    _devnet(call).network.delay = float(seconds)
    return {"delay": float(seconds)}


@method("devnet.settle", kind=Kind.CONTROL)
async def settle(call: Call) -> object:
    """Wait until every scheduled propagation has been delivered."""
    await _devnet(call).network.settle()
    return True
