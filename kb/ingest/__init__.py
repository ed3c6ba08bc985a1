"""Importing datasets: every source of one `kb import` read, checked and upserted in one
transaction, with a report of what happened.

`reading` opens inputs and streams their JSON values, `site` knows the layout ErrLookup
publishes (manifests, `repos.json`, the site's own files), `checked` keeps a manifest's
checksums before anything is parsed, `importer` writes, and this module runs an import.
"""

from __future__ import annotations

import os
import tempfile
import uuid
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final
from urllib.parse import urlsplit, urlunsplit

from sqlalchemy import Engine, delete, insert, select, update
from sqlalchemy.engine import Connection
from sqlalchemy.exc import OperationalError, SQLAlchemyError

from kb.config import masked
from kb.db import import_transaction, set_meta
from kb.errors import DatabaseError, InputError
from kb.ingest.checked import checked_copy, remove_copies
from kb.ingest.importer import DEFAULT_BATCH_SIZE, Importer, RowsFeed
from kb.ingest.reading import Container, ProgressFn, is_url
from kb.ingest.report import ImportReport, Rejection, SourceFailure, UpToDate
from kb.ingest.site import (
    DATA_SUFFIXES,
    InputPlan,
    Manifest,
    expand_inputs,
    is_repository_entry,
    read_manifest,
    repository_file,
)
from kb.ingest.source import Source
from kb.models import DATASET_SOURCES, IMPORT_RUNS
from kb.pacing import FEWER_COLLECTIONS
from kb.records import Record
from kb.writeback import written_back

__all__ = [
    "DEFAULT_BATCH_SIZE",
    "ImportReport",
    "ProgressFn",
    "Rejection",
    "RepositoryProgressFn",
    "RowsFeed",
    "SourceFailure",
    "expand_inputs",
    "import_sources",
    "total_bytes",
]

# SQLite's page cache during an import, flat in the file's size. 128 MB, not 64: a 1M import
# took 187 s instead of 196 s, its peak 235 MB instead of 169 MB.
IMPORT_CACHE_KIB: Final = 128 << 10
# What a published manifest's entries are, in the order they are imported: the repositories'
# full records first, then the compact index, whose rows then only fill in what is missing.
REPOS_ENTRY: Final = "repos"
INDEX_ENTRY: Final = "index"

RepositoryProgressFn = Callable[[int, int, str], None]  # (done, total, repository)


def total_bytes(plan: InputPlan) -> int | None:
    """The bytes a progress bar will count, or None when they are not known beforehand."""
    total = 0
    for spec in plan.sources:
        if spec == "-" or is_url(spec) or Path(spec).name in ("manifest.json", "repos.json"):
            return None
        if not Path(spec).is_file():  # a pipe: its size is not known
            return None
        total += os.path.getsize(spec)
    return total


def import_sources(
    engine: Engine,
    specs: Iterable[str],
    *,
    batch_size: int = DEFAULT_BATCH_SIZE,
    progress: ProgressFn | None = None,
    on_repository: RepositoryProgressFn | None = None,
    check_pattern: Callable[[Record], str | None] | None = None,
    force: bool = False,
    feed: RowsFeed | None = None,
) -> ImportReport:
    """Import every source in one transaction and say what happened.

    Raises InputError (nothing stored) when a source cannot be read at all or fails its
    manifest checksum; a bad record, or a repository file that cannot be read, is only
    counted and reported. A manifest whose dataset version was imported already is skipped
    unless `force`. `feed` follows the rows stored (kb.ingest.importer.Importer); its
    revision is the one committed when records changed.
    """
    plan = expand_inputs(list(specs))
    suffixes = "/".join(DATA_SUFFIXES)
    if not plan.sources and not plan.skipped:
        folders = ", ".join(plan.empty) or "the inputs"
        raise InputError(
            f"{folders}: no dataset files (names ending {suffixes}, or .gz of those)",
            hint="Name the files to import, or a folder that holds them.",
        )
    report = ImportReport(files=list(plan.sources))
    report.warnings += [f"{folder}: no dataset files in this folder" for folder in plan.empty]
    report.skipped = [
        f"{where}: {count:,} file{'s' if count > 1 else ''} skipped (not records)"
        for where, count in plan.skipped.items()
    ]
    started = datetime.now(UTC)
    copies = Path(tempfile.mkdtemp(prefix="kb-import-"))
    try:
        with FEWER_COLLECTIONS, written_back(engine), import_transaction(engine) as conn:
            runs = IMPORT_RUNS
            run_key = conn.execute(
                insert(runs).values(
                    started_at=started,
                    sources=[_shown(spec) for spec in plan.sources],
                    inserted=0,
                    updated=0,
                    unchanged=0,
                    rejected=0,
                )
            ).inserted_primary_key
            report.import_id = int(run_key[0]) if run_key else None
            cache_size = None
            if conn.dialect.name == "sqlite":
                # The records' six indexes take keys in random order; with SQLite's default 2 MB
                # page cache a large import rereads index pages from disk on every batch.
                cache_size = conn.exec_driver_sql("PRAGMA cache_size").scalar()
                conn.exec_driver_sql(f"PRAGMA cache_size = -{IMPORT_CACHE_KIB}")
            importer = Importer(conn, report, batch_size, check_pattern, feed)
            run = _Run(conn, importer, report, copies, progress, on_repository, force)
            for spec in plan.sources:
                run.source(spec, walked=spec in plan.walked)
            importer.finish()
            if _nothing_happened(report):
                # Only up-to-date manifests: no import to remember (their check time is kept).
                conn.execute(delete(runs).where(runs.c.id == report.import_id))
            else:
                conn.execute(
                    update(runs)
                    .where(runs.c.id == report.import_id)
                    .values(
                        finished_at=datetime.now(UTC),
                        dataset_version=report.dataset_version,
                        inserted=report.inserted,
                        updated=report.updated,
                        unchanged=report.unchanged,
                        rejected=report.rejected,
                    )
                )
            if report.inserted or report.updated:
                set_meta(conn, "revision", feed.revision if feed else uuid.uuid4().hex)
                if feed is not None:
                    feed.committing(conn)
            if cache_size is not None:
                conn.exec_driver_sql(f"PRAGMA cache_size = {int(cache_size)}")
    except OperationalError as exc:
        raise DatabaseError(f"import failed, nothing was stored: {exc.orig}") from exc
    except SQLAlchemyError as exc:
        raise DatabaseError(f"import failed, nothing was stored: {exc}") from exc
    finally:
        remove_copies(copies)
    return report


def _nothing_happened(report: ImportReport) -> bool:
    return bool(report.up_to_date) and not (
        report.stored or report.rejected or report.failed or report.repositories
    )


class _Run:
    """One import's walk over its sources: records to the importer, manifests followed,
    repository listings expanded into their files."""

    def __init__(
        self,
        conn: Connection,
        importer: Importer,
        report: ImportReport,
        copies: Path,
        progress: ProgressFn | None,
        on_repository: RepositoryProgressFn | None,
        force: bool,
    ) -> None:
        self.conn = conn
        self.importer = importer
        self.report = report
        self.copies = copies  # where files fetched for checking are kept until the end
        self.progress = progress
        self.on_repository = on_repository
        self.force = force

    def source(
        self, spec: str, *, walked: bool = False, name: str | None = None, nested: bool = False
    ) -> list[str]:
        """Import one source; returns the repositories a `repos.json` listed. A listing named
        directly also brings in its repositories' files; one found in a folder walk does not
        (the walk has them). `nested`: listed by a manifest, so it may not be one."""
        source = Source(spec, None if name else self.progress, name=name)
        self.report.read += 1
        manifests: list[Container] = []
        repositories: list[str] = []
        try:
            for item in source.items():
                if isinstance(item, Container):
                    manifests.append(item)
                elif is_repository_entry(item.value):
                    repo = self.importer.add_repository(item)
                    if repo is not None:
                        repositories.append(repo)
                else:
                    self.importer.add(item)
        finally:
            source.close()
        shown = name or spec
        for container in manifests:
            if nested:
                raise InputError(f"{shown}: a manifest cannot list another manifest")
            self.manifest(container.value, spec, source.outer.sha256.hexdigest())
        if repositories and not walked and not nested:
            self.repository_files(spec, repositories)
        return repositories

    # ------------------------------------------------------------------ manifests

    def manifest(self, obj: dict[str, Any], location: str, digest: str) -> None:
        manifest = read_manifest(obj, location)
        if manifest.dataset_version and self._up_to_date(manifest, digest):
            return
        for entry in manifest.entries:
            if not entry.sha256 and not entry.raw_sha256:
                self.report.warnings.append(
                    f"{_shown(location)}: {entry.name}: the manifest gives no sha256; "
                    "read without a check"
                )
        if manifest.published:
            self._published(manifest)
        else:
            for entry in manifest.entries:
                self.source(
                    checked_copy(entry, self.copies, self.progress),
                    name=entry.location,
                    nested=True,
                )
        if manifest.dataset_version:
            self.report.dataset_version = manifest.dataset_version
            self._remember(manifest, digest)

    def _published(self, manifest: Manifest) -> None:
        """Upstream's layout: the index and repos.json checked first, then every repository's
        full records, then the index rows that no full record covered."""
        index = manifest.entry(INDEX_ENTRY)
        listing = manifest.entry(REPOS_ENTRY)
        others = [e.name for e in manifest.entries if e.name not in (INDEX_ENTRY, REPOS_ENTRY)]
        if others:
            self.report.skipped.append(
                f"{_shown(manifest.location)}: {', '.join(others)} skipped "
                "(the site's own files, not records)"
            )
        index_copy = None if index is None else checked_copy(index, self.copies, self.progress)
        if listing is not None:
            copy = checked_copy(listing, self.copies, self.progress)
            repositories = self.source(copy, name=listing.location, nested=True)
            self.repository_files(listing.location, repositories)
        else:
            self.report.warnings.append(
                f"{_shown(manifest.location)}: lists no repos.json, so only the compact index "
                "is imported (records without documentation)"
            )
        if index is not None and index_copy is not None:
            self.source(index_copy, name=index.location, nested=True)

    def repository_files(self, listing: str, repositories: list[str]) -> None:
        """Each listed repository's `repos/{owner}/{name}.json`: a file that cannot be read is
        reported and the others are imported."""
        for done, repo in enumerate(repositories, start=1):
            try:
                location = repository_file(listing, repo)
                self.source(location, nested=True)
            except InputError as exc:
                where = exc.message.split(": ", 1)
                file, reason = (where[0], where[1]) if len(where) == 2 else (listing, exc.message)
                self.report.failed.append(SourceFailure(_shown(file), reason))
            if self.on_repository is not None:
                self.on_repository(done, len(repositories), repo)

    def _up_to_date(self, manifest: Manifest, digest: str) -> bool:
        table = DATASET_SOURCES
        key = _source_key(manifest.location)
        row = self.conn.execute(select(table).where(table.c.location == key)).first()
        if row is None or self.force:
            return False
        if row.dataset_version != manifest.dataset_version or row.manifest_sha256 != digest:
            return False
        self.conn.execute(
            update(table).where(table.c.location == key).values(checked_at=datetime.now(UTC))
        )
        fetched = row.fetched_at.isoformat() if row.fetched_at else ""
        self.report.up_to_date.append(UpToDate(key, str(manifest.dataset_version), fetched))
        return True

    def _remember(self, manifest: Manifest, digest: str) -> None:
        table = DATASET_SOURCES
        key = _source_key(manifest.location)
        now = datetime.now(UTC)
        values = {
            "dataset_version": manifest.dataset_version,
            "manifest_sha256": digest,
            "fetched_at": now,
            "checked_at": now,
            "import_id": self.report.import_id,
        }
        done = self.conn.execute(
            update(table).where(table.c.location == key).values(values)
        ).rowcount
        if not done:
            self.conn.execute(insert(table).values(location=key, **values))


def _source_key(location: str) -> str:
    """How a dataset's source is remembered: its URL without credentials, or its full path."""
    if is_url(location):
        return _shown(location)
    return str(Path(location).resolve())


def _shown(spec: str) -> str:
    """A source as it may be printed and stored: a URL's user and password removed, secrets
    in its query (`?token=`, `?password=`) masked."""
    if not is_url(spec):
        return spec
    parts = urlsplit(spec)
    if "@" not in parts.netloc:
        return masked(spec)
    host = parts.netloc.rpartition("@")[2]
    return masked(urlunsplit((parts.scheme, host, parts.path, parts.query, parts.fragment)))
