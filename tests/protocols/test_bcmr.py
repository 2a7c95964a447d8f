"""BCMR: publication parsing, URI resolution, the hash check, authchain links, registry JSON."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest

from bch.script import push_data
from bch.token import NFT, Capability, TokenData
from bch.tx import OutPoint, Transaction, TxInput, TxOutput
from protocols.bcmr import (
    WELL_KNOWN_PATH,
    FileMeta,
    authchain_link,
    current_snapshot,
    find_publication,
    flatten_entry,
    genesis_categories,
    hash_matches,
    identity_snapshot,
    parse_publication,
    parse_time,
    resolve_uri,
    validate_registry,
)

DOC = b'{"hello": "registry"}\n'
DIGEST = hashlib.sha256(DOC).digest()
GATEWAY = "http://127.0.0.1:9/ipfs/"


def bcmr(pushed: bytes, *uris: bytes) -> bytes:
    return bytes.fromhex("6a0442434d52") + push_data(pushed) + b"".join(push_data(u) for u in uris)


def test_publication_with_digest_and_uris() -> None:
    pub = parse_publication(bcmr(DIGEST, b"example.com", b"ipfs://bafkreiabc"), 2)
    assert pub is not None
    assert pub.expected_hash == DIGEST and pub.hash_encoding == "digest"
    assert pub.uris == ("example.com", "ipfs://bafkreiabc") and pub.output_index == 2


def test_publication_hash_as_hex_text_is_accepted() -> None:
    pub = parse_publication(bcmr(DIGEST.hex().encode(), b"https://x.org/r.json"))
    assert pub is not None
    assert pub.expected_hash == DIGEST and pub.hash_encoding == "ascii-hex"


def test_publication_rejects() -> None:
    assert parse_publication(bcmr(DIGEST[:31])) is None  # neither 32 bytes nor 64 hex chars
    assert parse_publication(bcmr(b"z" * 64)) is None
    assert parse_publication(bytes.fromhex("6a0442434d52")) is None  # no hash
    assert parse_publication(bytes.fromhex("6a0442434d4e") + push_data(DIGEST)) is None
    assert parse_publication(bcmr(DIGEST) + b"\x4c") is None  # truncated push
    assert parse_publication(bcmr(DIGEST) + b"\xac") is None  # not push-only
    # A URI that is not UTF-8 is dropped; the publication stands.
    pub = parse_publication(bcmr(DIGEST, b"\xff\xfe", b"a.org"))
    assert pub is not None and pub.uris == ("a.org",)
    # The 'BCMR' tag is bytes, never the number a node's asm shows (1380795202).
    assert int.from_bytes(b"BCMR", "little") == 1380795202


def tx(inputs: list[OutPoint], outputs: list[TxOutput]) -> Transaction:
    return Transaction.build([TxInput(op, b"") for op in inputs], outputs)


def test_only_the_first_bcmr_output_counts() -> None:
    other = hashlib.sha256(b"other").digest()
    t = tx(
        [OutPoint(bytes(32), 0)],
        [TxOutput(1000, b"\x51"), TxOutput(0, bcmr(DIGEST, b"a.org")), TxOutput(0, bcmr(other))],
    )
    pub = find_publication(t)
    assert pub is not None and pub.expected_hash == DIGEST and pub.output_index == 1
    # A malformed first BCMR output hides a later one: only the first counts.
    t2 = tx([OutPoint(bytes(32), 0)], [TxOutput(0, bcmr(b"bad")), TxOutput(0, bcmr(DIGEST))])
    assert find_publication(t2) is None


@pytest.mark.parametrize(
    ("uri", "url"),
    [
        ("example.com", f"https://example.com{WELL_KNOWN_PATH}"),
        ("https://example.com", f"https://example.com{WELL_KNOWN_PATH}"),
        ("https://example.com/", f"https://example.com{WELL_KNOWN_PATH}"),
        ("example.com/r.json", "https://example.com/r.json"),
        ("https://example.com/a/b.json?x=1", "https://example.com/a/b.json?x=1"),
        ("http://127.0.0.1:5/bcmr/x.json", "http://127.0.0.1:5/bcmr/x.json"),
        ("ipfs://bafkreiabc", GATEWAY + "bafkreiabc"),
        ("ipfs://bafkreiabc/dir/r.json", GATEWAY + "bafkreiabc/dir/r.json"),
        ("ipfs://", None),
        ("ftp://example.com/x", None),
        ("", None),
        ("https:///nohost", None),
    ],
)
def test_resolve_uri(uri: str, url: str | None) -> None:
    assert resolve_uri(uri, GATEWAY) == url


def test_hash_check_uses_raw_bytes_and_accepts_hex_text() -> None:
    assert hash_matches(DIGEST, DOC)
    assert not hash_matches(DIGEST, DOC.replace(b"\n", b"\r\n"))  # never re-encoded text
    assert hash_matches(DIGEST.hex().encode(), DOC)
    assert hash_matches(DIGEST.hex().upper().encode(), DOC)
    assert not hash_matches(bytes(32), DOC)


def test_authchain_links_spend_output_zero() -> None:
    authbase = bytes([7]) * 32
    head = OutPoint(authbase, 0)
    link = tx([OutPoint(bytes(32), 3), head], [TxOutput(1000, b"\x51")])
    found = authchain_link(link, head)
    assert found is not None and found.input_index == 1 and not found.burned
    assert authchain_link(tx([OutPoint(authbase, 1)], [TxOutput(1, b"\x51")]), head) is None
    burn = tx([head], [TxOutput(0, b"\x6a")])
    burned = authchain_link(burn, head)
    assert burned is not None and burned.burned
    with pytest.raises(ValueError):
        authchain_link(link, OutPoint(authbase, 1))


def test_genesis_categories() -> None:
    authbase = bytes([9]) * 32
    genesis = tx(
        [OutPoint(authbase, 0), OutPoint(bytes([1]) * 32, 0)],
        [
            TxOutput(1000, b"\x51", TokenData(authbase, 100)),
            TxOutput(1000, b"\x51", TokenData(authbase, 0, NFT(Capability.MINTING, b""))),
            TxOutput(1000, b"\x51", TokenData(bytes([5]) * 32, 1)),  # not created here
        ],
    )
    assert genesis_categories(genesis) == [authbase]
    not_genesis = tx([OutPoint(authbase, 1)], [TxOutput(1, b"\x51", TokenData(authbase, 1))])
    assert genesis_categories(not_genesis) == []


CAT = "ab" * 32


def registry(**over: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "$schema": "https://cashtokens.org/bcmr-v2.schema.json",
        "version": {"major": 1, "minor": 0, "patch": 0},
        "latestRevision": "2024-01-02T00:00:00.000Z",
        "registryIdentity": {"name": "r"},
        "identities": {
            CAT: {
                "2024-01-01T00:00:00.000Z": {
                    "name": "Old",
                    "token": {"category": CAT, "symbol": "OLD", "decimals": 2},
                },
                "2024-01-02T00:00:00.000Z": {
                    "name": "New",
                    "description": "d",
                    "token": {"category": CAT, "symbol": "NEW", "decimals": 2},
                    "uris": {"icon": "https://i/x.svg", "web": "https://w", "chat": "c"},
                },
                "2099-01-01T00:00:00.000Z": {"name": "Future"},
            }
        },
    }
    doc.update(over)
    return doc


def test_registry_validation() -> None:
    assert validate_registry(registry()) == []
    assert validate_registry(json.loads(json.dumps(registry()))) == []
    assert validate_registry([]) == ["the registry is not a JSON object"]
    assert any("version" in e for e in validate_registry(registry(version="1")))
    assert any("latestRevision" in e for e in validate_registry(registry(latestRevision="x")))
    assert any("registryIdentity" in e for e in validate_registry(registry(registryIdentity=3)))
    bad = registry()
    bad["identities"][CAT]["2024-01-01T00:00:00.000Z"]["token"]["decimals"] = 19
    assert any("decimals" in e for e in validate_registry(bad))
    bad2 = registry(identities={"XY": {}})
    assert len(validate_registry(bad2)) == 2
    bad3 = registry()
    bad3["identities"][CAT]["nope"] = {"name": 1}
    errors = validate_registry(bad3)
    assert any("nope: not an ISO" in e for e in errors) and any("name" in e for e in errors)


def test_current_snapshot_is_the_newest_that_has_passed() -> None:
    history = registry()["identities"][CAT]
    t = parse_time("2024-01-01T12:00:00Z")
    assert t == 1704110400
    found = current_snapshot(history, t)
    assert found is not None and found[1]["name"] == "Old"
    later = current_snapshot(history, t + 86_400)
    assert later is not None and later[1]["name"] == "New"
    assert current_snapshot(history, 0) is None
    assert identity_snapshot(registry(), "cd" * 32, t) is None


def test_flatten_entry_to_the_api_shape() -> None:
    snap = current_snapshot(registry()["identities"][CAT], 1_800_000_000)
    assert snap is not None
    entry = flatten_entry(snap[1], FileMeta("aa", "bb", "onchain"))
    assert entry == {
        "name": "New",
        "description": "d",
        "token": {"category": CAT, "symbol": "NEW", "decimals": 2},
        "uris": {"icon": "https://i/x.svg", "web": "https://w"},
        "filemeta": {"expected_hash": "aa", "actual_hash": "bb", "source": "onchain"},
    }
