"""One record found by what a person types (`kb show`, `kb delete`): an id or a unique
beginning of one, a slug, `repo/slug` or an error code; and, when none fits, the records
the key may have meant.
"""

from __future__ import annotations

import re
from typing import Any, Final

from sqlalchemy import select
from sqlalchemy.engine import Connection

from kb.errors import Ambiguous, Candidate, NotFound
from kb.models import RECORDS
from kb.records import COLUMNS, ID_RE, Record

SUGGESTIONS: Final = 5  # records suggested for a key that found none
SHORT_ID_RE: Final = re.compile(r"[0-9a-f]{6,15}")  # an id's beginning: 6 hex digits at least
SLUG_CUTOFF: Final = 80  # rapidfuzz WRatio a slug needs to be suggested for a typo
LISTED: Final = 50  # records an ambiguous key lists at most


def record_from_row(row: Any) -> Record:
    mapping = row._mapping
    return Record(
        values={column: mapping[column] for column in COLUMNS},
        extra=dict(mapping["extra"] or {}),
        stub=bool(mapping["stub"]),
    )


def candidate(row: Any) -> Candidate:
    """A record as a look-up lists it: where it is raised and its message tell it apart."""
    where = f"{row.file_path}:{row.line_number}" if row.line_number else (row.file_path or "")
    message = row.error_message if len(row.error_message) <= 80 else row.error_message[:79] + "…"
    return Candidate(row.id, row.repo, row.slug, f"{where}  {message}".strip())


def find(conn: Connection, key: str) -> Any:
    """The `records` row `key` names: by id, a unique beginning of an id (as git allows), then
    slug or `repo/slug`, then error code. NotFound (with near keys) when none fits, Ambiguous
    (with the candidates) when several do."""
    key = key.strip()
    lowered = key.lower()
    if ID_RE.fullmatch(lowered):
        row = conn.execute(select(RECORDS).where(RECORDS.c.id == lowered)).first()
        if row is not None:
            return row
    if SHORT_ID_RE.fullmatch(lowered):
        rows = conn.execute(
            select(RECORDS)
            .where(RECORDS.c.id >= lowered, RECORDS.c.id < lowered + "g")
            .order_by(RECORDS.c.id)
            .limit(LISTED)
        ).all()
        if len(rows) == 1:
            return rows[0]
        if rows:
            raise Ambiguous(
                f"{key!r} begins {len(rows)} ids",
                [candidate(row) for row in rows],
                hint="Give more of the id.",
            )
    query = select(RECORDS).where(RECORDS.c.slug == key)
    if "/" in key:
        repo, _, slug = key.rpartition("/")
        query = select(RECORDS).where(
            ((RECORDS.c.repo == repo) & (RECORDS.c.slug == slug)) | (RECORDS.c.slug == key)
        )
    rows = conn.execute(query.order_by(RECORDS.c.repo, RECORDS.c.id).limit(LISTED)).all()
    if not rows:
        rows = conn.execute(
            select(RECORDS)
            .where(RECORDS.c.error_code == key)
            .order_by(RECORDS.c.repo, RECORDS.c.id)
            .limit(LISTED)
        ).all()
    if not rows:
        raise NotFound(
            f"no record has the id, slug or code {key!r}",
            hint="Try `kb search` with words from the message.",
            suggestions=near_keys(conn, key),
        )
    if len(rows) > 1:
        one_repo = len({row.repo for row in rows}) == 1
        raise Ambiguous(
            f"{key!r} names {len(rows)} records",
            [candidate(row) for row in rows],
            hint="Use the id to pick one."
            if one_repo
            else "Use the id, or repo/slug, to pick one.",
        )
    return rows[0]


def near_keys(conn: Connection, key: str) -> list[Candidate]:
    """Records a key that found nothing may have meant: ids and slugs it begins, else the
    slugs closest to it (a typo)."""
    table = RECORDS
    wanted = key.lower().rpartition("/")[2] if "/" in key else key.lower()
    if wanted:
        for column in (table.c.id, table.c.slug):
            rows = conn.execute(
                select(table)
                .where(column >= wanted, column < wanted + "\uffff")
                .order_by(column)
                .limit(SUGGESTIONS)
            ).all()
            if rows:
                return [candidate(row) for row in rows]
    slugs = conn.execute(select(table.c.slug).distinct()).scalars().all()
    from rapidfuzz import process

    close = [
        slug
        for slug, _score, _i in process.extract(
            wanted, slugs, limit=SUGGESTIONS, score_cutoff=SLUG_CUTOFF
        )
    ]
    if not close:
        return []
    rows = conn.execute(select(table).where(table.c.slug.in_(close)).limit(SUGGESTIONS)).all()
    order = {slug: n for n, slug in enumerate(close)}
    return [candidate(row) for row in sorted(rows, key=lambda r: order[r.slug])]
