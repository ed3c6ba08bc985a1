"""Plain SQL with `?` parameters on either driver, and the reads every path needs.

A `Runner` runs one statement on the standard library's sqlite3 (the cold path: no SQLAlchemy)
or on any SQLAlchemy connection, so search, records by id and the revision are written once for
both. `select_in` is the one way to look many values up with `IN (...)`.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, Final, Protocol, TypeVar

from kb.records import COLUMNS, Record

T = TypeVar("T")

# Values bound in one `IN (...)`: below SQLite's old limit of 999 parameters per statement,
# and big enough that a look-up of thousands of ids is a handful of round trips.
IN_CHUNK: Final = 500
META_TABLE: Final = "kb_meta"  # kb/models.py META
# Columns stored as JSON text on SQLite; PostgreSQL's driver hands them over decoded.
_JSON_COLUMNS: Final = frozenset({"solutions", "prevention_tips", "tags"})
_RECORD_COLUMNS: Final = (*COLUMNS, "extra", "stub")


class Runner(Protocol):
    """Runs one SQL statement with `?` parameters and returns its rows as tuples."""

    fts: bool  # SQLite with the FTS5 index
    dialect: str  # "sqlite", "postgresql", ...

    def rows(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]: ...


class SqliteRunner:
    """The standard library's sqlite3 (the cold path), or a SQLAlchemy connection's own."""

    fts = True
    dialect = "sqlite"

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def rows(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        return self.conn.execute(sql, tuple(params)).fetchall()


class SqlAlchemyRunner:
    """Any SQLAlchemy connection; `?` becomes the driver's own placeholder."""

    def __init__(self, conn: Any) -> None:
        self.conn = conn
        self.dialect = str(conn.dialect.name)
        self.fts = self.dialect == "sqlite"
        self.qmark = conn.dialect.paramstyle == "qmark"

    def rows(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        if not self.qmark:
            sql = sql.replace("%", "%%").replace("?", "%s")
        return [tuple(row) for row in self.conn.exec_driver_sql(sql, tuple(params))]


def chunks(values: Sequence[T], size: int = IN_CHUNK) -> Iterator[Sequence[T]]:
    for start in range(0, len(values), size):
        yield values[start : start + size]


def select_in(
    execute: Callable[[str, Sequence[Any]], Iterable[Sequence[Any]]],
    sql: str,
    values: Iterable[Any],
) -> Iterator[Sequence[Any]]:
    """The rows of `sql` for every value, asked IN_CHUNK values at a time. `sql` has one
    `{marks}` where the `IN (...)` list goes; `execute` is a runner's `rows` or a sqlite3
    connection's `execute`."""
    for part in chunks(list(values)):
        yield from execute(sql.format(marks=",".join("?" * len(part))), part)


def read_revision(runner: Runner) -> str:
    """The knowledge base's content revision: changes whenever an import changed a record,
    and every derived cache is keyed by it."""
    rows = runner.rows(f"SELECT value FROM {META_TABLE} WHERE key = ?", ("revision",))
    return str(rows[0][0]) if rows else "empty"


def records_by_id(runner: Runner, ids: Iterable[str]) -> dict[str, dict[str, Any]]:
    """The records with these ids, in the dataset's own keys; unknown ids are left out."""
    names = ", ".join(_RECORD_COLUMNS)
    out: dict[str, dict[str, Any]] = {}
    for row in select_in(
        runner.rows,
        f"SELECT {names} FROM records WHERE id IN ({{marks}})",
        dict.fromkeys(ids),
    ):
        values = dict(zip(_RECORD_COLUMNS, row, strict=True))
        for column in _JSON_COLUMNS:
            values[column] = _json_value(values[column], [])
        extra = _json_value(values.pop("extra"), {})
        record = Record(values=values, extra=dict(extra or {}), stub=bool(values.pop("stub")))
        out[record.id] = record.to_dataset()
    return out


def _json_value(value: Any, empty: Any) -> Any:
    """A JSON column's value: text on SQLite (empty text meaning `empty`), decoded already
    where the driver does it (psycopg)."""
    if isinstance(value, str):
        return json.loads(value) if value else empty
    return empty if value is None else value
