"""Writing records: upsert by id in batches inside the import's one transaction, keep the
tag rows and the full-text index in step, and store `repos.json`'s repository metadata.
"""

from __future__ import annotations

import contextlib
import json
import operator
from collections.abc import Callable, Iterable
from typing import Any, Final

from sqlalchemy import JSON, bindparam, delete, func, insert, select, update
from sqlalchemy.engine import Connection
from sqlalchemy.exc import OperationalError

from kb.ingest.reading import Item, Unparsable
from kb.ingest.report import ImportReport, Rejection
from kb.models import FTS_COLUMNS, RECORD_TAGS, RECORDS, REPOSITORIES
from kb.patterns import never_warns
from kb.records import (
    COLUMNS,
    FieldError,
    Record,
    looks_compact,
    parse_compact,
    parse_record,
    parse_repository,
    record_id_of,
)

DEFAULT_BATCH_SIZE: Final = 1000  # rows a round trip: large enough to amortise, small in memory

# FTS5 while the importer fills it: a larger in-memory term table (fewer, larger level-0
# segments) and merges of 8 segments, not 4, so each entry is rewritten fewer times.
FTS_IMPORT_CONFIG: Final = {"hashsize": 16 << 20, "automerge": 8}
FTS_DEFAULT_CONFIG: Final = {"hashsize": 1 << 20, "automerge": 4}  # FTS5's own defaults

ID_FILTER_BITS: Final = 1 << 26  # an 8 MB bitmap of the ids an import into an empty table wrote


class _IdFilter:
    """The ids an import has written, as a bitmap of their hashes: never a false "no", and a
    false "yes" (about 1.5% at a million ids) costs only a database look-up. A set of a
    million id strings would take about 100 MB."""

    def __init__(self) -> None:
        self._bits = bytearray(ID_FILTER_BITS >> 3)

    def __contains__(self, record_id: str) -> bool:
        h = hash(record_id) & (ID_FILTER_BITS - 1)
        return bool(self._bits[h >> 3] & (1 << (h & 7)))

    def add(self, record_id: str) -> None:
        h = hash(record_id) & (ID_FILTER_BITS - 1)
        self._bits[h >> 3] |= 1 << (h & 7)

    def update(self, ids: Iterable[str]) -> None:
        bits = self._bits
        for record_id in ids:
            h = hash(record_id) & (ID_FILTER_BITS - 1)
            bits[h >> 3] |= 1 << (h & 7)


class Importer:
    """Upserts records by id inside one transaction, batch by batch."""

    def __init__(
        self,
        conn: Connection,
        report: ImportReport,
        batch_size: int = DEFAULT_BATCH_SIZE,
        check_pattern: Callable[[Record], str | None] | None = None,
    ) -> None:
        """check_pattern: the warning for a record's messagePattern (kb.patterns.prepare's);
        not called for patterns of the common shape, which prepare() never warns about."""
        self.conn = conn
        self.report = report
        self.batch_size = max(1, batch_size)
        self.check_pattern = check_pattern
        self._batch: dict[str, tuple[Record, str | None, Item]] = {}
        self._next_key: int | None = None  # SQLite: the key the next new record gets
        self._began = False  # whether the first batch has looked at the table
        self._written: _IdFilter | None = None  # when the import began with no records
        # The full records this import read: a compact index row with one of their ids is
        # most likely covered already, and is set aside until the database says so.
        self._full_seen = _IdFilter()
        self._maybe_covered: list[Item] = []

    def add(self, item: Item) -> None:
        value = item.value
        if isinstance(value, Unparsable):
            self._reject(item, None, "record", value.reason)
            return
        version = item.dataset_version
        if isinstance(value, dict) and "record" in value and isinstance(value["record"], dict):
            version = (
                value.get("datasetVersion")
                if isinstance(value.get("datasetVersion"), str)
                else version
            )
            value = value["record"]
        if item.compact and isinstance(value, dict) and str(value.get("id")) in self._full_seen:
            # The published layout reads every full record, then the index: don't validate,
            # hash and compare rows that only repeat what is stored.
            self._maybe_covered.append(item)
            if len(self._maybe_covered) >= self.batch_size:
                self._settle_covered()
            return
        self._store(item, value, version)

    def _settle_covered(self) -> None:
        """Count the set-aside index rows whose full record is stored; store the others."""
        items, self._maybe_covered = self._maybe_covered, []
        if not items:
            return
        self._flush()
        ids = [str(item.value["id"]) for item in items]
        table = RECORDS
        full = set(
            self.conn.execute(
                select(table.c.id).where(table.c.id.in_(ids), table.c.stub.is_(False))
            ).scalars()
        )
        for item in items:
            if item.value["id"] in full:
                self.report.covered += 1
            else:
                self._store(item, item.value, item.dataset_version)

    def _store(self, item: Item, value: Any, version: str | None) -> None:
        report = self.report
        try:
            if item.compact or (isinstance(value, dict) and looks_compact(value)):
                record = parse_compact(value)
            else:
                record = parse_record(value)
        except FieldError as exc:
            self._reject(item, record_id_of(value), exc.field, exc.reason)
            return
        if version:
            report.dataset_version = version
        if self.check_pattern is not None and not never_warns(
            record.values["message_pattern"] or ""
        ):
            # The common shape never warns; only the rest pays for a full prepare() here.
            warning = self.check_pattern(record)
            if warning:
                report.warnings.append(f"{item.file}:{item.line}: id {record.id}: {warning}")
        if not record.stub:
            self._full_seen.add(record.id)
        previous = self._batch.get(record.id)
        if previous is not None:
            self._flush()
        self._batch[record.id] = (record, version, item)
        if len(self._batch) >= self.batch_size:
            self._flush()

    def _reject(self, item: Item, record_id: str | None, field_name: str, reason: str) -> None:
        self.report.rejected += 1
        self.report.errors.append(Rejection(item.file, item.line, record_id, field_name, reason))

    def add_repository(self, item: Item) -> str | None:
        """Store one row of `repos.json`; its repository, or None when it was rejected."""
        try:
            values, extra = parse_repository(item.value)
        except FieldError as exc:
            repo = item.value.get("repo") if isinstance(item.value, dict) else None
            self._reject(item, str(repo)[:200] if repo else None, exc.field, exc.reason)
            return None
        table = REPOSITORIES
        row = {
            **values,
            "extra": extra,
            "dataset_version": item.dataset_version,
            "import_id": self.report.import_id,
        }
        done = self.conn.execute(
            update(table).where(table.c.repo == values["repo"]).values(row)
        ).rowcount
        if not done:
            self.conn.execute(insert(table).values(row))
        self.report.repositories += 1
        return str(values["repo"])

    def finish(self) -> None:
        self._settle_covered()
        self._flush()
        if self.conn.dialect.name == "sqlite" and (self.report.inserted or self.report.updated):
            # One pass over every row this import wrote, in key order: several times cheaper
            # than indexing batch by batch (FTS5 merges fewer, larger segments).
            _fts_config(self.conn, FTS_IMPORT_CONFIG)
            self.conn.exec_driver_sql(
                f"INSERT INTO records_fts(rowid, {_FTS_COLUMNS}) "
                f"SELECT key, {_FTS_COLUMNS} FROM records WHERE import_id = ? ORDER BY key",
                (self.report.import_id,),
            )
            _fts_config(self.conn, FTS_DEFAULT_CONFIG)

    def _flush(self) -> None:
        if not self._batch:
            return
        batch, self._batch = self._batch, {}
        table = RECORDS
        sqlite = self.conn.dialect.name == "sqlite"
        if not self._began:
            self._began = True
            top = self.conn.execute(select(func.max(table.c.key))).scalar()
            if top is None:
                self._written = _IdFilter()
            if sqlite:
                # Keys are given here, as SQLite would (the largest plus one), so the tag rows
                # can name them without reading them back.
                self._next_key = int(top or 0) + 1
        ids = list(batch)
        if self._written is not None:
            # The table was empty when this import began: only ids it wrote can be there.
            ids = [record_id for record_id in ids if record_id in self._written]
            self._written.update(batch)
        existing = self._existing(ids) if ids else {}
        inserts: list[dict[str, Any]] = []
        updates: list[dict[str, Any]] = []
        for record_id, (record, version, _item) in batch.items():
            digest = record.content_hash()
            old = existing.get(record_id)
            if old is None:
                row = self._row(record, version, digest)
                if self._next_key is not None:
                    row["key"] = self._next_key
                    self._next_key += 1
                inserts.append(row)
                self.report.inserted += 1
            elif old[0] == digest or (record.stub and not old[1]):
                self.report.unchanged += 1  # a stub never replaces a full record
            else:
                row = self._row(record, version, digest)
                row["b_id"] = row.pop("id")
                updates.append(row)
                self.report.updated += 1
        if sqlite and updates:
            # Rows written earlier in this import have no full-text entry yet (finish() adds
            # them all at once); only older rows have text to take out.
            indexed = [
                row["b_id"] for row in updates if existing[row["b_id"]][2] != self.report.import_id
            ]
            if indexed:
                _fts_update(self.conn, indexed, "delete")
        if inserts:
            _bulk_insert(self.conn, inserts)
        tags = RECORD_TAGS
        # The tags of what was written (not of unchanged records), from the rows themselves.
        tagged: list[tuple[int, list[str]]] = []
        if inserts and sqlite:
            tagged = [(row["key"], row["tags"]) for row in inserts]
        elif inserts:
            keys = dict(
                self.conn.execute(
                    select(table.c.id, table.c.key).where(
                        table.c.id.in_([row["id"] for row in inserts])
                    )
                ).tuples()
            )
            tagged = [(keys[row["id"]], row["tags"]) for row in inserts]
        if updates:
            columns = [c for c in updates[0] if c != "b_id"]
            statement = (
                update(table)
                .where(table.c.id == bindparam("b_id"))
                .values({c: bindparam(c) for c in columns})
            )
            self.conn.execute(statement, updates)
            updated = [(existing[row["b_id"]][3], row["tags"]) for row in updates]
            self.conn.execute(
                delete(tags).where(tags.c.record_key.in_([key for key, _tags in updated]))
            )
            tagged += updated
        tag_rows = [(key, tag) for key, values in tagged for tag in dict.fromkeys(values or [])]
        if tag_rows and sqlite:
            self.conn.exec_driver_sql(
                f"INSERT INTO {tags.name} (record_key, tag) VALUES (?, ?)", tag_rows
            )
        elif tag_rows:
            self.conn.execute(
                insert(tags), [{"record_key": key, "tag": tag} for key, tag in tag_rows]
            )

    def _existing(self, ids: list[str]) -> dict[str, tuple[str, bool, int | None, int]]:
        """What the upsert needs of the stored records among ids: hash, stub, import, key."""
        table = RECORDS
        query = select(
            table.c.id, table.c.content_hash, table.c.stub, table.c.import_id, table.c.key
        ).where(table.c.id.in_(ids))
        return {
            row.id: (row.content_hash, row.stub, row.import_id, row.key)
            for row in self.conn.execute(query)
        }

    def _row(self, record: Record, version: str | None, digest: str) -> dict[str, Any]:
        values = record.values
        row = (
            dict(values)
            if values.keys() == _COLUMN_SET
            else {column: values.get(column) for column in COLUMNS}
        )
        row["extra"] = record.extra
        row["stub"] = record.stub
        row["dataset_version"] = version
        row["content_hash"] = digest
        row["import_id"] = self.report.import_id
        return row


_COLUMN_SET: Final = frozenset(COLUMNS)
_JSON_COLUMNS: Final = frozenset(
    column.name for column in RECORDS.columns if isinstance(column.type, JSON)
)


def _bulk_insert(conn: Connection, rows: list[dict[str, Any]]) -> None:
    """Insert record rows. On SQLite, straight to the driver: SQLAlchemy's per-row bind
    processing was a third of the import's time, and these values are plain already."""
    table = RECORDS
    if conn.dialect.name != "sqlite":
        conn.execute(insert(table), rows)
        return
    names = list(rows[0])
    values_of = operator.itemgetter(*names)
    encoded = [i for i, name in enumerate(names) if name in _JSON_COLUMNS]
    params = []
    for row in rows:
        values = list(values_of(row))
        for i in encoded:
            values[i] = _to_json(values[i])
        params.append(tuple(values))
    sql = f"INSERT INTO {table.name} ({', '.join(names)}) VALUES ({', '.join('?' * len(names))})"
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


def _fts_update(conn: Connection, ids: list[str], action: str) -> None:
    """Add the records' current text to the full-text index, or ("delete") take it out.

    An external-content FTS5 table must be told the old text to forget it, so deletes run
    before the rows change and inserts after."""
    for start in range(0, len(ids), 500):
        chunk = ids[start : start + 500]
        marks = ", ".join("?" * len(chunk))
        if action == "delete":
            sql = (
                f"INSERT INTO records_fts(records_fts, rowid, {_FTS_COLUMNS}) "
                f"SELECT 'delete', key, {_FTS_COLUMNS} FROM records WHERE id IN ({marks})"
            )
        else:
            sql = (
                f"INSERT INTO records_fts(rowid, {_FTS_COLUMNS}) "
                f"SELECT key, {_FTS_COLUMNS} FROM records WHERE id IN ({marks})"
            )
        conn.exec_driver_sql(sql, tuple(chunk))


def _fts_config(conn: Connection, settings: dict[str, int]) -> None:
    for name, value in settings.items():
        with contextlib.suppress(OperationalError):  # an older SQLite: slower, not wrong
            conn.exec_driver_sql(
                "INSERT INTO records_fts(records_fts, rank) VALUES (?, ?)", (name, value)
            )
