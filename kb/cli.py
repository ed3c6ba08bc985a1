"""The `kb` command: parses flags, calls the library, renders, and maps errors to exit codes.

Only this module imports click, and nothing imports it. Heavy modules (SQLAlchemy, the
matcher's engines) are imported inside the commands that need them, so `kb --help` is quick.
"""

from __future__ import annotations

import gc
import math
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from kb import __version__
from kb.errors import (
    EXIT_DATABASE,
    EXIT_INTERRUPTED,
    EXIT_NOTHING_FOUND,
    EXIT_OK,
    Ambiguous,
    InputError,
    Interrupted,
    KbError,
    NotFound,
)

if TYPE_CHECKING:
    from kb.knowledge import KnowledgeBase

F = TypeVar("F", bound=Callable[..., Any])
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE: what a shell reports for a writer whose reader left


class KbGroup(click.Group):
    """Turns every KbError into its one-line message, next step and exit code."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except KbError as exc:
            from kb.render import safe

            prefix = "" if isinstance(exc, Interrupted) else "Error: "
            click.echo(prefix + safe(exc.message, multiline=False), err=True)
            listed = exc.candidates if isinstance(exc, Ambiguous) else []
            if isinstance(exc, NotFound) and exc.suggestions:
                click.echo("Did you mean:", err=True)
                listed = exc.suggestions
            for found in listed:
                click.echo(
                    f"  {found.id}  {safe(found.repo, multiline=False)}/"
                    f"{safe(found.slug, multiline=False)}  "
                    f"{safe(found.detail, multiline=False)}",
                    err=True,
                )
            if exc.hint:
                click.echo(exc.hint, err=True)
            ctx.exit(exc.exit_code)
        except KeyboardInterrupt:
            # Ctrl-C: one line and 130, not click's "Aborted!" and 1 ("nothing found").
            # Commands that write catch it first and say what was stored.
            click.echo("Interrupted.", err=True)
            ctx.exit(EXIT_INTERRUPTED)
        except BrokenPipeError:
            # The reader of stdout went away (`kb export - | head`): stop as a program killed
            # by SIGPIPE would, without a second error when Python flushes stdout at exit.
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            ctx.exit(EXIT_BROKEN_PIPE)
        except Exception as exc:
            # A database failure outside the library's own checks (a lock, a dropped server).
            # (SQLAlchemy's wrapper, or psycopg's own error on the quick path)
            sa_exc = sys.modules.get("sqlalchemy.exc")
            psycopg = sys.modules.get("psycopg")
            if sa_exc is not None and isinstance(exc, sa_exc.DBAPIError):
                cause: BaseException = exc.orig
            elif psycopg is not None and isinstance(exc, psycopg.Error):
                cause = exc
            else:
                raise
            from kb.config import masked

            reason = " ".join(masked(str(cause)).split())
            click.echo(f"Error: database error: {reason}", err=True)
            ctx.exit(EXIT_DATABASE)


def completer(kind: str) -> Callable[[click.Context, Any, str], list[str]]:
    """Shell completion of ids, slugs, repositories, tags or classes from the knowledge base
    (`--db` as typed so far, else the default one)."""

    def complete(ctx: click.Context, _param: Any, incomplete: str) -> list[str]:
        from kb.complete import candidates

        root = ctx.find_root()
        return candidates(kind, incomplete, root.params.get("db"))

    return complete


def min_score_option(func: F) -> F:
    """How sure a match must be, the same on every command that matches."""
    return click.option(
        "--min-score",
        type=click.FloatRange(0, 1),
        default=None,
        callback=lambda _ctx, _param, value: _a_number(value),
        help="Report errors scoring at least this (default: the matcher's, 0.5).",
    )(func)


def terminal_options(func: F) -> F:
    """--color and --no-pager, on every command that prints for people."""
    func = click.option("--no-pager", is_flag=True, help="Never page long output on a terminal.")(
        func
    )
    return click.option(
        "--color",
        type=click.Choice(["auto", "always", "never"]),
        default="auto",
        show_default=True,
        help="Colour: on a terminal (auto; never with NO_COLOR, always with FORCE_COLOR).",
    )(func)


def style_for(color: str) -> Any:
    """Terminal styling: colour as asked, prose as wide as the terminal."""
    from kb import render, terminal

    return render.Style(terminal.use_color(color), width=terminal.width())


def show_text(text: str, no_pager: bool) -> None:
    """Output for people: on a terminal, through the pager when longer than the screen."""
    from kb import terminal

    terminal.page(text, enabled=not no_pager)


class SlowNotice:
    """Status lines of a slow step (fetching or building the matcher index) on a terminal: the
    first only once the step has taken NOTICE_AFTER_S (most take less), the closing one, with
    the step's true elapsed time, only when the first was shown."""

    NOTICE_AFTER_S = 0.3  # below this a step needs no explaining

    def __init__(self) -> None:
        self._timer: Any = None
        self._shown = False

    def __call__(self, line: str) -> None:
        import threading

        if self._timer is None:
            self._timer = threading.Timer(self.NOTICE_AFTER_S, self._show, (line,))
            self._timer.daemon = True
            self._timer.start()
            return
        self._timer.cancel()
        self._timer = None
        if self._shown:
            click.echo(line, err=True)
        self._shown = False

    def _show(self, line: str) -> None:
        self._shown = True
        click.echo(line, err=True)


def slow_notice() -> SlowNotice | None:
    return SlowNotice() if sys.stderr.isatty() else None


def _a_number(value: float | None) -> float | None:
    """click's FloatRange lets NaN through (every comparison with it is false)."""
    if value is not None and math.isnan(value):
        raise click.BadParameter("must be a number, not NaN")
    return value


def open_kb(ctx: click.Context) -> KnowledgeBase:
    from kb.knowledge import KnowledgeBase
    from kb.render import safe

    def note(text: str) -> None:
        click.echo("note: " + safe(text, multiline=False), err=True)

    return KnowledgeBase(ctx.obj.get("db"), notify=note)


def format_option(func: F) -> F:
    """The same output choice on every command that prints records."""
    return click.option(
        "--format",
        "fmt",
        type=click.Choice(["text", "json", "markdown"]),
        default="text",
        show_default=True,
        help="Text for people, markdown for tickets, JSON for programs.",
    )(func)


@click.group(cls=KbGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--db",
    metavar="URL",
    help="Database URL or SQLite path. Default: $KB_DATABASE_URL, then the user data dir.",
)
@click.version_option(__version__, "--version", prog_name="kb")
@click.pass_context
def cli(ctx: click.Context, db: str | None) -> None:
    """kb: paste an error log, get what is known about every error in it.

    \b
    Example:
      kb import data/
      kb match data/logs/service-with-tracebacks.log
    """
    ctx.ensure_object(dict)
    ctx.obj["db"] = db


@cli.command("import", short_help="Import datasets: files, folders, URLs, stdin.")
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
    ctx.exit(EXIT_OK if report.complete else EXIT_NOTHING_FOUND)


def _build_matcher(kb: KnowledgeBase, quiet: bool) -> None:
    """The matcher index for the revision an import made, so the next `kb match` only loads
    it; where it cannot be written (a full or read-only cache folder), a note says so."""
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


@cli.command(short_help="Find the known errors in a log, with fixes.")
@click.argument("source", required=False, default="-", metavar="[PATH|-]")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "json", "markdown", "github"]),
    default="text",
    show_default=True,
    help="Text for people, markdown for tickets, JSON for programs, github for ::error "
    "annotations in a GitHub Actions log.",
)
@click.option("--json", "as_json", is_flag=True, help="Same as --format json.")
@click.option("--brief", is_flag=True, help="One line per error: line, score, id, repository.")
@click.option("--ids", "-q", "ids_only", is_flag=True, help="Only the matched records' ids.")
@click.option(
    "--clipboard", is_flag=True, help="Read the log from the clipboard (pbpaste, wl-paste, ...)."
)
@terminal_options
@click.option(
    "--top",
    type=click.IntRange(1, 20),
    default=3,
    show_default=True,
    help="Records shown per error: the best and the alternatives.",
)
@min_score_option
@click.pass_context
def match(
    ctx: click.Context,
    source: str,
    fmt: str,
    as_json: bool,
    brief: bool,
    ids_only: bool,
    clipboard: bool,
    color: str,
    no_pager: bool,
    top: int,
    min_score: float | None,
) -> None:
    """Find every known error in a log and print what is known about each one.

    Reads a file, or stdin (paste, then Ctrl-D). Prints each error found in log order with
    its record: what it means, the solutions and the example fix. Exit 0 when something
    was found, 1 when nothing was.

    \b
    Example:
      kb match build.log
      kubectl logs api-7d9 | kb match --json
    """
    from kb import render
    from kb.matcher import DEFAULT_MIN_SCORE

    if as_json:
        fmt = "json"
    index, fetch, related = _open_matching(ctx)
    # A one-shot process: what is loaded by now lives until exit, and a big log makes tens of
    # thousands of short-lived containers: collecting less often (big.log at 150k records:
    # 20 ms in 49 collections -> 8 ms in 28).
    gc.freeze()
    gc.set_threshold(10_000, 50, 100)
    threshold = DEFAULT_MIN_SCORE if min_score is None else min_score
    log_bytes: bytes | None = None  # kept when the output must quote the log (github)
    if clipboard:
        from kb import terminal

        try:
            log_bytes = terminal.read_clipboard()
        except OSError as exc:
            raise InputError(str(exc), hint="Paste the log into `kb match -` instead.") from exc
        label = "the clipboard"
        report, fetch = _matched(ctx, index, fetch, log_bytes, top, threshold)
    elif source == "-":
        if sys.stdin.isatty():
            click.echo("Paste the log, then press Ctrl-D.", err=True)
        label = "the pasted text"
        if fmt == "github":
            log_bytes = sys.stdin.buffer.read()
            report, fetch = _matched(ctx, index, fetch, log_bytes, top, threshold)
        else:
            report, fetch = _matched(ctx, index, fetch, sys.stdin.buffer, top, threshold)
    else:
        label = source
        try:
            with open(source, "rb") as stream:
                report, fetch = _matched(ctx, index, fetch, stream, top, threshold)
        except OSError as exc:
            raise InputError(f"{source}: cannot read: {exc.strerror}") from exc
    if not (ids_only or brief or fmt == "github"):
        report.add_suggestions(related)  # for the lines no record explains, a few searches
    if not report.stats.get("records"):
        click.echo(
            "The knowledge base is empty: import a dataset first (kb import PATH).", err=True
        )
    wanted = [m.id for m in report.matches]
    if fmt == "text":  # it names the alternatives' repositories; JSON and markdown list ids
        wanted += [alt for m in report.matches for alt, _score in m.alternatives]
    records = fetch(wanted) if not ids_only else {}
    if ids_only or brief or fmt == "github":
        from kb import compact

        if ids_only:
            click.echo(compact.match_ids(report), nl=False)
        elif fmt == "github":
            if log_bytes is None:
                log_bytes = Path(source).read_bytes()
            lines = log_bytes.decode("utf-8", "replace").split("\n")
            click.echo(compact.github_annotations(report, records, lines), nl=False)
        else:
            click.echo(compact.matches_brief(report, records), nl=False)
    elif fmt == "json":
        click.echo(render.to_json(render.matches_json(report, records)))
    elif fmt == "markdown":
        show_text(render.matches_markdown(report, records, label), no_pager)
    else:
        show_text(render.matches_text(report, records, style_for(color), label), no_pager)
    ctx.exit(EXIT_OK if report.matches else EXIT_NOTHING_FOUND)


def _matched(
    ctx: click.Context,
    index: Any,
    fetch: Callable[[list[str]], dict[str, Any]],
    log: Any,
    top: int,
    threshold: float,
) -> tuple[Any, Callable[[list[str]], dict[str, Any]]]:
    """The report of `index` on `log`, and the fetcher to use with it. A matcher cache found
    damaged half-way is removed by then: it is built again (the full path) and the log read
    again (a pipe is kept for that up to kb.matcher.replay.REPLAY_BYTES, else exit 3)."""
    from kb.matcher.cache import CacheDamaged
    from kb.matcher.replay import Replayable

    replayable = Replayable.wrap(log)
    try:
        return index.match(replayable.stream(), top=top, min_score=threshold), fetch
    except CacheDamaged as exc:
        from kb.render import safe

        click.echo(f"note: {safe(exc.message, multiline=False)}; rebuilding it", err=True)
        kb = open_kb(ctx)
        again = replayable.again(exc)
        return kb.matcher().match(again, top=top, min_score=threshold), kb.get_many


def _open_matching(
    ctx: click.Context,
) -> tuple[Any, Callable[[list[str]], dict[str, Any]], Callable[[str, int], list[dict[str, Any]]]]:
    """The matcher index, a record fetcher and the search for unmatched lines' suggestions:
    the quick stdlib path when the database allows, else the full path (which checks the
    schema, exit 3 if old, and builds the cache)."""
    from kb.config import resolve_database_url
    from kb.quick import open_for_matching

    status = slow_notice()  # fetching or building the index, said on a terminal when slow
    opened = open_for_matching(resolve_database_url(ctx.obj.get("db")), status)
    if opened is None:
        kb = open_kb(ctx)
        opened = kb.matcher(status=status), kb.get_many, kb.related
    return opened


@cli.command(
    context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False},
    short_help="Run a command; on failure, show its known errors.",
)
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED, metavar="-- COMMAND")
@min_score_option
@click.pass_context
def run(ctx: click.Context, command: tuple[str, ...], min_score: float | None) -> None:
    """Run a command; when it fails, show the known errors in what it printed.

    The command's output passes through unchanged (stdout to stdout, stderr to stderr); kb
    keeps the last 16 MB of it. When the command exits with a status other than 0, kb matches
    that output and prints each known error with its first fix on stderr. kb exits with the
    command's own status (127 when it cannot be found).

    \b
    Example:
      kb run -- pytest -x tests/
      kb run -- python train.py --epochs 3
    """
    import shlex

    from kb import compact
    from kb.render import safe
    from kb.run import run as run_command
    from kb.text import clip

    finished = run_command(command, stdout=sys.stdout.buffer, stderr=sys.stderr.buffer)
    shown = clip(safe(shlex.join(command), multiline=False), 80)
    if finished.error is not None:
        click.echo(f"kb run: {finished.error}", err=True)
        ctx.exit(finished.status)
    if finished.status == 0:
        ctx.exit(0)
    index, fetch, _related = _open_matching(ctx)
    report = index.match(finished.output, min_score=min_score)
    status = f"exited with status {finished.status}"
    if not report.matches:
        click.echo(f"kb: `{shown}` {status}; no known error in its output.", err=True)
        ctx.exit(finished.status)
    noun = "error" if len(report.matches) == 1 else "errors"
    click.echo(
        f"\nkb: `{shown}` {status}; {len(report.matches)} known {noun} in its output "
        "(line numbers count its output):",
        err=True,
    )
    records = fetch([m.id for m in report.matches])
    click.echo(compact.matches_brief(report, records, fixes=True), nl=False, err=True)
    click.echo("More: kb show ID", err=True)
    ctx.exit(finished.status)


@cli.command(short_help="Look records up by words, id, slug, code.")
@click.argument("words", nargs=-1, metavar="[QUERY]")
@click.option("--repo", help="Only this repository (owner/name).", shell_complete=completer("repo"))
@click.option("--tag", help="Only records with this tag.", shell_complete=completer("tag"))
@click.option(
    "--error-class",
    help="Only this exception class, e.g. ValueError.",
    shell_complete=completer("error_class"),
)
@click.option("--code", help="Only this error code.")
@click.option(
    "--type",
    "error_type",
    type=click.Choice(["exception", "error_code", "console", "http", "validation", "panic"]),
    help="Only this error type.",
)
@click.option(
    "--severity",
    type=click.Choice(["critical", "error", "warning", "info"]),
    help="Only this severity.",
)
@click.option("--limit", type=click.IntRange(1, 1000), default=10, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Same as --format json.")
@click.option("--nl", "as_nl", is_flag=True, help="One JSON object per result, a line each.")
@click.option("--csv", "as_csv", is_flag=True, help="CSV with a header row.")
@format_option
@terminal_options
@click.pass_context
def search(
    ctx: click.Context,
    words: tuple[str, ...],
    repo: str | None,
    tag: str | None,
    error_class: str | None,
    code: str | None,
    error_type: str | None,
    severity: str | None,
    limit: int,
    as_json: bool,
    as_nl: bool,
    as_csv: bool,
    fmt: str,
    color: str,
    no_pager: bool,
) -> None:
    """Look records up by words, an id, slug or error code, and filters.

    Words from a message, identifiers (backend_per_kind), dotted and slashed names
    (torch.cuda, vllm/config/attention.py) and "quoted phrases" all work; filters work with
    or without a query. Misspelt words are corrected ("did you mean"). Exit 1 when nothing
    is found.

    \b
    Example:
      kb search unknown kv cache group kind
      kb search --repo pandas-dev/pandas --error-class KeyError "not in index"
    """
    from kb import quick, render
    from kb.config import resolve_database_url
    from kb.search import Filters

    query = " ".join(words).strip() or None
    filters = Filters(repo, tag, error_class, code, error_type, severity)
    response = quick.search(resolve_database_url(ctx.obj.get("db")), query, filters, limit)
    if response is None:  # not a SQLite file at the newest schema: the full path checks it
        with open_kb(ctx) as kb:
            response = kb.search_by(query, filters, limit)
    if as_nl or as_csv:
        from kb import compact

        text = compact.results_nl(response) if as_nl else compact.results_csv(response)
        click.echo(text, nl=False)
    elif as_json or fmt == "json":
        click.echo(render.to_json(response.as_dict()))
    elif not response.results:
        what = f"for {render.safe(query, multiline=False)!r}" if query else "with these filters"
        click.echo(f"Nothing found {what}.", err=True)
        for suggestion in response.suggestions:
            click.echo(f"Did you mean: {render.safe(suggestion, multiline=False)}?", err=True)
    elif fmt == "markdown":
        show_text(render.search_markdown(response), no_pager)
    else:
        show_text(render.search_text(response, style_for(color)), no_pager)
    ctx.exit(EXIT_OK if response.results else EXIT_NOTHING_FOUND)


@cli.command(short_help="Show one record whole.")
@click.argument("key", metavar="ID_OR_SLUG", shell_complete=completer("record"))
@format_option
@terminal_options
@click.pass_context
def show(ctx: click.Context, key: str, fmt: str, color: str, no_pager: bool) -> None:
    """Show one record whole: by id, slug, repo/slug or error code.

    An unknown key exits 1; a slug shared by several records lists them and exits 2.

    \b
    Example:
      kb show 46a1fcb95e0d367e
      kb show vllm-project/vllm/unknown-kv-cache-group-kind-kind-in-backend-pe --format markdown
    """
    from kb import render

    kb = open_kb(ctx)
    record = kb.lookup(key)
    if fmt == "json":
        click.echo(render.to_json(record))
        return
    repository = kb.repository(record["repo"])
    if fmt == "markdown":
        show_text(render.record_markdown(record, repository=repository), no_pager)
    else:
        show_text(render.record_text(record, style_for(color), repository), no_pager)


@cli.command(short_help="Totals by repository, type, severity; imports.")
@click.option("--json", "as_json", is_flag=True, help="Print the figures as JSON.")
@terminal_options
@click.pass_context
def stats(ctx: click.Context, as_json: bool, color: str, no_pager: bool) -> None:
    """Totals: records, by repository, by type and severity, and the last imports.

    \b
    Example:
      kb stats --json
    """
    from kb import render

    figures = open_kb(ctx).stats()
    if as_json:
        click.echo(render.to_json(figures))
    else:
        show_text(render.stats_text(figures, style_for(color)), no_pager)


@cli.command(short_help="Write records as JSONL (import reads it back).")
@click.argument("path", required=False, default="-", metavar="[PATH|-]")
@click.option(
    "--repo",
    help="Only the records of this repository (owner/name).",
    shell_complete=completer("repo"),
)
@click.pass_context
def export(ctx: click.Context, path: str, repo: str | None) -> None:
    """Write records as JSONL, one a line, in the dataset's keys; `kb import` reads it back.

    \b
    Example:
      kb export backup.jsonl
      kb export --repo pallets/flask - | gzip > flask.jsonl.gz
    """
    from kb.output import output_file

    kb = open_kb(ctx)
    if path == "-":
        count = kb.export(sys.stdout, repo)
    else:
        with output_file(path) as out:
            count = kb.export(out, repo)
    click.echo(f"{count:,} records exported.", err=True)


@cli.command(short_help="Serve a web page and a JSON API to a team.")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", type=click.IntRange(1, 65535), default=8000, show_default=True)
@click.option(
    "--token",
    envvar="KB_SERVE_TOKEN",
    help="Secret every request must carry (Bearer header, or the page's login). "
    "Required off loopback. Default: $KB_SERVE_TOKEN.",
)
@click.option(
    "--workers",
    type=click.IntRange(1, 64),
    default=1,
    show_default=True,
    help="Processes, each with its own matcher index (about one per core).",
)
@click.option("--allow-import", is_flag=True, help="Offer POST /api/import (needs the token too).")
@click.option(
    "--max-body",
    type=click.IntRange(1024, None),
    default=5 * 1024 * 1024,
    show_default=True,
    help="Largest request body in bytes (a log to match); larger ones get 413.",
)
@click.option(
    "--match-timeout",
    type=click.FloatRange(0.001, 3600),
    default=10.0,
    show_default=True,
    callback=lambda _ctx, _param, value: _a_number(value),
    help="Seconds a match may take; slower ones get 504.",
)
@click.pass_context
def serve(
    ctx: click.Context,
    host: str,
    port: int,
    token: str | None,
    workers: int,
    allow_import: bool,
    max_body: int,
    match_timeout: float,
) -> None:
    """Serve the knowledge base to a team: a web page and a JSON API.

    The page takes a pasted log and shows the fixes, searches, and has a stable link per
    record (/records/ID). The API: POST /api/match, GET /api/search, GET /api/records/ID,
    GET /api/stats, GET /healthz, described at /openapi.json. Binds to 127.0.0.1 unless
    told otherwise; any other address needs a token. Needs `pip install 'kb[serve]'`.

    \b
    Example:
      kb serve
      KB_SERVE_TOKEN=$(cat token) kb serve --host 0.0.0.0 --port 8080 --workers 2
    """
    from kb.config import resolve_database_url
    from kb.serve import run
    from kb.serve.config import ServeConfig

    run(
        ServeConfig(
            db_url=resolve_database_url(ctx.obj.get("db")),
            host=host,
            port=port,
            workers=workers,
            token=token or None,
            allow_import=allow_import,
            max_body=max_body,
            match_timeout=match_timeout,
        )
    )


@cli.group("db", cls=KbGroup)
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


def main() -> None:
    try:
        cli(prog_name="kb")
    except Exception:
        # A bug, not a KbError: the traceback is for a bug report, with any password that a
        # database URL or a driver's message put in it masked.
        import traceback

        from kb.config import masked

        sys.stderr.write(masked(traceback.format_exc()))
        sys.exit(1)
