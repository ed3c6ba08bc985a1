"""`kb match` and `kb run`: a log, or a failed command's output, read for its known errors."""

from __future__ import annotations

import gc
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from kb.cli.shared import (
    ONE_SHOT,
    min_score_option,
    open_kb,
    show_text,
    slow_notice,
    style_for,
    terminal_options,
)
from kb.errors import EXIT_NOTHING_FOUND, EXIT_OK, InputError

# `kb match` stops reading a log after this long by default: far past a paste or a CI log
# (seconds), short enough that a hostile or endless one cannot hold a terminal or a CI job;
# a log of hundreds of megabytes may need more (--timeout 0).
DEFAULT_MATCH_TIMEOUT = 60.0


@click.command(short_help="Find the known errors in a log, with fixes.")
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
@click.option(
    "--all",
    "show_all",
    is_flag=True,
    help="Show every error in full (text and markdown show the first 20 and count the rest "
    "by repository; --json always has them all).",
)
@click.option(
    "--timeout",
    type=click.FloatRange(0),
    default=DEFAULT_MATCH_TIMEOUT,
    show_default=True,
    help="Stop reading the log after this many seconds and report what was found (0: no limit).",
)
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
    show_all: bool,
    timeout: float,
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
    # First, before the matcher's modules load: a big log file's prefilter scan, by a helper
    # process on the core that would idle meanwhile (kb.matcher.prescan).
    early = _early_scan(ctx, source) if not clipboard and source != "-" else None
    import kb.matcher.index  # noqa: F401  (the matcher loaded before the index is timed)
    from kb import render
    from kb.matcher import DEFAULT_MIN_SCORE
    from kb.pacing import BULK_GC_THRESHOLDS

    if as_json:
        fmt = "json"
    index, fetch, related, waited = _open_matching(ctx)
    ONE_SHOT["ends_quickly"] = True  # nothing here needs tearing down at exit
    # A one-shot process: what is loaded by now lives until exit, and a big log makes tens of
    # thousands of short-lived containers: collecting less often (big.log at 150k records:
    # 20 ms in 49 collections -> 8 ms in 28).
    gc.freeze()
    gc.set_threshold(*BULK_GC_THRESHOLDS)
    threshold = DEFAULT_MIN_SCORE if min_score is None else min_score
    log_bytes: bytes | None = None  # kept when the output must quote the log (github)
    if clipboard:
        from kb import terminal

        try:
            log_bytes = terminal.read_clipboard()
        except OSError as exc:
            raise InputError(str(exc), hint="Paste the log into `kb match -` instead.") from exc
        label = "the clipboard"
        report, fetch = _matched(ctx, index, fetch, log_bytes, top, threshold, timeout)
    elif source == "-":
        if sys.stdin.isatty():
            click.echo("Paste the log, then press Ctrl-D.", err=True)
        label = "the pasted text"
        if fmt == "github":
            log_bytes = sys.stdin.buffer.read()
            report, fetch = _matched(ctx, index, fetch, log_bytes, top, threshold, timeout)
        else:
            report, fetch = _matched(ctx, index, fetch, sys.stdin.buffer, top, threshold, timeout)
    else:
        label = source
        try:
            with open(source, "rb") as stream:
                report, fetch = _matched(ctx, index, fetch, stream, top, threshold, timeout, early)
        except OSError as exc:
            raise InputError(f"{source}: cannot read: {exc.strerror}") from exc
    report.stats.update(waited)  # the true time of a first match includes getting the index
    if not (ids_only or brief or fmt == "github"):
        report.add_suggestions(related)  # for the lines no record explains, a few searches
    if not report.stats.get("records"):
        click.echo(
            "The knowledge base is empty: import a dataset first (kb import PATH).", err=True
        )
    wanted = [m.id for m in report.matches]
    limit = None if show_all else render.SHOWN_IN_FULL
    if fmt == "text":  # it names the alternatives' repositories; JSON and markdown list ids
        shown = report.in_log_order()[:limit]
        wanted += [alt for m in shown for alt, _score in m.alternatives]
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
        from kb import markdown

        show_text(markdown.matches_markdown(report, records, label, limit), no_pager)
    else:
        text = render.matches_text(report, records, style_for(color), label, limit)
        show_text(text, no_pager)
    ctx.exit(EXIT_OK if report.matches else EXIT_NOTHING_FOUND)


def _matched(
    ctx: click.Context,
    index: Any,
    fetch: Callable[[list[str]], dict[str, Any]],
    log: Any,
    top: int,
    threshold: float,
    timeout: float = 0,
    early: Any = None,
) -> tuple[Any, Callable[[list[str]], dict[str, Any]]]:
    """The report of `index` on `log`, and the fetcher to use with it. A matcher cache found
    damaged half-way is removed by then: it is built again from the records (the full path;
    not fetched, as the copy in the database may be the damaged one) and the log read again
    (a pipe is kept for that up to kb.matcher.replay.REPLAY_BYTES, else exit 3). `early`: a
    helper scanning the log file (kb.matcher.prescan), whose hits the match may take."""
    from kb.matcher.cache import CacheDamaged
    from kb.matcher.replay import Replayable

    limit = timeout or None  # 0: no limit
    replayable = Replayable.wrap(log)
    try:
        # a one-shot process: a big log file may be matched in two parts at once (a fork)
        report = index.match(
            replayable.stream(),
            top=top,
            min_score=threshold,
            timeout=limit,
            split=True,
            prescan=early,
        )
    except CacheDamaged as exc:
        from kb.render import safe

        click.echo(f"note: {safe(exc.message, multiline=False)}; rebuilding it", err=True)
        kb = open_kb(ctx)
        again = replayable.again(exc)
        report = kb.matcher(rebuild=True).match(again, top=top, min_score=threshold, timeout=limit)
        fetch = kb.get_many
    if report.stats.get("stopped") == "timeout":
        click.echo(
            f"kb match stopped after {timeout:g} s (--timeout), {report.stats['lines']:,} lines "
            "in: the errors found so far are shown. --timeout 0 reads the whole log.",
            err=True,
        )
    return report, fetch


def _early_scan(ctx: click.Context, source: str) -> Any:
    """The helper scanning the log file at `source` for the match to come, when the file is
    big enough to be cut in two (kb.matcher.prescan): the one the `kb` program started from
    its command line, else one started now; None for a smaller file. It is stopped when the
    command ends, whatever the match did with it."""
    from kb.matcher.bigfile import big_enough

    if not big_enough(source):
        return None  # a paste or a short log: nothing more is imported for it
    from kb.matcher import prescan

    database = ctx.obj.get("db")
    helper = prescan.take(database, source) or prescan.start(source, database=database)
    if helper is not None:
        ctx.call_on_close(helper.close)
    return helper


def _open_matching(
    ctx: click.Context,
) -> tuple[
    Any,
    Callable[[list[str]], dict[str, Any]],
    Callable[[str, int], list[dict[str, Any]]],
    dict[str, Any],
]:
    """The matcher index, a record fetcher, the search for unmatched lines' suggestions, and
    the time the index took (`index_ms`; `index_step` when it had to be fetched or built):
    the quick stdlib path when the database allows, else the full path (which checks the
    schema, exit 3 if old, and builds the cache)."""
    import time

    from kb.config import resolve_database_url
    from kb.quick import open_for_matching

    started = time.perf_counter()
    notice = slow_notice()  # fetching or building the index, said on a terminal when slow
    steps: list[str] = []

    def status(line: str) -> None:
        if line.startswith(("Fetching", "Building")):
            steps.append(line.split(" ", 1)[0].lower())
        if notice is not None:
            notice(line)

    opened = open_for_matching(resolve_database_url(ctx.obj.get("db")), status)
    if opened is None:
        kb = open_kb(ctx)
        opened = kb.matcher(status=status), kb.get_many, kb.related
    waited: dict[str, Any] = {"index_ms": round((time.perf_counter() - started) * 1000, 1)}
    if steps:  # the summary's time includes this wait, and says what it was
        waited["index_step"] = steps[-1]
    return (*opened, waited)


@click.command(
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
    from kb.render import SHOWN_IN_FULL, safe
    from kb.run import run as run_command
    from kb.text import clip

    finished = run_command(command, stdout=sys.stdout.buffer, stderr=sys.stderr.buffer)
    shown = clip(safe(shlex.join(command), multiline=False), 80)
    if finished.error is not None:
        click.echo(f"kb run: {finished.error}", err=True)
        ctx.exit(finished.status)
    if finished.status == 0:
        ctx.exit(0)
    index, fetch, _related, _waited = _open_matching(ctx)
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
    # A command that printed thousands of known errors: the first ones with their fixes, the
    # rest counted (kb match --all on its saved output shows every one).
    every = "kb match --all on its saved output shows them"
    briefs = compact.matches_brief(report, records, fixes=True, limit=SHOWN_IN_FULL, every=every)
    click.echo(briefs, nl=False, err=True)
    click.echo("More: kb show ID", err=True)
    ctx.exit(finished.status)
