"""The cold path of `kb match` and `kb search` on SQLite: the standard library's sqlite3, no
SQLAlchemy.

Importing SQLAlchemy costs a third of a second, more than the rest of a cold match. When the
database is a SQLite file at the newest schema (and, to match, the matcher cache is current),
this reads the revision and the records directly. Anything else it cannot do, and says so with
None: the caller then opens a `KnowledgeBase`, which checks the schema and builds the cache.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from kb.config import HEAD_REVISION, cache_dir_for, sqlite_file
from kb.sql import SqliteRunner, read_revision, records_by_id

if TYPE_CHECKING:  # types only: the cold path must not import these modules' dependencies
    from kb.matcher import MatcherIndex
    from kb.search import Filters, SearchResponse

RecordFetcher = Callable[[Iterable[str]], dict[str, dict[str, Any]]]
# words and a limit -> search results in `kb search --json`'s keys
RelatedSearch = Callable[[str, int], list[dict[str, Any]]]


class QuickReader:
    """Read-only access to a kb SQLite file at the newest schema."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        self.runner = SqliteRunner(conn)

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
        return read_revision(self.runner)

    def get_many(self, ids: Iterable[str]) -> dict[str, dict[str, Any]]:
        return records_by_id(self.runner, ids)

    def related(self, words: str, limit: int) -> list[dict[str, Any]]:
        """`kb search` hits for a log line no record explains (kb.search, loaded only now)."""
        from kb.search import Searcher

        return [hit.as_dict() for hit in Searcher(self.runner).related(words, limit)]

    def close(self) -> None:
        self.conn.close()


def open_for_matching(url: str) -> tuple[MatcherIndex, RecordFetcher, RelatedSearch] | None:
    """The matcher index, a record fetcher and the search for unmatched lines' suggestions for
    the database at `url`, or None when this path cannot serve it (not a SQLite file at the
    newest schema, or no current cache)."""
    from kb.matcher import load_index

    reader = QuickReader.open(url)
    if reader is None:
        return None
    index = load_index(cache_dir_for(url), reader.revision())
    if index is None:
        reader.close()
        return None
    return index, reader.get_many, reader.related


def search(url: str, query: str | None, filters: Filters, limit: int) -> SearchResponse | None:
    """`kb search` on the quick path, or None when the database needs the full one."""
    from kb.search import Searcher

    reader = QuickReader.open(url)
    if reader is None:
        return None
    try:
        searcher = Searcher(reader.runner, cache_dir_for(url), reader.revision())
        return searcher.search(query, filters, limit)
    finally:
        reader.close()
