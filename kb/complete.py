"""Shell completion from the knowledge base: record ids and slugs, repositories, tags and
exception classes that begin with what was typed. Read straight from a SQLite file with the
standard library (a completion must answer in a blink); other databases complete nothing.
"""

from __future__ import annotations

import sqlite3
from typing import Final

from kb.config import resolve_database_url, sqlite_file, sqlite_reader_uri

LIMIT: Final = 50  # a shell shows this many at most usefully

# What each kind of value is read from; the column is compared with what was typed (a prefix).
_QUERIES: Final = {
    "record": (
        "SELECT id FROM records WHERE id >= :p AND id < :p || 'g' "
        "UNION ALL SELECT slug FROM records WHERE slug >= :p AND slug < :p || '\uffff'"
    ),
    "repo": "SELECT DISTINCT repo FROM records WHERE repo >= :p AND repo < :p || '\uffff'",
    "tag": "SELECT DISTINCT tag FROM record_tags WHERE tag >= :p AND tag < :p || '\uffff'",
    "error_class": (
        "SELECT DISTINCT error_class FROM records "
        "WHERE error_class >= :p AND error_class < :p || '\uffff'"
    ),
}


def candidates(kind: str, typed: str, db: str | None) -> list[str]:
    """Values of `kind` beginning with `typed`, at most LIMIT, sorted; [] when the database is
    not a SQLite file kb can read."""
    path = sqlite_file(resolve_database_url(db))
    if path is None or not path.is_file():
        return []
    try:
        con = sqlite3.connect(sqlite_reader_uri(path), uri=True, timeout=1)
        try:
            rows = con.execute(_QUERIES[kind] + f" LIMIT {LIMIT}", {"p": typed}).fetchall()
        finally:
            con.close()
    except sqlite3.Error:
        return []
    return sorted({str(value) for (value,) in rows if value})
