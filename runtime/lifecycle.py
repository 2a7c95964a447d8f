"""`async with` for the long-lived async resources (the devnet, the Electrum pool, the libauth
verifier): one definition of entering and leaving instead of one per class.

`Closing` only guarantees the close on the way out (a resource that starts lazily, on first
use); `Service` also starts it on the way in. Both are mixins: the class supplies `start` and
`close`.
"""

from __future__ import annotations

from types import TracebackType
from typing import Self


class Closing:
    async def close(self) -> None:
        raise NotImplementedError

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()


class Service(Closing):
    async def start(self) -> None:
        raise NotImplementedError

    async def __aenter__(self) -> Self:
        await self.start()
        return self
