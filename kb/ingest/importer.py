"""The upsert: records validated, batched, compared with what is stored (by id and content
hash) and handed to a writer (kb.ingest.writers); `repos.json` rows stored as repository
metadata. Counts every record as inserted, updated, unchanged, covered or rejected.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Final, Protocol

from sqlalchemy import insert, select, update
from sqlalchemy.engine import Connection

from kb.ingest.reading import Item, Unparsable
from kb.ingest.report import ImportReport, Rejection
from kb.ingest.writers import Update, make_writer
from kb.models import RECORDS, REPOSITORIES
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


class RowsFeed(Protocol):
    """Who follows the rows an import stores (kb.matcher.background: the matcher build)."""

    revision: str  # the revision the import commits when it changed records

    def rows(self, rows: list[dict[str, Any]], meanwhile: Callable[[], bool] | None = None) -> None:
        """New rows, in the order of their keys, into a table that was empty; `meanwhile`
        does some of the import's own later work where the feed would wait (True when it
        did some)."""

    def invalid(self) -> None:
        """The rows sent no longer describe the table: a record was there or has changed."""

    def end(self) -> None:
        """Every row is stored (the full-text index and the commit are still to come)."""

    def committing(self, conn: Connection) -> None:
        """The import is about to commit `revision` through `conn`: what the feed made of the
        rows may go into the same transaction."""


class Importer:
    """Upserts records by id inside one transaction, batch by batch."""

    def __init__(
        self,
        conn: Connection,
        report: ImportReport,
        batch_size: int = DEFAULT_BATCH_SIZE,
        check_pattern: Callable[[Record], str | None] | None = None,
        feed: RowsFeed | None = None,
    ) -> None:
        """check_pattern: the warning for a record's messagePattern (kb.patterns.prepare's);
        not called for patterns of the common shape, which prepare() never warns about.
        feed: given the rows as they are stored, while they describe the whole table."""
        self.conn = conn
        self.feed = feed
        self.report = report
        self.batch_size = max(1, batch_size)
        self.check_pattern = check_pattern
        self._batch: dict[str, tuple[Record, str | None, Item]] = {}
        self._writer = make_writer(conn, report.import_id)
        self._began = False  # whether the first batch has looked at the table
        self._written: _IdFilter | None = None  # when the import began with no records
        # The full records this import read: a compact index row with one of their ids is
        # most likely covered already, and is set aside until the database says so.
        self._full_seen = _IdFilter()
        self._maybe_covered: list[Item] = []
        self._first_at: dict[str, Item] = {}  # where a repeated id was first read, if known

    def add(self, item: Item) -> None:
        value = item.value  # a Record when read and validated already (kb.ingest.typed)
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
            if isinstance(value, Record):
                record = value
            elif item.compact or (isinstance(value, dict) and looks_compact(value)):
                record = parse_compact(value)
            else:
                record = parse_record(value)
        except FieldError as exc:
            self._reject(item, record_id_of(value), exc.field, exc.reason)
            return
        refused = self._writer.unstorable(record)
        if refused is not None:
            self._reject(item, record.id, *refused)
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
            self._first_at[record.id] = previous[2]
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
        if self.feed is not None:
            self.feed.end()
        self._writer.finish(bool(self.report.inserted or self.report.updated))

    def _flush(self) -> None:
        if not self._batch:
            return
        batch, self._batch = self._batch, {}
        if not self._began:
            self._began = True
            if self._writer.begin():
                self._written = _IdFilter()
        ids = list(batch)
        if self._written is not None:
            # The table was empty when this import began: only ids it wrote can be there.
            ids = [record_id for record_id in ids if record_id in self._written]
            self._written.update(batch)
        stored = self._writer.stored(ids) if ids else {}
        inserts: list[dict[str, Any]] = []
        updates: list[Update] = []
        for record_id, (record, version, item) in batch.items():
            digest = record.content_hash()
            old = stored.get(record_id)
            if old is None:
                inserts.append(self._row(record, version, digest))
                self.report.inserted += 1
                continue
            this_import = old.import_id == self.report.import_id
            same = record.has_hash(old.content_hash)
            if this_import and record.stub == old.stub:
                self._repeated(record_id, item)
            elif this_import and record.stub:
                self.report.covered += 1  # its full record came first
                continue
            elif not this_import and (same or record.stub):
                self.report.unchanged += 1  # a stub never replaces a full record
                continue
            elif not this_import:
                self.report.updated += 1
            # else: a stub this import wrote, now filled in by its full record (counted once)
            if not same:
                updates.append(Update(self._row(record, version, digest), old))
        if inserts or updates:
            self._writer.write(inserts, updates)
        if self.feed is not None:
            if self._written is None or updates:
                self.feed.invalid()  # records stored before, or one changed: not a stream
            else:
                self.feed.rows(inserts, self._writer.spare)

    def _repeated(self, record_id: str, item: Item) -> None:
        """An id this import read before: the later copy is kept, and the user is told."""
        self.report.repeated += 1
        first = self._first_at.pop(record_id, None)
        where = f" (first at {first.file}:{first.line})" if first is not None else ""
        self.report.warnings.append(
            f"{item.file}:{item.line}: id {record_id}: appears again in this import{where}; "
            "the later copy is kept"
        )

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
