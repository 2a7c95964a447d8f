"""A listing paged by offset, described for SQL: a table's rows (optionally filtered) in chain
order, newest first, and the conditions that start a page at a given row's key instead of
skipping the rows before it (`rest.pages` keeps those keys)."""

from __future__ import annotations

from dataclasses import dataclass

Key = tuple[object, ...]  # a row's values of a listing's `columns`


@dataclass(frozen=True, slots=True)
class Listing:
    """A table's rows, optionally filtered, newest first: ordered by `columns` (the first is
    `height`), each descending or not as `descending` says; the columns identify a row."""

    table: str
    columns: tuple[str, ...]
    descending: tuple[bool, ...]
    where: str = ""  # a filter: "category = ?"
    params: tuple[object, ...] = ()

    def order(self, newest_first: bool = True) -> str:
        return ", ".join(
            f"{c} {'DESC' if d == newest_first else 'ASC'}"
            for c, d in zip(self.columns, self.descending, strict=True)
        )

    def from_key(self, newest_first: bool) -> str:
        """Rows at or after an anchor key in the given order (the key's values bound once
        per placeholder, in the order of `columns`): a range on the leading column the index
        can seek to, then the lexicographic rest."""
        first = self.columns[0]
        later = "<" if self.descending[0] == newest_first else ">"
        terms = []
        for i, (c, d) in enumerate(zip(self.columns, self.descending, strict=True)):
            last = i == len(self.columns) - 1
            op = ("<" if d == newest_first else ">") + ("=" if last else "")
            terms.append(" AND ".join([*(f"{p} = ?" for p in self.columns[:i]), f"{c} {op} ?"]))
        return f"{first} {later}= ? AND (" + " OR ".join(f"({t})" for t in terms) + ")"

    def bind(self, key: Key) -> list[object]:
        """The parameters of `from_key` for `key`."""
        out: list[object] = [key[0]]
        for i in range(len(self.columns)):
            out += [*key[:i], key[i]]
        return out

    def filtered(self, extra: str = "") -> str:
        parts = [p for p in (self.where, extra) if p]
        return f"WHERE {' AND '.join(parts)}" if parts else ""


@dataclass(frozen=True, slots=True)
class Seek:
    """Where a page starts: `where` (an extra condition, "" for none) with `params`, then
    `offset` rows skipped; `empty` when the page lies beyond the last row."""

    where: str
    params: list[object]
    offset: int
    empty: bool = False
