"""A small blocking JSON-RPC client for the bitcoind ladle starts on loopback.

Blocking on purpose: the node answers on loopback in about a millisecond, and the devnet's
block building is synchronous (`Node.mine`); one call at a time keeps the node's view and ours
in step.
"""

from __future__ import annotations

import base64
import http.client
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import orjson


class RpcError(Exception):
    """The node answered with an error object (`code`, `message`), or could not be read."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(f"bitcoind error {code}: {message}")
        self.code = code
        self.message = message


RPC_IN_WARMUP = -28  # the node is starting (also: an unreadable reply while it warms up)


@dataclass(frozen=True, slots=True)
class BitcoindRpc:
    host: str
    port: int
    user: str
    password: str
    timeout: float = 60.0

    @property
    def url(self) -> str:
        """With the credentials: what `--bitcoind-rpc URL` options take."""
        return f"http://{self.user}:{self.password}@{self.host}:{self.port}"

    def call(self, method: str, *params: Any) -> Any:
        return _result(self._post({"jsonrpc": "1.0", "id": 1, "method": method, "params": params}))

    def batch(self, calls: Sequence[tuple[str, Sequence[Any]]]) -> list[Any]:
        """Each call's result, in order, from one JSON-RPC batch; RpcError on the first error."""
        replies = self._post(
            [
                {"jsonrpc": "1.0", "id": i, "method": method, "params": list(params)}
                for i, (method, params) in enumerate(calls)
            ]
        )
        return [_result(reply) for reply in sorted(replies, key=lambda r: int(r["id"]))]

    def _post(self, body: object) -> Any:
        conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
        token = base64.b64encode(f"{self.user}:{self.password}".encode()).decode()
        try:
            conn.request(
                "POST",
                "/",
                orjson.dumps(body),
                {"Authorization": f"Basic {token}", "Content-Type": "application/json"},
            )
            return orjson.loads(conn.getresponse().read())
        except ValueError as exc:  # an HTML error page while the node warms up
            raise RpcError(RPC_IN_WARMUP, f"unreadable reply: {exc}") from None
        finally:
            conn.close()


def _result(reply: Any) -> Any:
    error = reply.get("error")
    if error:
        raise RpcError(int(error.get("code", 0)), str(error.get("message", "")))
    return reply["result"]
