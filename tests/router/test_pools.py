"""The pool value, the offline pools file and the snapshot's reserve filter."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bch.token import TokenData
from bch.tx import TxOutput, hex_to_hash
from protocols.cauldron.contract import pool_locking_bytecode
from router import wire
from router.book import encode
from router.pools import (
    POOL_INPUT_SIZE,
    Pool,
    PoolBook,
    PoolsFileError,
    load_pools,
    parse_pools,
    pool_output_size,
)
from tests.router.helpers import TOKEN_A, TOKEN_B, continuation_dust, txid

# The worked vector of cauldron.md.
OWNER = "b034dc7821b2b25c38b5825cdc4af9e6ace02be7"
OWNER_LOCKING = "aa20095f68844b48e2ed5c77a622d8371ac02b3e03d59b185df6278c2a3c09aa6e1187"


def entry(**overrides: object) -> dict[str, object]:
    base: dict[str, object] = {
        "txid": txid("p"),
        "tx_pos": 1,
        "owner_pkh": OWNER,
        "token_id": TOKEN_A,
        "sats": 100_000,
        "tokens": "5000000",
    }
    base.update(overrides)
    return base


def test_a_pool_is_its_utxo() -> None:
    (pool,) = parse_pools([entry()])
    assert pool == Pool(txid("p"), 1, bytes.fromhex(OWNER), TOKEN_A, 100_000, 5_000_000)
    encoded = encode(pool)
    assert encoded.source_output == TxOutput(
        100_000, bytes.fromhex(OWNER_LOCKING), TokenData(hex_to_hash(TOKEN_A), 5_000_000)
    )
    outpoint = encoded.trade_input.outpoint
    assert outpoint.txid_hex == txid("p") and outpoint.index == 1
    after = encoded.template.output(100_500, 4_975_000)
    assert after.locking == pool_locking_bytecode(bytes.fromhex(OWNER))
    assert after.token == TokenData(hex_to_hash(TOKEN_A), 4_975_000)
    assert wire.pool_doc(pool) == {**entry(), "tokens": "5000000"}


@pytest.mark.parametrize("tokens", [1, 252, 253, 65_535, 65_536, 2**32, 2**63 - 1])
def test_pool_sizes_match_the_serialized_bytes(tokens: int) -> None:
    pool = Pool(txid("p"), 0, bytes(20), TOKEN_A, 10_000, tokens)
    source = encode(pool).source_output
    assert pool_output_size(tokens) == source.size()
    assert 79 <= pool_output_size(tokens) <= 87
    assert pool.trade_size == POOL_INPUT_SIZE + source.size()


def test_ids_are_normalised_and_amounts_may_be_strings() -> None:
    (pool,) = parse_pools([entry(txid=txid("p").upper(), token_id=TOKEN_A.upper(), sats="7")])
    assert pool.txid == txid("p") and pool.token_id == TOKEN_A and pool.sats == 7


@pytest.mark.parametrize(
    ("data", "word"),
    [
        ({"not": "a list"}, "JSON array"),
        ([entry(txid="xyz")], "txid"),
        ([entry(token_id=TOKEN_A[:10])], "token_id"),
        ([entry(owner_pkh="00" * 19)], "owner_pkh"),
        ([entry(owner_pkh="zz" * 20)], "owner_pkh"),
        ([entry(sats=-1)], "sats"),
        ([entry(sats=True)], "sats"),
        ([entry(tokens="1e6")], "tokens"),
        ([entry(tokens=str(2**63))], "tokens"),
        ([entry(tx_pos=2**32)], "tx_pos"),
        ([entry(), entry()], "appears twice"),
        (["pool"], "object"),
    ],
)
def test_malformed_pools_are_rejected(data: object, word: str) -> None:
    with pytest.raises(PoolsFileError, match=word):
        parse_pools(data)


def test_load_pools_reads_a_file(tmp_path: Path) -> None:
    path = tmp_path / "pools.json"
    path.write_text(json.dumps([entry(), entry(tx_pos=2)]))
    assert [p.vout for p in load_pools(path)] == [1, 2]
    path.write_text("[{")
    with pytest.raises(PoolsFileError, match="not valid JSON"):
        load_pools(path)
    with pytest.raises(OSError):
        load_pools(tmp_path / "missing.json")


def test_the_book_keeps_only_pools_above_the_reserves() -> None:
    keep = [
        Pool(txid("a"), 0, bytes(20), TOKEN_A, continuation_dust(1), 1),
        Pool(txid("b"), 0, bytes(20), TOKEN_A, 10**6, 10**6),
        Pool(txid("g"), 0, bytes(20), TOKEN_A, 705, 2**32),
        Pool(txid("c"), 0, bytes(20), TOKEN_B, 10**6, 10**6),
    ]
    drop = [
        Pool(txid("d"), 0, bytes(20), TOKEN_A, continuation_dust(10**6) - 1, 10**6),
        Pool(txid("f"), 0, bytes(20), TOKEN_A, continuation_dust(2**32) - 1, 2**32),
        Pool(txid("e"), 0, bytes(20), TOKEN_A, 10**6, 0),
    ]
    book = PoolBook(drop + keep, version="v9", height=5)
    assert set(book.pools(TOKEN_A)) == set(keep[:3])
    assert list(book.pools(TOKEN_B)) == [keep[3]]
    assert book.pools(txid("nothing")) == ()
    assert book.tokens() == sorted([TOKEN_A, TOKEN_B]) and len(book) == 4
    assert (book.version, book.height) == ("v9", 5)
    calls: list[int] = []

    def compute(value: int) -> int:
        calls.append(value)
        return value

    assert book.memo("k", lambda: compute(42)) == 42
    assert book.memo("k", lambda: compute(43)) == 42  # computed once per snapshot
    assert calls == [42]
