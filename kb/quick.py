"""The cold path of `kb match` on SQLite: the standard library's sqlite3, no SQLAlchemy.

Importing SQLAlchemy costs a third of a second, more than the rest of a cold match. When the
database is a SQLite file at the newest schema and the matcher cache is current, this reads
the revision and the matched records directly; anything else falls back to KnowledgeBase.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from kb.records import COLUMNS, Record

if TYPE_CHECKING:  # types only: the cold path must not import these modules' dependencies
    from kb.matcher import MatcherIndex
    from kb.search import Filters, SearchResponse

# The newest Alembic revision; tests/test_db.py proves it equals the scripts' head.
HEAD_REVISION: Final = "0004"
_JSON_COLUMNS: Final = frozenset({"solutions", "prevention_tips", "tags"})


def cache_dir_for(url: str) -> Path:
    """Where derived caches (the matcher index) of the database at `url` live."""
    from platformdirs import user_cache_dir

    digest = hashlib.sha256(url.encode("utf-8")).hexdigest()[:16]
    return Path(user_cache_dir("kb", appauthor=False)) / digest


def sqlite_file(url: str) -> Path | None:
    """The file of a plain `sqlite:///path` URL, else None."""
    prefix = "sqlite:///"
    if not url.startswith(prefix) or "?" in url:
        return None
    path = url[len(prefix) :]
    return None if not path or path == ":memory:" else Path(path)


class QuickReader:
    """Read-only access to a kb SQLite file at the newest schema."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    @classmethod
    def open(cls, url: str) -> QuickReader | None:
        """A reader, or None when this database needs the full path (and its checks)."""
        path = sqlite_file(url)
        if path is None or not path.is_file():
            return None
        try:
            conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30)
            row = conn.execute("SELECT version_num FROM alembic_version").fetchone()
        except sqlite3.Error:
            return None
        if row is None or row[0] != HEAD_REVISION:
            conn.close()
            return None
        return cls(conn)

    def revision(self) -> str:
        row = self.conn.execute("SELECT value FROM kb_meta WHERE key = 'revision'").fetchone()
        return str(row[0]) if row else "empty"

    def get_many(self, ids: Iterable[str]) -> dict[str, dict[str, Any]]:
        wanted = list(dict.fromkeys(ids))
        out: dict[str, dict[str, Any]] = {}
        names = [*COLUMNS, "extra", "stub"]
        for start in range(0, len(wanted), 500):
            chunk = wanted[start : start + 500]
            marks = ",".join("?" * len(chunk))
            query = f"SELECT {', '.join(names)} FROM records WHERE id IN ({marks})"
            for row in self.conn.execute(query, chunk):
                values = dict(zip(names, row, strict=True))
                for column in _JSON_COLUMNS:
                    values[column] = json.loads(values[column]) if values[column] else []
                extra = json.loads(values.pop("extra") or "{}")
                stub = bool(values.pop("stub"))
                record = Record(values=values, extra=extra, stub=stub)
                out[record.id] = record.to_dataset()
        return out

    def close(self) -> None:
        self.conn.close()


RecordFetcher = Callable[[Iterable[str]], dict[str, dict[str, Any]]]


def open_for_matching(url: str) -> tuple[MatcherIndex, RecordFetcher]:
    """The matcher index and a record fetcher for the database at `url`, cheaply if possible.

    The quick path needs a SQLite file at the newest schema and a current cache; otherwise
    KnowledgeBase opens it (checking the schema, exit 3 on an old one) and builds the cache.
    """
    from kb.matcher import load_index

    reader = QuickReader.open(url)
    if reader is not None:
        index = load_index(cache_dir_for(url), reader.revision())
        if index is not None:
            return index, reader.get_many
        reader.close()
    from kb.knowledge import KnowledgeBase

    kb = KnowledgeBase(url)
    return kb.matcher(), kb.get_many


def search(url: str, query: str | None, filters: Filters, limit: int) -> SearchResponse:
    """`kb search` on the cheapest path that can answer it (see `open_for_matching`)."""
    from kb.search import Searcher, SqliteRunner

    reader = QuickReader.open(url)
    if reader is not None:
        try:
            searcher = Searcher(SqliteRunner(reader.conn), cache_dir_for(url), reader.revision())
            return searcher.search(query, filters, limit)
        finally:
            reader.close()
    from kb.knowledge import KnowledgeBase

    with KnowledgeBase(url) as kb:
        return kb.search_by(query, filters, limit)
