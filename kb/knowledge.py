"""The library API: `KnowledgeBase` opens a database and imports, looks up, exports and matches.

Plain values in and out; the CLI is one user of it, Python code is another.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import sqlite3
import tempfile
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Final

from sqlalchemy import Engine, func, select

from kb import db
from kb.config import cache_dir_for, resolve_database_url, sqlite_file
from kb.db import get_meta
from kb.ingest import (
    DEFAULT_BATCH_SIZE,
    ImportReport,
    ProgressFn,
    RepositoryProgressFn,
    import_sources,
)
from kb.lookup import find, record_from_row
from kb.models import DATASET_SOURCES, IMPORT_RUNS, RECORDS, REPOSITORIES
from kb.ranking import ranker_for
from kb.records import REPOSITORY_FIELDS, Record
from kb.sql import SqlAlchemyRunner, read_revision, records_by_id
from kb.text import json_safe

if TYPE_CHECKING:
    from kb.deletion import DeleteReport
    from kb.matcher import MatcherIndex, MatchReport, PatternSource
    from kb.matcher.background import BackgroundBuild
    from kb.search import Filters, SearchResponse
    from kb.shared_index import Status
    from kb.spelling import WordLists

# What writing the matcher cache raises when its folder cannot take it: no such folder or a
# file in its way, no permission, a full disk (SQLite's "database or disk is full").
CACHE_WRITE_ERRORS: Final = (OSError, sqlite3.Error)
# Rows a build after an import reads at a time (kb.matcher.background.COLUMNS, by key).
SOURCE_BATCH: Final = 2000


def repository_from_row(row: Any) -> dict[str, Any]:
    """A `repositories` row in the dataset's own keys (repos.json), unknown fields after."""
    mapping = row._mapping
    out = {spec.key: mapping[spec.column] for spec in REPOSITORY_FIELDS}
    out.update(mapping["extra"] or {})
    return out


class KnowledgeBase:
    """One knowledge base, at a SQLAlchemy URL or a SQLite path (see kb.config).

    `pooled`: keep connections open between calls (a long-running server); a command
    connects for each call and closes at once."""

    def __init__(
        self,
        url: str | None = None,
        *,
        create: bool = True,
        pooled: bool = False,
        notify: Callable[[str], None] | None = None,
    ) -> None:
        """`notify` gets a line for a person when kb works around something (a cache folder
        it cannot write, another process's build it waits for); silent by default."""
        self.url = resolve_database_url(url)
        self.engine: Engine = db.make_engine(self.url, pooled=pooled)
        self._index: MatcherIndex | None = None
        self._notify = notify or (lambda _text: None)
        if create:
            db.ensure_ready(self.engine)
        # kb's own bm25 on a SQLite file (kb.ranking): its connection opened when first needed
        # and kept from one search to the next, shared by a server's threads
        self._ranker = ranker_for(sqlite_file(self.url), db.BUSY_TIMEOUT_MS)

    def close(self) -> None:
        self.engine.dispose()
        if self._ranker is not None:
            self._ranker.close()

    def __enter__(self) -> KnowledgeBase:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ writing

    def import_sources(
        self,
        sources: Iterable[str],
        *,
        batch_size: int = DEFAULT_BATCH_SIZE,
        progress: ProgressFn | None = None,
        on_repository: RepositoryProgressFn | None = None,
        force: bool = False,
        build_matcher: bool = False,
    ) -> ImportReport:
        """Import files, folders, `-` (stdin) or URLs in one transaction.

        A published dataset (its `manifest.json`, the folder or site holding it) imports its
        repositories' full records and its compact index; `on_repository(done, total, repo)`
        follows the repositories. A dataset version imported already is skipped unless `force`.
        `build_matcher`: build the matcher index in a child process beside the import where
        it can (an import into an empty SQLite knowledge base: the two then share the
        machine's cores); `build_matcher()` afterwards builds it when this could not.
        """
        db.refuse_read_only(self.engine)
        build = self._background_build() if build_matcher else None
        try:
            report = import_sources(
                self.engine,
                sources,
                batch_size=batch_size,
                progress=progress,
                on_repository=on_repository,
                check_pattern=_pattern_warning,
                force=force,
                feed=build,
            )
        except BaseException:
            if build is not None:
                build.abandon()
            raise
        if build is not None:
            build.install(self.revision() if report.inserted or report.updated else None)
        return report

    def delete(self, keys: Iterable[str], *, dry_run: bool = False) -> DeleteReport:
        """Delete the records these keys name (ids, or any key `lookup` takes) in one
        transaction: all of them, or none when a key names no record (NotFound) or several
        (Ambiguous). Their full-text entries go with them, and the revision changes, so
        `matcher()` builds the index again (`build_matcher()` builds it now, as `kb delete`
        does). `dry_run`: only say which records they name."""
        from kb.deletion import delete_records

        if not dry_run:
            db.refuse_read_only(self.engine)
        return delete_records(self.engine, keys, dry_run=dry_run)

    def _background_build(self) -> BackgroundBuild | None:
        from kb.matcher.background import BackgroundBuild

        if self.engine.dialect.name != "sqlite":
            return None  # a server's import is bound by the server; others may write meanwhile
        try:
            return BackgroundBuild(self.cache_dir())
        except OSError:
            return None  # no cache folder to write in: build_matcher() says why

    # ------------------------------------------------------------------ reading

    def revision(self) -> str:
        """Changes whenever an import changed a record; caches of derived data key on it."""
        with self._connect() as conn:
            return read_revision(SqlAlchemyRunner(conn))

    def get(self, record_id: str) -> dict[str, Any] | None:
        """The record with this id in the dataset's own keys, or None."""
        return self.get_many([record_id]).get(record_id)

    def cache_dir(self) -> Path:
        """Where this knowledge base's derived caches (the matcher index) live."""
        return cache_dir_for(self.url)

    def matcher(
        self,
        *,
        rebuild: bool = False,
        status: Status | None = None,
        progress: Callable[[int], None] | None = None,
    ) -> MatcherIndex:
        """The matcher index for the current revision: loaded from the cache, else fetched
        from the database (where the first builder stored it), else built (one process at a
        time: the others wait for it and load what it wrote) and stored. Where the cache
        folder cannot be written, built in a temporary folder for this process alone.
        `status` gets a line before and after a fetch or a build; `progress` follows a build
        (records prepared since its last call). `rebuild` builds it from the records whatever
        the cache or the database holds, and puts it in place of the copy in the database:
        what follows a cache found damaged, which may have been fetched from there."""
        from kb.matcher import load_index
        from kb.matcher.lock import build_lock

        revision = self.revision()
        index = self._index
        if index is not None and index.revision == revision and not rebuild:
            return index  # kept in memory: repeated matches pay for neither load nor build
        cache_dir = self.cache_dir()
        index = None if rebuild else load_index(cache_dir, revision)
        if index is None and not rebuild and self._fetch_matcher(cache_dir, revision, status):
            index = load_index(cache_dir, revision)
            rebuild = index is None  # the stored copy is unreadable: build one to replace it
        if index is None:
            try:
                with build_lock(cache_dir, self._waiting):
                    index = None if rebuild else load_index(cache_dir, revision)
                    if index is None:
                        self._build(cache_dir, revision, status, progress, replace=rebuild)
                        index = load_index(cache_dir, revision)
            except CACHE_WRITE_ERRORS as exc:
                cache_dir = _temporary_folder()
                self._notify(
                    f"cannot write the matcher cache in {self.cache_dir()} ({_reason(exc)}); "
                    "the index is built for this run alone"
                )
                self._build(cache_dir, revision, status, progress, replace=rebuild)
                index = load_index(cache_dir, revision)
            if index is None:  # pragma: no cover - we just wrote it
                raise RuntimeError(f"the matcher cache in {cache_dir} cannot be read")
        self._index = index
        return index

    def matcher_is_current(self) -> bool:
        """Whether this machine's matcher cache is the current revision's already (built
        beside the import that made it, say): `build_matcher` then only shares it."""
        from kb.matcher import cache_is_current

        return cache_is_current(self.cache_dir(), self.revision())

    def build_matcher(self, progress: Callable[[int], None] | None = None) -> bool:
        """Write the matcher cache for the current revision unless it is there already, without
        loading it (what `kb import` does after storing records: the build's memory is freed
        before anything else is held), and store it in the database for the other machines.
        True if it was built; False also when the cache folder cannot take it (`notify` says
        why; `matcher()` then builds in a temporary folder). `progress` gets the number of
        records prepared since its last call."""
        from kb.matcher import CACHE_FILE, FORMAT_VERSION, cache_is_current
        from kb.matcher.lock import build_lock
        from kb.shared_index import store_quietly

        revision = self.revision()
        cache_dir = self.cache_dir()
        if cache_is_current(cache_dir, revision):
            # built here already; still shared if it was not (an import through the library)
            store_quietly(self.engine, cache_dir / CACHE_FILE, revision, FORMAT_VERSION)
            return False
        try:
            with build_lock(cache_dir, self._waiting):
                if cache_is_current(cache_dir, revision):
                    return False  # another process built it while this one waited
                self._build(cache_dir, revision, None, progress)
        except CACHE_WRITE_ERRORS as exc:
            self._notify(
                f"cannot write the matcher cache in {cache_dir} ({_reason(exc)}); "
                "`kb match` builds the index each time until it can"
            )
            return False
        return True

    def _waiting(self) -> None:
        self._notify("another kb is building the matcher index; waiting for it")

    def _build(
        self,
        cache_dir: Path,
        revision: str,
        status: Status | None,
        progress: Callable[[int], None] | None,
        *,
        replace: bool = False,
    ) -> None:
        """Write the cache for `revision` into `cache_dir`, with kb search's word lists
        collected from the same rows (kb.spelling), then share them in the database
        (`replace`: in place of a copy stored there already)."""
        import time

        from kb.matcher import CACHE_FILE, FORMAT_VERSION, write_index
        from kb.shared_index import store_quietly
        from kb.spelling import WordLists, keep_text

        started = time.perf_counter()
        if status is not None:
            count = self.count()
            status(
                f"Building the matcher index for this revision ({count:,} "
                f"record{'s' * (count != 1)}; none is stored in the database yet)..."
            )
        word_lists = WordLists()
        write_index(self._pattern_sources(word_lists), cache_dir, revision, progress)
        for kind, text in word_lists.texts().items():  # stored with the index, below
            keep_text(cache_dir, kind, revision, text)
        if status is not None:
            status(f"Built the matcher index in {time.perf_counter() - started:.1f} s.")
        store_quietly(
            self.engine, cache_dir / CACHE_FILE, revision, FORMAT_VERSION, replace=replace
        )

    def _fetch_matcher(self, cache_dir: Path, revision: str, status: Status | None) -> bool:
        """The revision's cache file fetched from the database into `cache_dir`."""
        from kb.matcher import CACHE_FILE, FORMAT_VERSION
        from kb.shared_index import fetch

        with self._connect() as conn:
            runner = SqlAlchemyRunner(conn)
            return fetch(runner, cache_dir, CACHE_FILE, revision, FORMAT_VERSION, status)

    def match(
        self,
        log: str | bytes | IO[bytes] | IO[str] | os.PathLike[str],
        *,
        top: int = 3,
        min_score: float | None = None,
        suggest: bool = True,
        timeout: float | None = None,
    ) -> MatchReport:
        """Every known error in a log, best first. `log` is the log itself as a `str` (never a
        file name) or `bytes`, an open stream, or a path-like (`pathlib.Path`) naming a file
        to read. Each match carries its record (`match.record`), fetched on first use. The
        lines no record explains are in `report.unmatched`, with `kb search` suggestions
        unless `suggest` is False. After `timeout` seconds the log is read no further and what
        was found is reported (`report.stats["stopped"] == "timeout"`). A matcher cache found
        damaged on the way is rebuilt and the log matched again (a stream is kept for that up
        to kb.matcher.replay.REPLAY_BYTES)."""
        from kb.matcher.cache import CacheDamaged
        from kb.matcher.rank import RecordSource
        from kb.matcher.replay import Replayable

        replayable = Replayable.wrap(log)
        try:
            report = self.matcher().match(
                replayable.stream(), top=top, min_score=min_score, timeout=timeout
            )
        except CacheDamaged as exc:
            self._notify(f"{exc.message}; rebuilding it")
            again = replayable.again(exc)
            report = self.matcher(rebuild=True).match(
                again, top=top, min_score=min_score, timeout=timeout
            )
        source = RecordSource((m.id for m in report.matches), self.get_many)
        for found in report.matches:
            found.source = source
        if suggest:
            report.add_suggestions(self.related)
        return report

    def related(self, words: str, limit: int = 3) -> list[dict[str, Any]]:
        """Records that share a log line's words (`kb search --json`'s result keys): what
        `match` suggests for a line no record explains."""
        from kb.search import Searcher

        with self._connect() as conn:
            searcher = Searcher(SqlAlchemyRunner(conn))
            return [hit.as_dict() for hit in searcher.related(words, limit)]

    def _pattern_sources(self, word_lists: WordLists | None = None) -> Iterator[PatternSource]:
        """The records' build sources, by key; kb search's word lists collected from them
        into `word_lists` on the way."""
        # the rows the build beside an import reads, in the same order
        from kb.matcher.background import COLUMN_AT, COLUMNS, sources_of

        columns = [getattr(RECORDS.c, name) for name in COLUMNS]
        with self._connect() as conn:
            result = conn.execution_options(yield_per=SOURCE_BATCH).execute(
                # By key, the order records were stored in: what a build beside the import
                # (kb.matcher.background) sees, so both number the records alike.
                select(*columns).order_by(RECORDS.c.key)
            )
            for batch in result.partitions():
                if word_lists is not None:
                    word_lists.add(batch, COLUMN_AT)
                yield from sources_of(batch)

    def get_many(self, ids: Iterable[str]) -> dict[str, dict[str, Any]]:
        """The records with these ids in the dataset's own keys; unknown ids are left out."""
        with self._connect() as conn:
            return records_by_id(SqlAlchemyRunner(conn), ids)

    def repository(self, repo: str) -> dict[str, Any] | None:
        """What the dataset's repos.json says of a repository, or None."""
        with self._connect() as conn:
            row = conn.execute(select(REPOSITORIES).where(REPOSITORIES.c.repo == repo)).first()
        return None if row is None else repository_from_row(row)

    def lookup(self, key: str) -> dict[str, Any]:
        """A record by id, slug, `repo/slug` or error code; Ambiguous when several fit."""
        with self._connect() as conn:
            return record_from_row(find(conn, key)).to_dataset()

    def search(
        self,
        query: str | None = None,
        *,
        repo: str | None = None,
        tag: str | None = None,
        error_class: str | None = None,
        code: str | None = None,
        error_type: str | None = None,
        severity: str | None = None,
        limit: int = 10,
    ) -> SearchResponse:
        """Records by words, an id, slug or code, and/or filters; best first."""
        from kb.search import Filters

        filters = Filters(repo, tag, error_class, code, error_type, severity)
        return self.search_by(query, filters, limit)

    def search_by(self, query: str | None, filters: Filters, limit: int = 10) -> SearchResponse:
        """`search` with the filters as one `kb.search.Filters` value."""
        from kb.search import Searcher

        with self._connect() as conn:
            runner = SqlAlchemyRunner(conn)
            searcher = Searcher(runner, self.cache_dir(), read_revision(runner), self._ranker)
            return searcher.search(query, filters, limit)

    def count(self) -> int:
        """How many records are stored."""
        with self._connect() as conn:
            return int(conn.execute(select(func.count()).select_from(RECORDS)).scalar_one())

    def stats(self) -> dict[str, Any]:
        """Totals by repository, type and severity, and the last imports."""
        with self._connect() as conn:
            total = conn.execute(select(func.count()).select_from(RECORDS)).scalar_one()
            stubs = conn.execute(
                select(func.count()).select_from(RECORDS).where(RECORDS.c.stub.is_(True))
            ).scalar_one()

            def grouped(column: Any) -> dict[str, int]:
                rows = conn.execute(
                    select(column, func.count())
                    .group_by(column)
                    .order_by(func.count().desc(), column)
                )
                return {str(key): int(count) for key, count in rows}

            runs = IMPORT_RUNS
            imports = [
                {
                    "id": row.id,
                    "started_at": row.started_at.isoformat() if row.started_at else None,
                    "sources": row.sources,
                    "dataset_version": row.dataset_version,
                    "inserted": row.inserted,
                    "updated": row.updated,
                    "unchanged": row.unchanged,
                    "rejected": row.rejected,
                }
                for row in conn.execute(select(runs).order_by(runs.c.id.desc()).limit(5))
            ]
            import_count = conn.execute(select(func.count()).select_from(runs)).scalar_one()
            sources = DATASET_SOURCES
            datasets = [
                {
                    "source": row.location,
                    "dataset_version": row.dataset_version,
                    "fetched_at": row.fetched_at.isoformat() if row.fetched_at else None,
                    "checked_at": row.checked_at.isoformat() if row.checked_at else None,
                }
                for row in conn.execute(select(sources).order_by(sources.c.fetched_at.desc()))
            ]
            repositories = [
                repository_from_row(row)
                for row in conn.execute(select(REPOSITORIES).order_by(REPOSITORIES.c.repo))
            ]
            return {
                "records": int(total),
                "stubs": int(stubs),
                "repos": conn.execute(
                    select(func.count(func.distinct(RECORDS.c.repo)))
                ).scalar_one(),
                "by_repo": grouped(RECORDS.c.repo),
                "by_type": grouped(RECORDS.c.error_type),
                "by_severity": grouped(RECORDS.c.severity),
                "datasets": datasets,
                "repositories": repositories,
                "imports": int(import_count),
                "last_imports": imports,
                "revision": get_meta(conn, "revision") or "empty",
                "database": db.describe(self.engine),
            }

    def iter_records(self, repo: str | None = None) -> Iterator[dict[str, Any]]:
        """Every record in id order, streamed, in the dataset's own keys."""
        with self._connect() as conn:
            query = select(RECORDS).order_by(RECORDS.c.id)
            if repo:
                query = query.where(RECORDS.c.repo == repo)
            result = conn.execution_options(yield_per=1000).execute(query)
            for row in result:
                yield record_from_row(row).to_dataset()

    def export(self, out: IO[str], repo: str | None = None) -> int:
        """Write JSONL, one record a line, that `import` reads back unchanged."""
        count = 0
        for record in self.iter_records(repo):
            # One record a line for any reader: U+2028 or U+0085 raw would split it for one
            # that splits lines the Unicode way, and controls would reach a terminal.
            out.write(json_safe(json.dumps(record, ensure_ascii=False, separators=(",", ":"))))
            out.write("\n")
            count += 1
        return count

    # ------------------------------------------------------- for long-running readers (kb serve)

    def get_wrapped(self, record_id: str) -> dict[str, Any] | None:
        """`{"record": ..., "datasetVersion": ...}` (the shape of upstream's API and of the
        seed file, which `import` reads back), or None when no record has this id."""
        with self._connect() as conn:
            row = conn.execute(select(RECORDS).where(RECORDS.c.id == record_id)).first()
        if row is None:
            return None
        return {"record": record_from_row(row).to_dataset(), "datasetVersion": row.dataset_version}

    def cached_matcher(self) -> MatcherIndex | None:
        """The matcher index for the current revision if it is in memory or the cache, else
        None: never builds, so a server can keep answering with its old index while the
        importing process writes the new one (fetched from the database once it is there)."""
        from kb.matcher import load_index

        revision = self.revision()
        index = self._index
        if index is not None and index.revision == revision:
            return index
        index = load_index(self.cache_dir(), revision)
        if index is None and self._fetch_matcher(self.cache_dir(), revision, None):
            index = load_index(self.cache_dir(), revision)
        if index is not None:
            self._index = index
        return index

    def _connect(self) -> Any:
        return db.connected(self.engine)


def _reason(exc: BaseException) -> str:
    return exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)


def _temporary_folder() -> Path:
    """A folder of this process's own, removed when it exits."""
    folder = tempfile.mkdtemp(prefix="kb-matcher-")
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    return Path(folder)


def _pattern_warning(record: Record) -> str | None:
    """A warning for a messagePattern kb cannot run; the record still matches by its text."""
    from kb.patterns import prepare

    prepared = prepare(record.values["message_pattern"], record.values["error_message"])
    return f"messagePattern: {prepared.warning}" if prepared.warning else None
