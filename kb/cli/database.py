"""`kb import`, `kb delete` and `kb db`: records into the database and out of it, and the
database's schema."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

import click

from kb.cli.shared import ONE_SHOT, KbGroup, completer, open_kb
from kb.errors import EXIT_NOTHING_FOUND, EXIT_OK, Interrupted

if TYPE_CHECKING:
    from kb.knowledge import KnowledgeBase


@click.command("import", short_help="Import datasets: files, folders, URLs, stdin.")
@click.argument("sources", nargs=-1, required=True, metavar="PATH...")
@click.option(
    "--batch-size",
    type=click.IntRange(1, 100_000),
    default=1000,
    show_default=True,
    help="Records written per round trip.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON on stdout.")
@click.option("--quiet", "-q", is_flag=True, help="No progress bar and no summary.")
@click.option(
    "--force",
    is_flag=True,
    help="Import a published dataset again even when its version was imported already.",
)
@click.pass_context
def import_command(
    ctx: click.Context,
    sources: tuple[str, ...],
    batch_size: int,
    as_json: bool,
    quiet: bool,
    force: bool,
) -> None:
    """Import error records from files, folders, URLs or `-` (stdin).

    Reads the dataset as ErrLookup publishes it (a site's or mirror's manifest.json, its
    data/ folder or the folder holding that: the index and every repository's records,
    checksums checked), and single records, wrapped records, JSON arrays, JSONL, the compact
    index.json, any of them gzipped, and folders. Records are upserted by id in one
    transaction; bad records are listed on stderr as FILE:LINE: id ID: FIELD: reason and
    skipped. A published dataset whose version is imported already is not read again.
    Exit 0: all stored; 1: some records rejected or repository files unreadable (the rest
    stored); 2: an input could not be read (nothing stored); 3: the database is unusable.

    \b
    Example:
      kb import data/records.jsonl
      kb import https://example.org/data/manifest.json --json
    """
    from kb.ingest import expand_inputs, total_bytes
    from kb.render import import_summary, safe

    kb = open_kb(ctx)
    bars = None
    if not quiet and sys.stderr.isatty():
        bars = _ImportBars(total_bytes(expand_inputs(sources)))
    try:
        report = kb.import_sources(
            list(sources),
            batch_size=batch_size,
            progress=bars.advance if bars else None,
            on_repository=bars.repository if bars else None,
            force=force,
            build_matcher=True,  # beside the import where it can; _build_matcher() otherwise
        )
    except KeyboardInterrupt:
        raise Interrupted("Interrupted: nothing was stored (the import was rolled back).") from None
    finally:
        if bars is not None:
            bars.close()
    for line in [*report.errors, *report.failed]:
        click.echo(safe(str(line), multiline=False), err=True)
    if not quiet:
        for note in report.skipped:
            click.echo("note: " + safe(note, multiline=False), err=True)
        for warning in report.warnings:
            click.echo("warning: " + safe(warning, multiline=False), err=True)
    if as_json:
        from kb.render import to_json

        click.echo(to_json(report.as_dict()))
    elif not quiet:
        click.echo(safe(import_summary(report)), err=True)
    if report.inserted or report.updated:
        try:
            _build_matcher(kb, quiet)
        except KeyboardInterrupt:
            stored = report.inserted + report.updated
            raise Interrupted(
                f"Interrupted: {stored:,} record{'s were' if stored != 1 else ' was'} stored; "
                "the matcher index was not built (the next `kb match` builds it)."
            ) from None
    # Stored, committed and the build beside it reaped: its connections closed here, the
    # process then ends without the interpreter's finalization (kb.cli.exit_now), whose
    # collections of every object took 0.18-0.20 s after a 150,000-record import (2026-12-05).
    kb.close()
    ONE_SHOT["ends_quickly"] = True
    ctx.exit(EXIT_OK if report.complete else EXIT_NOTHING_FOUND)


@click.command("delete", short_help="Delete records by id or slug: all named, or none.")
@click.argument(
    "keys", nargs=-1, required=True, metavar="ID_OR_SLUG...", shell_complete=completer("record")
)
@click.option("--dry-run", is_flag=True, help="List the records that would go; delete nothing.")
@click.option("--json", "as_json", is_flag=True, help="Print what was deleted as JSON.")
@click.pass_context
def delete_command(ctx: click.Context, keys: tuple[str, ...], dry_run: bool, as_json: bool) -> None:
    """Delete records by id, or by any key `kb show` takes, in one transaction.

    Every key must name one record: a key that names none exits 1, one that names several
    exits 2, and then nothing is deleted. The records' full-text entries go with them and
    the matcher index is rebuilt (as after an import), so `kb match`, `kb search` and
    `kb show` no longer find them, in this process or any other. An import that brings a
    record again stores it again (a published dataset's version imported already needs
    `kb import --force`).

    \b
    Example:
      kb delete 46a1fcb95e0d367e
      kb delete --dry-run 46a1fcb95e0d367e numpy/numpy/the-order-of-integration-must-be-non-negative
    """
    from kb.render import safe, to_json

    kb = open_kb(ctx)
    try:
        report = kb.delete(keys, dry_run=dry_run)
    except KeyboardInterrupt:
        raise Interrupted("Interrupted: nothing was deleted.") from None
    if as_json:
        click.echo(to_json(report.as_dict()))
    else:
        count = len(report.deleted)
        what = f"{count} record{'s' * (count != 1)}"
        click.echo(f"Would delete {what}:" if dry_run else f"Deleted {what}:")
        for record in report.deleted:
            click.echo(f"  {record.id}  {safe(f'{record.repo}/{record.slug}', multiline=False)}")
    if report.revision is not None:
        try:
            _build_matcher(kb, quiet=False)
        except KeyboardInterrupt:
            count = len(report.deleted)
            raise Interrupted(
                f"Interrupted: {count:,} record{'s were' if count != 1 else ' was'} deleted; "
                "the matcher index was not built (the next `kb match` builds it)."
            ) from None


def _build_matcher(kb: KnowledgeBase, quiet: bool) -> None:
    """The matcher index for the revision an import or a deletion made, so the next
    `kb match` only loads it; where it cannot be written (a full or read-only cache
    folder), a note says so. One built beside an import is only shared, with no word of a
    build."""
    if kb.matcher_is_current():
        kb.build_matcher()
        return
    if not quiet and sys.stderr.isatty():
        with click.progressbar(
            length=kb.count(), label="Building the matcher index", file=sys.stderr
        ) as build_bar:
            kb.build_matcher(progress=build_bar.update)
    else:
        if not quiet:
            click.echo("Building the matcher index...", err=True)
        kb.build_matcher()


class _ImportBars:
    """Progress on a terminal: the bytes read, then the repositories of a published dataset."""

    def __init__(self, total: int | None) -> None:
        self._bar: Any = click.progressbar(
            length=total or 0,
            label="Importing",
            file=sys.stderr,
            show_pos=False,
            show_percent=total is not None,
        )
        self._bar.__enter__()
        self._repositories = False

    def advance(self, n: int) -> None:
        if not self._repositories:
            self._bar.update(n)

    def repository(self, done: int, total: int, repo: str) -> None:
        if not self._repositories:
            self._bar.__exit__(None, None, None)
            self._bar = click.progressbar(
                length=total, label="Repositories", file=sys.stderr, show_pos=True
            )
            self._bar.__enter__()
            self._repositories = True
        self._bar.update(1)

    def close(self) -> None:
        self._bar.__exit__(None, None, None)


@click.group("db", cls=KbGroup)
def db_group() -> None:
    """The database schema: see its revision, upgrade an older one."""


@db_group.command("upgrade")
@click.pass_context
def db_upgrade(ctx: click.Context) -> None:
    """Upgrade the database to this kb's schema (creates a new one at the newest).

    \b
    Example:
      kb --db team.sqlite3 db upgrade
    """
    from kb import db
    from kb.config import resolve_database_url

    engine = db.make_engine(resolve_database_url(ctx.obj.get("db")))
    before, after = db.upgrade(engine)
    if before == after:
        click.echo(f"Already at the newest schema revision {after}.", err=True)
    else:
        click.echo(f"Upgraded from {before or 'nothing'} to {after}.", err=True)


@db_group.command("current")
@click.pass_context
def db_current(ctx: click.Context) -> None:
    """Print the database's schema revision, and whether it is the newest.

    \b
    Example:
      kb db current
    """
    from kb import db
    from kb.config import HEAD_REVISION, resolve_database_url, sqlite_file
    from kb.errors import DatabaseError

    url = resolve_database_url(ctx.obj.get("db"))
    path = sqlite_file(url)
    if path is not None and not path.exists():  # asking must not create one
        raise DatabaseError(f"no database at {path}", hint="kb import or kb db upgrade creates it.")
    engine = db.make_engine(url)
    revision = db.current_revision(engine)
    if revision is None:
        click.echo("none (not a kb database yet)")
    else:
        state = "head" if revision == HEAD_REVISION else f"needs upgrade to {HEAD_REVISION}"
        click.echo(f"{revision} ({state})")
