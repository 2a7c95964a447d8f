"""Server URLs: the four transports, the `ssl` alias, default ports, and what is refused."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from indexer.electrum import ServerAddress


@pytest.mark.parametrize(
    ("url", "scheme", "host", "port", "path"),
    [
        ("tcp://electrum.example:50001", "tcp", "electrum.example", 50001, ""),
        ("ssl://electrum.example:50002", "tls", "electrum.example", 50002, ""),
        ("tls://electrum.example:60002/", "tls", "electrum.example", 60002, ""),
        ("ws://127.0.0.1:50003/rpc", "ws", "127.0.0.1", 50003, "/rpc"),
        ("wss://[::1]:443/electrum/ws", "wss", "::1", 443, "/electrum/ws"),
        ("TCP://Host.Example", "tcp", "host.example", 50001, ""),
        ("ssl://h", "tls", "h", 50002, ""),
        ("ws://h", "ws", "h", 50003, ""),
        ("wss://h", "wss", "h", 50004, ""),
    ],
)
def test_parse(url: str, scheme: str, host: str, port: int, path: str) -> None:
    addr = ServerAddress.parse(url)
    assert (addr.scheme, addr.host, addr.port, addr.path) == (scheme, host, port, path)
    assert addr.secure == (scheme in ("tls", "wss"))
    assert addr.websocket == (scheme in ("ws", "wss"))


@pytest.mark.parametrize(
    "url",
    [
        "http://h:80",
        "h:50001",
        "tcp://:50001",
        "tcp://h:notaport",
        "tcp://h:70000",
        "tcp://h:50001/path",
        "ws://h:1/p?x=1",
        "wss://user:pw@h:1/",
    ],
)
def test_refused(url: str) -> None:
    with pytest.raises(ValueError):
        ServerAddress.parse(url)


hosts = st.one_of(
    st.from_regex(r"[a-z][a-z0-9-]{0,20}(\.[a-z][a-z0-9-]{0,10}){0,3}", fullmatch=True),
    st.ip_addresses().map(str),
)


@settings(max_examples=50)
@given(
    scheme=st.sampled_from(["tcp", "tls", "ws", "wss"]),
    host=hosts,
    port=st.integers(1, 65535),
    path=st.from_regex(r"(/[a-z0-9_.-]{1,8}){0,3}", fullmatch=True),
)
def test_url_round_trip(scheme: str, host: str, port: int, path: str) -> None:
    if scheme in ("tcp", "tls"):
        path = ""
    addr = ServerAddress(scheme, host.lower(), port, path)  # type: ignore[arg-type]
    assert ServerAddress.parse(addr.url) == addr
