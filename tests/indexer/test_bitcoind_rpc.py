"""`indexer.bitcoind`: where a node's RPC is and how to log in, and which node answers mean
what. (The calls themselves run against a real BCHN in tests/realnode.)"""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from indexer.bitcoind import (
    HeightOutOfRange,
    RpcAddress,
    RpcConnectionError,
    RpcError,
    UnknownBlock,
    UnknownTransaction,
)
from indexer.bitcoind.errors import error_of


def login(address: RpcAddress) -> str:
    scheme, encoded = address.authorization().split()
    assert scheme == "Basic"
    return base64.b64decode(encoded).decode()


def test_a_url_with_its_login() -> None:
    address = RpcAddress.parse("http://us%40er:p%3Ass@node.example:18443")
    assert (address.host, address.port) == ("node.example", 18443)
    assert login(address) == "us@er:p:ss"
    assert address.url == "http://node.example:18443"  # no secret in logs


def test_the_default_port_and_a_bare_host() -> None:
    assert RpcAddress.parse("u:p@127.0.0.1").port == 8332


def test_a_cookie_is_read_when_the_login_is_made(tmp_path: Path) -> None:
    cookie = tmp_path / ".cookie"
    address = RpcAddress.parse("http://127.0.0.1:8332", cookie=cookie)
    with pytest.raises(RpcConnectionError, match="cookie"):
        address.authorization()
    cookie.write_text("__cookie__:first\n")
    assert login(address) == "__cookie__:first"
    cookie.write_text("__cookie__:second")  # the node restarted
    assert login(address) == "__cookie__:second"


@pytest.mark.parametrize(
    ("url", "cookie", "problem"),
    [
        ("https://u:p@h:1", None, "http://"),
        ("http://h:1", None, "needs a login"),
        ("http://u:p@h:1", "/c", "not both"),
        ("http://u:p@h:99999", None, "bad port"),
        ("http://u:p@:1", None, "without a host"),
    ],
)
def test_bad_addresses_say_why(url: str, cookie: str | None, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        RpcAddress.parse(url, cookie=cookie)


@pytest.mark.parametrize(
    ("code", "message", "kind"),
    [
        (-5, "Block not found", UnknownBlock),
        (
            -5,
            "No such mempool or blockchain transaction. Use gettransaction for wallet "
            "transactions.",
            UnknownTransaction,
        ),
        (
            -5,
            "No such mempool transaction. Use -txindex or provide a block hash to enable "
            "blockchain transaction queries. Use gettransaction for wallet transactions.",
            UnknownTransaction,
        ),
        (-8, "Block height out of range", HeightOutOfRange),
        (
            -5,
            "The genesis block coinbase is not considered an ordinary transaction and cannot "
            "be retrieved",
            RpcError,
        ),
        (-26, "txn-mempool-conflict", RpcError),
    ],
)
def test_node_answers_by_meaning(code: int, message: str, kind: type[RpcError]) -> None:
    error = error_of(code, message, "getrawtransaction")
    assert type(error) is kind
    assert (error.code, error.message) == (code, message)
