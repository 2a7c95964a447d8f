"""The Electrum Cash methods (Fulcrum's set plus Rostrum's block and mempool extensions)."""

from __future__ import annotations

from bch.block import merkle_branch
from bch.tx import OutPoint
from devnet.acceptance import TxRejected
from devnet.blocks import BlockRecord
from devnet.electrum.errors import (
    BAD_REQUEST,
    DAEMON_ERROR,
    RpcError,
    bad_params,
    daemon_error,
    rejected,
)
from devnet.electrum.params import (
    as_bool,
    as_hash,
    as_int,
    as_scripthash,
    as_str,
    format_version,
    parse_version,
)
from devnet.electrum.registry import Call, Kind, method
from devnet.electrum.session import PROTOCOL_MAX, PROTOCOL_MIN
from devnet.electrum.shapes import (
    header_json,
    history_json,
    unspent_json,
    utxo_info_json,
    verbose_tx_json,
)
from devnet.node import Node, ScriptVerificationUnavailable

SERVER_VERSION = "ladle-devnet 0.1"
MAX_HEADERS = 2016
RELAY_FEE_BCH_PER_KB = 0.00001
TOKEN_FILTERS = ("include_tokens", "exclude_tokens", "tokens_only")
# As Fulcrum 2.1.1 words them (see docs/real-nodes.md): a node's RPC error relayed as code 2 in
# ElectrumX's repr, and its own code 1 for a txid it has no height for.
NO_SUCH_TX = daemon_error(
    -5, "No such mempool or blockchain transaction. Use gettransaction for wallet transactions."
)
GENESIS_COINBASE = daemon_error(
    -5,
    "The genesis block coinbase is not considered an ordinary transaction and cannot be retrieved",
)
NO_TX_HEIGHT = "No transaction matching the requested hash was found"


def _node(call: Call) -> Node:
    return call.server.node


# --- server.* ---------------------------------------------------------------------------------


@method("server.version", "client_name", "protocol_version", required=0)
async def server_version(
    call: Call, client_name: object = "", protocol_version: object = "1.4"
) -> object:
    session = call.session
    if session.version_done:
        raise RpcError(BAD_REQUEST, "server.version already sent")
    as_str(client_name, "client_name")
    if isinstance(protocol_version, list) and len(protocol_version) == 2:
        low = parse_version(as_str(protocol_version[0], "protocol_min"))
        high = parse_version(as_str(protocol_version[1], "protocol_max"))
    else:
        low = high = parse_version(as_str(protocol_version, "protocol_version"))
    chosen = min(high, PROTOCOL_MAX)
    if chosen < max(low, PROTOCOL_MIN):
        raise RpcError(BAD_REQUEST, f"unsupported protocol version: {protocol_version}")
    session.version_done = True
    session.protocol = chosen
    return [SERVER_VERSION, format_version(chosen)]


@method("server.features")
async def server_features(call: Call) -> object:
    server = call.server
    return {
        "genesis_hash": _node(call).chain.blocks[0].hash_hex,
        "hash_function": "sha256",
        "server_version": SERVER_VERSION,
        "protocol_min": format_version(PROTOCOL_MIN),
        "protocol_max": format_version(PROTOCOL_MAX),
        "pruning": None,
        "hosts": {server.host: {"tcp_port": server.tcp_port, "ws_port": server.ws_port}},
        "cashtokens": True,
        "dsproof": True,
        "rostrum": server.rostrum,
    }


@method("server.ping")
async def server_ping(call: Call) -> object:
    return None


@method("server.banner")
async def server_banner(call: Call) -> object:
    return f"{SERVER_VERSION}: a local Bitcoin Cash network ({_node(call).name})"


@method("server.donation_address")
async def server_donation_address(call: Call) -> object:
    return ""


@method("server.peers.subscribe")
async def server_peers(call: Call) -> object:
    return []


# --- headers and blocks ------------------------------------------------------------------------


def _tip_json(node: Node) -> dict[str, object]:
    return header_json(node.chain.height, node.chain.tip)


@method("blockchain.headers.subscribe")
async def headers_subscribe(call: Call) -> object:
    call.session.headers_subscribed = True
    return _tip_json(_node(call))


@method("blockchain.headers.unsubscribe")
async def headers_unsubscribe(call: Call) -> object:
    was = call.session.headers_subscribed
    call.session.headers_subscribed = False
    return was


@method("blockchain.headers.get_tip")
async def headers_get_tip(call: Call) -> object:
    return _tip_json(_node(call))


def _block_at(node: Node, height: object, missing: str = "Invalid height: {height}") -> BlockRecord:
    """The block at `height`; beyond the tip, error 1 with `missing` (Fulcrum words it per
    method)."""
    h = as_int(height, "height", minimum=0)
    block = node.chain.block_at(h)
    if block is None:
        raise RpcError(BAD_REQUEST, missing.format(height=h))
    return block


def _no_checkpoints(cp_height: object) -> None:
    if as_int(cp_height, "cp_height", minimum=0) != 0:
        raise RpcError(BAD_REQUEST, "checkpoint proofs (cp_height) are not supported")


@method("blockchain.block.header", "height", "cp_height", required=1)
async def block_header(call: Call, height: object, cp_height: object = 0) -> object:
    _no_checkpoints(cp_height)
    return _block_at(_node(call), height, "Height {height} is out of range").header_bytes.hex()


@method("blockchain.block.headers", "start_height", "count", "cp_height", required=2)
async def block_headers(
    call: Call, start_height: object, count: object, cp_height: object = 0
) -> object:
    _no_checkpoints(cp_height)
    start = as_int(start_height, "start_height", minimum=0)
    n = min(as_int(count, "count", minimum=0), MAX_HEADERS)
    blocks = _node(call).chain.blocks[start : start + n]
    headers = [b.header_bytes.hex() for b in blocks]
    result: dict[str, object] = {"count": len(headers), "max": MAX_HEADERS}
    if call.session.protocol >= (1, 6):
        result["headers"] = headers
    else:
        result["hex"] = "".join(headers)
    return result


@method("blockchain.block.get", "block", kind=Kind.ROSTRUM)
async def block_get(call: Call, block: object) -> object:
    node = _node(call)
    if isinstance(block, str) and len(block) == 64:
        height = node.chain.height_of(as_hash(block, "block hash"))
        if height is None:
            raise RpcError(BAD_REQUEST, f"Block not found: {block}")
        block = height
    return _block_at(node, block).raw.hex()


# --- mempool -------------------------------------------------------------------------------------


@method("mempool.get", kind=Kind.ROSTRUM)
async def mempool_get(call: Call) -> object:
    return [txid[::-1].hex() for txid in _node(call).mempool.entries]


@method("mempool.count", kind=Kind.ROSTRUM)
async def mempool_count(call: Call) -> object:
    return len(_node(call).mempool)


@method("mempool.get_info")
async def mempool_get_info(call: Call) -> object:
    fee = RELAY_FEE_BCH_PER_KB
    return {"mempoolminfee": fee, "minrelaytxfee": fee, "incrementalrelayfee": fee}


@method("blockchain.relayfee")
async def relayfee(call: Call) -> object:
    return RELAY_FEE_BCH_PER_KB


@method("blockchain.estimatefee", "number", required=0)
async def estimatefee(call: Call, number: object = 1) -> object:
    as_int(number, "number")
    return RELAY_FEE_BCH_PER_KB


# --- transactions ----------------------------------------------------------------------------


@method("blockchain.transaction.get", "tx_hash", "verbose", required=1)
async def transaction_get(call: Call, tx_hash: object, verbose: object = False) -> object:
    node = _node(call)
    txid, want_verbose = as_hash(tx_hash, "tx_hash"), as_bool(verbose, "verbose")
    if txid == node.chain.blocks[0].txs[0].txid:  # never in the UTXO set: nodes refuse it
        raise RpcError(DAEMON_ERROR, GENESIS_COINBASE)
    found = node.find_tx(txid)
    if found is None:
        raise RpcError(DAEMON_ERROR, NO_SUCH_TX)
    tx, height = found
    if not want_verbose:
        return tx.hex()
    block = node.chain.block_at(height) if height > 0 else None
    confirmations = node.chain.height - height + 1 if height > 0 else 0
    return verbose_tx_json(tx, block, confirmations)


@method("blockchain.transaction.get_height", "tx_hash")
async def transaction_get_height(call: Call, tx_hash: object) -> object:
    found = _node(call).find_tx(as_hash(tx_hash, "tx_hash"))
    if found is None:
        raise RpcError(BAD_REQUEST, NO_TX_HEIGHT)  # not null, whatever the protocol docs say
    return found[1]


@method("blockchain.transaction.id_from_pos", "height", "tx_pos", "merkle", required=2)
async def transaction_id_from_pos(
    call: Call, height: object, tx_pos: object, merkle: object = False
) -> object:
    pos = as_int(tx_pos, "tx_pos", minimum=0)
    block = _block_at(
        _node(call), height, f"No transaction at position {pos} for height {{height}}"
    )
    if pos >= len(block.txs):
        raise RpcError(BAD_REQUEST, f"No transaction at position {pos} for height {height}")
    txid = block.txs[pos].txid
    if not as_bool(merkle, "merkle"):
        return txid[::-1].hex()
    branch = merkle_branch([t.txid for t in block.txs], pos)
    return {"tx_hash": txid[::-1].hex(), "merkle": [h[::-1].hex() for h in branch]}


@method("blockchain.transaction.get_merkle", "tx_hash", "height", required=1)
async def transaction_get_merkle(call: Call, tx_hash: object, height: object = None) -> object:
    node = _node(call)
    txid = as_hash(tx_hash, "tx_hash")
    found = node.chain.tx_index.get(txid)
    if height is not None:  # Fulcrum's wording, whether the tx is elsewhere or nowhere
        asked = as_int(height, "height")
        if found is None or asked != found[0]:
            message = f"No transaction matching the requested hash found at height {asked}"
            raise RpcError(BAD_REQUEST, message)
    elif found is None:
        raise RpcError(
            BAD_REQUEST, "No confirmed transaction matching the requested hash was found"
        )
    block_height, pos = found
    block = node.chain.blocks[block_height]
    branch = merkle_branch([t.txid for t in block.txs], pos)
    return {"block_height": block_height, "merkle": [h[::-1].hex() for h in branch], "pos": pos}


@method("blockchain.transaction.broadcast", "raw_tx")
async def transaction_broadcast(call: Call, raw_tx: object) -> object:
    try:
        return await _node(call).submit(as_str(raw_tx, "raw_tx"))
    except TxRejected as exc:
        raise rejected(exc.message) from None
    except ScriptVerificationUnavailable as exc:
        raise RpcError(DAEMON_ERROR, f"script verification unavailable: {exc}") from None


@method("blockchain.transaction.dsproof.subscribe", "tx_hash")
async def dsproof_subscribe(call: Call, tx_hash: object) -> object:
    as_hash(tx_hash, "tx_hash")
    return None  # the devnet never builds double-spend proofs


@method("blockchain.transaction.dsproof.get", "tx_hash")
async def dsproof_get(call: Call, tx_hash: object) -> object:
    as_hash(tx_hash, "tx_hash")
    return None


@method("blockchain.transaction.dsproof.unsubscribe", "tx_hash")
async def dsproof_unsubscribe(call: Call, tx_hash: object) -> object:
    as_hash(tx_hash, "tx_hash")
    return True


# --- scripthashes ----------------------------------------------------------------------------


@method("blockchain.scripthash.subscribe", "scripthash")
async def scripthash_subscribe(call: Call, scripthash: object) -> object:
    sh = as_scripthash(scripthash)
    status = _node(call).status(sh)
    call.session.scripthashes[sh] = status
    return status


@method("blockchain.scripthash.unsubscribe", "scripthash")
async def scripthash_unsubscribe(call: Call, scripthash: object) -> object:
    return call.session.scripthashes.pop(as_scripthash(scripthash), 0) != 0


@method("blockchain.scripthash.get_history", "scripthash", "from_height", "to_height", required=1)
async def scripthash_get_history(
    call: Call, scripthash: object, from_height: object = 0, to_height: object = -1
) -> object:
    low = as_int(from_height, "from_height", minimum=0)
    high = as_int(to_height, "to_height", minimum=-1)
    items = _node(call).history(as_scripthash(scripthash))
    selected = []
    for item in items:
        if item.height > 0:
            if item.height >= low and (high == -1 or item.height < high):
                selected.append(item)
        elif high == -1:
            selected.append(item)
    return [history_json(i) for i in selected]


@method("blockchain.scripthash.get_mempool", "scripthash")
async def scripthash_get_mempool(call: Call, scripthash: object) -> object:
    items = _node(call).history(as_scripthash(scripthash))
    return [history_json(i) for i in items if i.height <= 0]


def _token_filter(call: Call, token_filter: object) -> str:
    value = as_str(token_filter, "token_filter")
    if value not in TOKEN_FILTERS:
        raise bad_params(f"token_filter must be one of {', '.join(TOKEN_FILTERS)}")
    if call.session.protocol < (1, 5):
        return "exclude_tokens"  # clients below 1.5 do not know token data
    return value


@method("blockchain.scripthash.listunspent", "scripthash", "token_filter", required=1)
async def scripthash_listunspent(
    call: Call, scripthash: object, token_filter: object = "include_tokens"
) -> object:
    sh = as_scripthash(scripthash)
    mode = _token_filter(call, token_filter)
    out = []
    for u in _node(call).unspent(sh):
        has_token = u.output.token is not None
        if (mode == "exclude_tokens" and has_token) or (mode == "tokens_only" and not has_token):
            continue
        out.append(unspent_json(u))
    return out


@method("blockchain.scripthash.get_balance", "scripthash", "token_filter", required=1)
async def scripthash_get_balance(
    call: Call, scripthash: object, token_filter: object = "include_tokens"
) -> object:
    sh = as_scripthash(scripthash)
    mode = _token_filter(call, token_filter)
    node = _node(call)

    def keep(has_token: bool) -> bool:
        return not (
            (mode == "exclude_tokens" and has_token) or (mode == "tokens_only" and not has_token)
        )

    confirmed = sum(
        c.output.value for _, c in node.chain.unspent(sh) if keep(c.output.token is not None)
    )
    total = sum(u.output.value for u in node.unspent(sh) if keep(u.output.token is not None))
    return {"confirmed": confirmed, "unconfirmed": total - confirmed}


@method("blockchain.utxo.get_info", "tx_hash", "out_n")
async def utxo_get_info(call: Call, tx_hash: object, out_n: object) -> object:
    op = OutPoint(as_hash(tx_hash, "tx_hash"), as_int(out_n, "out_n", minimum=0))
    found = _node(call).utxo(op)
    return None if found is None else utxo_info_json(found)
