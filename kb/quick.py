"""The cold path of `kb match` and `kb search`: the standard library's sqlite3 on SQLite, the
driver alone (psycopg) on PostgreSQL, no SQLAlchemy.

Importing SQLAlchemy (and the library around it) costs more than the rest of a cold match.
When the database is a SQLite file or a PostgreSQL database at the newest schema (and, to
match, the matcher index is in the cache or stored in the database), this reads the revision
and the records directly. Anything else it cannot do, and says so with None: the caller then
opens a `KnowledgeBase`, which checks the schema (and says what is wrong: exit 3) and builds
the index.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Final

from kb.config import (
    HEAD_REVISION,
    cache_dir_for,
    masked,
    sqlite_file,
    sqlite_reader_uri,
)
from kb.errors import DatabaseError
from kb.sql import Runner, SqliteRunner, read_revision, records_by_id

if TYPE_CHECKING:  # types only: the cold path must not import these modules' dependencies
    from kb.matcher import MatcherIndex
    from kb.search import Filters, SearchResponse
    from kb.shared_index import Status

RecordFetcher = Callable[[Iterable[str]], dict[str, dict[str, Any]]]
# words and a limit -> search results in `kb search --json`'s keys
RelatedSearch = Callable[[str, int], list[dict[str, Any]]]


# URLs the PostgreSQL quick path takes: psycopg's, which libpq reads as they are once the
# scheme is its own (user, password, host, port, database and its query parameters).
PG_SCHEMES: Final = ("postgresql+psycopg://", "postgresql://", "postgres://")
PG_CONNECT_TIMEOUT_S: Final = 10  # kb/db.py CONNECT_TIMEOUT_S


class PgRunner:
    """A psycopg connection as a `kb.sql.Runner`: `?` becomes psycopg's placeholder."""

    fts = False
    dialect = "postgresql"

    def __init__(self, conn: Any) -> None:
        self.conn = conn

    def rows(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        sql = sql.replace("%", "%%").replace("?", "%s")
        return list(self.conn.execute(sql.encode(), tuple(params)).fetchall())


class QuickReader:
    """Read-only access to a kb database at the newest schema: a SQLite file, or PostgreSQL
    in one REPEATABLE READ transaction (one snapshot: the revision and the records agree)."""

    def __init__(self, conn: Any, runner: Runner, where: str) -> None:
        self.conn = conn
        self.runner = runner
        self.where = where  # the file, or the URL with its password masked

    @classmethod
    def open(cls, url: str) -> QuickReader | None:
        """A reader, or None when this database needs the full path (and its checks)."""
        reader = cls._open_pg(url) if url.startswith(PG_SCHEMES) else cls._open_sqlite(url)
        if reader is None:
            return None
        try:
            rows = reader.runner.rows("SELECT version_num FROM alembic_version")
        except Exception:  # sqlite3.Error or psycopg.Error: not a kb database at head
            reader.close()
            return None
        if not rows or rows[0][0] != HEAD_REVISION:
            reader.close()
            return None
        return reader

    @classmethod
    def _open_sqlite(cls, url: str) -> QuickReader | None:
        path = sqlite_file(url)
        if path is None or not path.is_file():
            return None
        try:
            conn = sqlite3.connect(sqlite_reader_uri(path), uri=True, timeout=30)
        except sqlite3.Error:
            return None
        return cls(conn, SqliteRunner(conn), str(path))

    @classmethod
    def _open_pg(cls, url: str) -> QuickReader | None:
        try:
            import psycopg
        except ImportError:  # the postgres extra is missing: the full path says so
            return None
        conninfo = "postgresql://" + url.partition("://")[2]
        try:
            conn = psycopg.connect(conninfo, connect_timeout=PG_CONNECT_TIMEOUT_S)
            conn.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
            conn.read_only = True
        except (psycopg.Error, ValueError):  # unreachable, refused: the full path says why
            return None
        return cls(conn, PgRunner(conn), masked(url))

    @contextmanager
    def reading(self) -> Iterator[None]:
        """A damaged file, or one that lost a table, is a DatabaseError (exit 3), as on the
        full path: only the schema's revision was checked on opening. (On PostgreSQL a failed
        read is psycopg's error, which the CLI reports as a database error: exit 3.)"""
        try:
            yield
        except sqlite3.DatabaseError as exc:
            raise DatabaseError(
                f"cannot read the database {self.where}: {exc}",
                hint="It may be damaged: restore a copy, or import into a new file (--db).",
            ) from exc

    def revision(self) -> str:
        with self.reading():
            return read_revision(self.runner)

    def get_many(self, ids: Iterable[str]) -> dict[str, dict[str, Any]]:
        with self.reading():
            return records_by_id(self.runner, ids)

    def related(self, words: str, limit: int) -> list[dict[str, Any]]:
        """`kb search` hits for a log line no record explains (kb.search, loaded only now)."""
        from kb.search import Searcher

        return [hit.as_dict() for hit in Searcher(self.runner).related(words, limit)]

    def close(self) -> None:
        self.conn.close()


def open_for_matching(
    url: str, status: Status | None = None
) -> tuple[MatcherIndex, RecordFetcher, RelatedSearch] | None:
    """The matcher index, a record fetcher and the search for unmatched lines' suggestions for
    the database at `url`, or None when this path cannot serve it (not a SQLite file at the
    newest schema, or no current cache here nor in the file: another user's, or one whose
    cache folder was emptied)."""
    from kb.matcher import CACHE_FILE, FORMAT_VERSION, load_index

    reader = QuickReader.open(url)
    if reader is None:
        return None
    cache, revision = cache_dir_for(url), reader.revision()
    index = load_index(cache, revision)
    if index is None:
        from kb.shared_index import fetch  # only without a cache: most runs never need it

        with reader.reading():
            fetched = fetch(reader.runner, cache, CACHE_FILE, revision, FORMAT_VERSION, status)
        if fetched:
            index = load_index(cache, revision)
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
        with reader.reading():
            searcher = Searcher(reader.runner, cache_dir_for(url), reader.revision())
            return searcher.search(query, filters, limit)
    finally:
        reader.close()
