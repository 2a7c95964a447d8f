"""What the store's SQL helpers need of a connection, so that they run on the writer client
(`indexer.store.writer.Writer`) and on an `aiosqlite` connection alike (migrations and the
overlay's state are also read by the data API's readers and by tests)."""

from __future__ import annotations

from collections.abc import Awaitable, Iterable
from typing import Any, Protocol


class Sql(Protocol):
    """Awaited statements, in autocommit mode unless the caller BEGINs."""

    @property
    def in_transaction(self) -> bool: ...

    def execute(self, sql: str, parameters: Iterable[Any] | None = ..., /) -> Awaitable[object]: ...

    def execute_fetchall(
        self, sql: str, parameters: Iterable[Any] | None = ..., /
    ) -> Awaitable[Iterable[Any]]: ...

    def executemany(
        self, sql: str, parameters: Iterable[Iterable[Any]], /
    ) -> Awaitable[object]: ...

    def executescript(self, sql_script: str, /) -> Awaitable[object]: ...
