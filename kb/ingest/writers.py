"""Where an import's rows go: the records, their tag rows and the full-text index.

Two writers behind one interface. `SqliteWriter` is the fast path: keys given by the writer,
rows handed to the driver as they are, FTS5 filled in one pass at the end. `PortableWriter`
is plain SQLAlchemy Core for any other database (PostgreSQL), readable on its own.
"""

from __future__ import annotations

import contextlib
import json
import operator
from dataclasses import dataclass
from typing import Any, Final, Protocol

from sqlalchemy import JSON, bindparam, delete, func, insert, select, update
from sqlalchemy.engine import Connection
from sqlalchemy.exc import OperationalError

from kb.models import FTS_COLUMNS, RECORD_TAGS, RECORDS

# FTS5 while the importer fills it: a larger in-memory term table (fewer, larger level-0
# segments) and merges of 8 segments, not 4, so each entry is rewritten fewer times.
FTS_IMPORT_CONFIG: Final = {"hashsize": 16 << 20, "automerge": 8}
FTS_DEFAULT_CONFIG: Final = {"hashsize": 1 << 20, "automerge": 4}  # FTS5's own defaults
IN_CHUNK: Final = 500  # ids a statement: under SQLite's 999 bound parameters on old builds


@dataclass(frozen=True)
class Stored:
    """What the upsert needs to know of a record already in the table."""

    content_hash: str
    stub: bool
    import_id: int | None
    key: int


@dataclass(frozen=True)
class Update:
    """A stored record's new row."""

    row: dict[str, Any]
    stored: Stored


class Writer(Protocol):
    def begin(self) -> bool:
        """Called before the first batch; True when the table holds no record yet."""

    def stored(self, ids: list[str]) -> dict[str, Stored]:
        """The stored records among `ids`."""

    def write(self, inserts: list[dict[str, Any]], updates: list[Update]) -> None:
        """Insert new rows and replace changed ones, with their tag rows."""

    def finish(self, wrote: bool) -> None:
        """After the last batch: derived indexes brought up to date."""


def make_writer(conn: Connection, import_id: int | None) -> Writer:
    if conn.dialect.name == "sqlite":
        return SqliteWriter(conn, import_id)
    return PortableWriter(conn, import_id)


class PortableWriter:
    """Records, tags and nothing else, through SQLAlchemy Core: any database."""

    def __init__(self, conn: Connection, import_id: int | None) -> None:
        self.conn = conn
        self.import_id = import_id

    def begin(self) -> bool:
        return self.conn.execute(select(func.max(RECORDS.c.key))).scalar() is None

    def stored(self, ids: list[str]) -> dict[str, Stored]:
        table = RECORDS
        out: dict[str, Stored] = {}
        for start in range(0, len(ids), IN_CHUNK):
            query = select(
                table.c.id, table.c.content_hash, table.c.stub, table.c.import_id, table.c.key
            ).where(table.c.id.in_(ids[start : start + IN_CHUNK]))
            for row in self.conn.execute(query):
                out[row.id] = Stored(row.content_hash, bool(row.stub), row.import_id, row.key)
        return out

    def write(self, inserts: list[dict[str, Any]], updates: list[Update]) -> None:
        tagged: list[tuple[int, list[str]]] = []
        if inserts:
            self.conn.execute(insert(RECORDS), inserts)
            keys = {
                record_id: stored.key
                for record_id, stored in self.stored([row["id"] for row in inserts]).items()
            }
            tagged = [(keys[row["id"]], row["tags"]) for row in inserts]
        if updates:
            tagged += self._replace(updates)
        rows = _tag_rows(tagged)
        if rows:
            self.conn.execute(
                insert(RECORD_TAGS), [{"record_key": key, "tag": tag} for key, tag in rows]
            )

    def _replace(self, updates: list[Update]) -> list[tuple[int, list[str]]]:
        """Update the rows and drop their old tag rows; the tags to write again."""
        table = RECORDS
        params = [{**u.row, "b_id": u.row["id"]} for u in updates]
        for p in params:
            del p["id"]
        columns = [c for c in params[0] if c != "b_id"]
        statement = (
            update(table)
            .where(table.c.id == bindparam("b_id"))
            .values({c: bindparam(c) for c in columns})
        )
        self.conn.execute(statement, params)
        keys = [u.stored.key for u in updates]
        tags = RECORD_TAGS
        self.conn.execute(delete(tags).where(tags.c.record_key.in_(keys)))
        return [(u.stored.key, u.row["tags"]) for u in updates]

    def finish(self, wrote: bool) -> None:
        pass


class SqliteWriter(PortableWriter):
    """SQLite: keys given here (the largest plus one, as SQLite would) so tag rows name them
    without reading them back; rows straight to the driver (SQLAlchemy's per-row binding was a
    third of the import's time); the full-text index filled once, at the end."""

    def __init__(self, conn: Connection, import_id: int | None) -> None:
        super().__init__(conn, import_id)
        self._next_key = 1

    def begin(self) -> bool:
        top = self.conn.execute(select(func.max(RECORDS.c.key))).scalar()
        self._next_key = int(top or 0) + 1
        return top is None

    def write(self, inserts: list[dict[str, Any]], updates: list[Update]) -> None:
        for row in inserts:
            row["key"] = self._next_key
            self._next_key += 1
        tagged = [(row["key"], row["tags"]) for row in inserts]
        if updates:
            # Rows written earlier in this import have no full-text entry yet (finish() adds
            # them all at once); only older rows have text to take out.
            indexed = [u.row["id"] for u in updates if u.stored.import_id != self.import_id]
            if indexed:
                _fts_delete(self.conn, indexed)
        if inserts:
            _bulk_insert(self.conn, inserts)
        if updates:
            tagged += self._replace(updates)
        rows = _tag_rows(tagged)
        if rows:
            self.conn.exec_driver_sql(
                f"INSERT INTO {RECORD_TAGS.name} (record_key, tag) VALUES (?, ?)", rows
            )

    def finish(self, wrote: bool) -> None:
        if not wrote:
            return
        # One pass over every row this import wrote, in key order: several times cheaper
        # than indexing batch by batch (FTS5 merges fewer, larger segments).
        _fts_config(self.conn, FTS_IMPORT_CONFIG)
        self.conn.exec_driver_sql(
            f"INSERT INTO records_fts(rowid, {_FTS_COLUMNS}) "
            f"SELECT key, {_FTS_COLUMNS} FROM records WHERE import_id = ? ORDER BY key",
            (self.import_id,),
        )
        _fts_config(self.conn, FTS_DEFAULT_CONFIG)


def _tag_rows(tagged: list[tuple[int, list[str]]]) -> list[tuple[int, str]]:
    """(key, tag) rows of what was written, each tag once a record."""
    return [(key, tag) for key, values in tagged for tag in dict.fromkeys(values or [])]


_JSON_COLUMNS: Final = frozenset(
    column.name for column in RECORDS.columns if isinstance(column.type, JSON)
)


def _bulk_insert(conn: Connection, rows: list[dict[str, Any]]) -> None:
    """Insert record rows straight through the driver, JSON columns encoded here."""
    names = list(rows[0])
    values_of = operator.itemgetter(*names)
    encoded = [i for i, name in enumerate(names) if name in _JSON_COLUMNS]
    params = []
    for row in rows:
        values = list(values_of(row))
        for i in encoded:
            values[i] = _to_json(values[i])
        params.append(tuple(values))
    table = RECORDS.name
    sql = f"INSERT INTO {table} ({', '.join(names)}) VALUES ({', '.join('?' * len(names))})"
    conn.exec_driver_sql(sql, params)


_encode_string: Final = json.encoder.encode_basestring_ascii


def _to_json(value: Any) -> str:
    """json.dumps(value), character for character; a list of strings (the list columns) is
    joined directly, at a third of the cost of the general encoder."""
    if type(value) is list:
        try:
            return "[" + ", ".join(map(_encode_string, value)) + "]"
        except TypeError:  # an item that is not a string
            return json.dumps(value)
    if type(value) is dict and not value:
        return "{}"
    return json.dumps(value)


_FTS_COLUMNS: Final = ", ".join(FTS_COLUMNS)


def _fts_delete(conn: Connection, ids: list[str]) -> None:
    """Take the records' current text out of the full-text index, before the rows change:
    an external-content FTS5 table must be told the old text to forget it."""
    for start in range(0, len(ids), IN_CHUNK):
        chunk = ids[start : start + IN_CHUNK]
        marks = ", ".join("?" * len(chunk))
        conn.exec_driver_sql(
            f"INSERT INTO records_fts(records_fts, rowid, {_FTS_COLUMNS}) "
            f"SELECT 'delete', key, {_FTS_COLUMNS} FROM records WHERE id IN ({marks})",
            tuple(chunk),
        )


def _fts_config(conn: Connection, settings: dict[str, int]) -> None:
    for name, value in settings.items():
        with contextlib.suppress(OperationalError):  # an older SQLite: slower, not wrong
            conn.exec_driver_sql(
                "INSERT INTO records_fts(records_fts, rank) VALUES (?, ?)", (name, value)
            )
