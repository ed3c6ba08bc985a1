"""Deleting records: every record named goes in one transaction, or none does, with what is
derived from it in the database (tag rows, full-text entries), under a new knowledge-base
revision, so every process's matcher index and search word lists are rebuilt as after an import.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Final

from sqlalchemy import Engine, delete, select
from sqlalchemy.engine import Connection
from sqlalchemy.exc import DBAPIError

from kb import db
from kb.errors import Ambiguous, NotFound
from kb.ingest.writers import fts_delete
from kb.lookup import find
from kb.models import RECORD_TAGS, RECORDS
from kb.records import ID_RE
from kb.sql import chunks

NOTHING_DELETED: Final = "Nothing was deleted."
NAMED: Final = 10  # unknown keys an error names before "and N more"
_COLUMNS: Final = (RECORDS.c.key, RECORDS.c.id, RECORDS.c.repo, RECORDS.c.slug)


@dataclass(frozen=True)
class DeletedRecord:
    """A record deleted (or that a dry run would delete), as people tell records apart."""

    id: str
    repo: str
    slug: str

    def as_dict(self) -> dict[str, Any]:
        return {"id": self.id, "repo": self.repo, "slug": self.slug}


@dataclass(frozen=True)
class DeleteReport:
    """What `delete_records` did: the records deleted in the order their keys were given
    (each once), whether it was a dry run, and the revision it committed (None when it
    changed nothing)."""

    deleted: list[DeletedRecord] = field(default_factory=list)
    dry_run: bool = False
    revision: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"deleted": [r.as_dict() for r in self.deleted], "dry_run": self.dry_run}


def delete_records(engine: Engine, keys: Iterable[str], *, dry_run: bool = False) -> DeleteReport:
    """Delete the records these keys name: ids, or any key `kb show` takes (kb.lookup.find).
    All of them in one transaction, or none: a key that names no record raises NotFound, one
    that names several raises Ambiguous, and nothing is deleted. `dry_run`: only resolve them.
    """
    wanted = list(dict.fromkeys(key.strip() for key in keys))
    if not wanted:
        return DeleteReport(dry_run=dry_run)
    try:
        with engine.begin() as conn:
            revision = None
            if not dry_run:
                # Written first: on SQLite the first write takes the write lock, so the rows
                # read next are the ones deleted (on PostgreSQL the revision row's lock makes
                # a second delete wait, then read what the first left).
                revision = uuid.uuid4().hex
                db.set_meta(conn, "revision", revision)
            rows = _resolve(conn, wanted)
            if not dry_run:
                _delete(conn, rows)
    except DBAPIError as exc:
        raise db.unusable(engine, exc, "cannot delete from") from None
    deleted = [DeletedRecord(row.id, row.repo, row.slug) for row in rows]
    return DeleteReport(deleted, dry_run, revision)


def _resolve(conn: Connection, keys: list[str]) -> list[Any]:
    """The row each key names, each record once, in the keys' order. Ids are looked up in
    batches (a script may name thousands); any other key, and an id no record has (it may
    be a slug or a code), goes through kb.lookup.find as `kb show` would."""
    ids = [key.lower() for key in keys if ID_RE.fullmatch(key.lower())]
    by_id: dict[str, Any] = {}
    for part in chunks(ids):
        for stored in conn.execute(select(*_COLUMNS).where(RECORDS.c.id.in_(part))):
            by_id[stored.id] = stored
    found: dict[str, Any] = {}
    unknown: list[tuple[str, NotFound]] = []
    for key in keys:
        row: Any = by_id.get(key.lower())
        if row is None:
            try:
                row = find(conn, key)
            except NotFound as exc:
                unknown.append((key, exc))
                continue
            except Ambiguous as exc:
                hint = f"{exc.hint} {NOTHING_DELETED}"
                raise Ambiguous(exc.message, exc.candidates, hint) from None
        found.setdefault(row.id, row)
    if len(unknown) == 1:
        _key, error = unknown[0]
        raise NotFound(error.message, f"{NOTHING_DELETED} {error.hint}", error.suggestions)
    if unknown:
        named = ", ".join(repr(key) for key, _error in unknown[:NAMED])
        more = f" and {len(unknown) - NAMED} more" if len(unknown) > NAMED else ""
        raise NotFound(f"{len(unknown)} keys name no record: {named}{more}", NOTHING_DELETED)
    return list(found.values())


def _delete(conn: Connection, rows: list[Any]) -> None:
    """The rows gone with their full-text entries and tag rows."""
    if conn.dialect.name == "sqlite":
        # FTS5 with external content must be told the old text while the rows still hold it.
        # (PostgreSQL's tsvector is a column of the row: it goes with it.)
        fts_delete(conn, [row.id for row in rows])
    gone = 0
    for part in chunks([row.key for row in rows]):
        conn.execute(delete(RECORD_TAGS).where(RECORD_TAGS.c.record_key.in_(part)))
        gone += conn.execute(delete(RECORDS).where(RECORDS.c.key.in_(part))).rowcount
    if gone != len(rows):  # another writer deleted some since they were read
        raise NotFound(
            f"{len(rows) - gone} of the records were deleted by another kb meanwhile",
            f"{NOTHING_DELETED} Run it again to delete the rest.",
        )
