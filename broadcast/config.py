"""What the broadcaster is configured with: the nodes it fans out to, where its records live,
and how long it keeps and re-checks them.

Nodes come from `--node URL[,weight]` (Electrum servers) and `--bitcoind-rpc URL[,weight]`
(BCHN nodes' JSON-RPC, `http://user:password@host:port`, or without a login and
`--rpc-cookie FILE`) options, or a JSON file (`{"nodes": [{"url", "weight", "timeout",
"cookie"}], "db": …, "record_ttl": …}`, an `http://` URL being a BCHN node). A node's weight is the
share of the network it is believed to reach; it only shapes `estimated_network_reach`, never the
majority rule, which counts nodes.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import orjson

from broadcast.protection import Protection
from indexer.bitcoind.rpc import RpcAddress
from indexer.electrum import ServerAddress

DEFAULT_TIMEOUT = 10.0  # seconds a node may take to answer a broadcast
DEFAULT_RECORD_TTL = 7 * 24 * 3600.0  # status records are kept a week
DEFAULT_RECHECK_INTERVAL = 30.0
DEFAULT_MISSING_INPUTS_RETRY = 0.5  # a parent may still be on its way to that node
DEFAULT_MAX_BODY = 1_000_000  # a standard transaction is at most 100 kB, 200 kB as hex
DEFAULT_DB = "ladle-broadcast.sqlite"
DEFAULT_PORT = 8001


@dataclass(frozen=True, slots=True)
class NodeConfig:
    url: str
    weight: float = 1.0
    timeout: float = DEFAULT_TIMEOUT
    name: str = ""  # how verdicts name the node; the URL (without a password) when empty
    cookie: str = ""  # a BCHN node's cookie file, when its URL holds no login

    @property
    def is_bitcoind(self) -> bool:
        """A BCHN node's JSON-RPC (`http://`), not an Electrum server."""
        return self.url.startswith("http://")

    @property
    def public_url(self) -> str:
        """The URL without the RPC password (for logs, announcements and records)."""
        if self.is_bitcoind:
            return RpcAddress.parse(self.url, cookie=self.cookie or None).url
        return self.url

    def __post_init__(self) -> None:
        # ValueError names what is wrong
        if not self.is_bitcoind:
            if self.cookie:
                raise ValueError(f"{self.url}: a cookie file is for a bitcoind RPC URL")
            ServerAddress.parse(self.url)
        public = self.public_url
        if not math.isfinite(self.weight) or self.weight < 0:
            raise ValueError(f"{self.url}: weight must be a non-negative number")
        if not math.isfinite(self.timeout) or self.timeout <= 0:
            raise ValueError(f"{self.url}: timeout must be a positive number of seconds")
        if not self.name:
            object.__setattr__(self, "name", public)

    @classmethod
    def from_json(cls, obj: object, default_timeout: float = DEFAULT_TIMEOUT) -> NodeConfig:
        if isinstance(obj, str):
            return parse_node_spec(obj, default_timeout)
        if not isinstance(obj, Mapping):
            raise ValueError(f"a node must be an object {{url, weight, timeout}}, got {obj!r}")
        unknown = set(obj) - {"url", "weight", "timeout", "name", "cookie"}
        if unknown:
            raise ValueError(f"unknown node field(s): {', '.join(sorted(unknown))}")
        url = obj.get("url")
        if not isinstance(url, str):
            raise ValueError("a node needs a `url` string")
        return cls(
            url,
            _number(obj.get("weight", 1.0), "weight"),
            _number(obj.get("timeout", default_timeout), "timeout"),
            _string(obj.get("name", ""), "name"),
            _string(obj.get("cookie", ""), "cookie"),
        )


def parse_node_spec(
    spec: str, default_timeout: float = DEFAULT_TIMEOUT, *, cookie: str = ""
) -> NodeConfig:
    """`URL` or `URL,weight` (the command line's `--node` and `--bitcoind-rpc`); `cookie` is
    given to a BCHN URL without a login."""
    url, sep, weight = spec.strip().partition(",")
    value = 1.0
    if sep:
        try:
            value = float(weight)
        except ValueError:
            raise ValueError(f"{spec!r}: weight must be a number") from None
    login = "@" in url.partition("://")[2].partition("/")[0]
    own_cookie = cookie if url.startswith("http://") and not login else ""
    return NodeConfig(url, value, default_timeout, cookie=own_cookie)


@dataclass(frozen=True, slots=True)
class BroadcastConfig:
    nodes: tuple[NodeConfig, ...]
    db_path: str = DEFAULT_DB  # ":memory:" keeps records only for the process's lifetime
    record_ttl: float = DEFAULT_RECORD_TTL
    recheck_interval: float = DEFAULT_RECHECK_INTERVAL
    missing_inputs_retry: float | None = DEFAULT_MISSING_INPUTS_RETRY  # None: never retry
    max_body: int = DEFAULT_MAX_BODY
    vm_year: int = 2026
    verify_scripts: bool = True  # dry runs check scripts with libauth when Node is available
    reconnect_backoff: float = 0.5  # first delay before reconnecting to a node that failed
    protection: Protection = field(default_factory=Protection)  # applied when a POST has none

    def __post_init__(self) -> None:
        if not self.nodes:
            raise ValueError("the broadcaster needs at least one node")
        names = [n.name for n in self.nodes]
        if len(set(names)) != len(names):
            raise ValueError("node names (URLs) must be distinct")
        if self.record_ttl <= 0 or self.recheck_interval <= 0 or self.max_body <= 0:
            raise ValueError("record_ttl, recheck_interval and max_body must be positive")

    @classmethod
    def from_json(cls, obj: object) -> BroadcastConfig:
        if not isinstance(obj, Mapping):
            raise ValueError("the broadcast configuration must be a JSON object")
        allowed = {f.name for f in fields(cls)} | {"db", "timeout"}
        unknown = set(obj) - allowed
        if unknown:
            raise ValueError(f"unknown configuration field(s): {', '.join(sorted(unknown))}")
        timeout = _number(obj.get("timeout", DEFAULT_TIMEOUT), "timeout")
        nodes = obj.get("nodes")
        if not isinstance(nodes, list):
            raise ValueError("`nodes` must be a list")
        kwargs: dict[str, Any] = {
            "nodes": tuple(NodeConfig.from_json(n, timeout) for n in nodes),
        }
        db = obj.get("db_path", obj.get("db"))
        if db is not None:
            kwargs["db_path"] = _string(db, "db_path")
        for key in ("record_ttl", "recheck_interval"):
            if key in obj:
                kwargs[key] = _number(obj[key], key)
        if "missing_inputs_retry" in obj:
            retry = obj["missing_inputs_retry"]
            kwargs["missing_inputs_retry"] = None if retry is None else _number(retry, "retry")
        if "max_body" in obj:
            kwargs["max_body"] = int(_number(obj["max_body"], "max_body"))
        if "vm_year" in obj:
            kwargs["vm_year"] = int(_number(obj["vm_year"], "vm_year"))
        if "verify_scripts" in obj:
            kwargs["verify_scripts"] = _bool(obj["verify_scripts"], "verify_scripts")
        if "protection" in obj:
            kwargs["protection"] = Protection.from_json(obj["protection"])
        return cls(**kwargs)


def load_config(path: str | Path) -> BroadcastConfig:
    try:
        obj = orjson.loads(Path(path).read_bytes())
    except orjson.JSONDecodeError as exc:
        raise ValueError(f"{path}: not JSON: {exc}") from None
    return BroadcastConfig.from_json(obj)


def make_config(
    nodes: Sequence[str | NodeConfig], *, timeout: float = DEFAULT_TIMEOUT, **options: Any
) -> BroadcastConfig:
    """A configuration from node specs (`URL[,weight]`) or NodeConfigs plus keyword options."""
    parsed = tuple(n if isinstance(n, NodeConfig) else parse_node_spec(n, timeout) for n in nodes)
    return BroadcastConfig(parsed, **options)


def _number(value: object, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{what} must be a number, got {value!r}")
    return float(value)


def _string(value: object, what: str) -> str:
    if not isinstance(value, str):
        raise ValueError(f"{what} must be a string, got {value!r}")
    return value


def _bool(value: object, what: str) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"{what} must be true or false, got {value!r}")
    return value


def add_up_options(parser: argparse.ArgumentParser) -> None:
    """`ladle up`'s options for this component."""
    group = parser.add_argument_group("broadcast")
    group.add_argument(
        "--broadcast-port",
        type=int,
        metavar="PORT",
        help=f"broadcast service port (default {DEFAULT_PORT}; 0 when --ports is 0)",
    )
    group.add_argument(
        "--broadcast-db",
        metavar="PATH",
        help="SQLite file for broadcast records (default: in memory, like the devnet)",
    )
