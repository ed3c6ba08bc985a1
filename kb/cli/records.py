"""`kb search`, `kb show`, `kb stats` and `kb export`: the stored records read back."""

from __future__ import annotations

import sys

import click

from kb.cli.shared import completer, format_option, open_kb, show_text, style_for, terminal_options
from kb.errors import EXIT_NOTHING_FOUND, EXIT_OK


@click.command(short_help="Look records up by words, id, slug, code.")
@click.argument("words", nargs=-1, metavar="[QUERY]")
@click.option(
    "--repo",
    help="Only this repository: owner/name, or its short name (any case).",
    shell_complete=completer("repo"),
)
@click.option(
    "--tag", help="Only records with this tag (any case).", shell_complete=completer("tag")
)
@click.option(
    "--error-class",
    help="Only this exception class (any case), e.g. ValueError or a qualified name.",
    shell_complete=completer("error_class"),
)
@click.option("--code", help="Only this error code.")
@click.option(
    "--type",
    "error_type",
    type=click.Choice(
        ["exception", "error_code", "console", "http", "validation", "panic"], case_sensitive=False
    ),
    help="Only this error type.",
)
@click.option(
    "--severity",
    type=click.Choice(["critical", "error", "warning", "info"], case_sensitive=False),
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
    (torch.cuda, vllm/config/attention.py), qualified class names and "quoted phrases" all
    work; a record whose message holds the query whole comes first. Filters ignore case and
    work with or without a query. Misspelt words and identifiers are corrected ("did you
    mean"). Exit 1 when nothing is found.

    \b
    Example:
      kb search unknown kv cache group kind
      kb search --repo pandas --error-class keyerror "not in index"
      kb search django.core.exceptions.ImproperlyConfigured
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
        from kb import markdown

        show_text(markdown.search_markdown(response), no_pager)
    else:
        show_text(render.search_text(response, style_for(color)), no_pager)
    ctx.exit(EXIT_OK if response.results else EXIT_NOTHING_FOUND)


@click.command(short_help="Show one record whole.")
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
        from kb import markdown

        show_text(markdown.record_markdown(record, repository=repository), no_pager)
    else:
        show_text(render.record_text(record, style_for(color), repository), no_pager)


@click.command(short_help="Totals by repository, type, severity; imports.")
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


@click.command(short_help="Write records as JSONL (import reads it back).")
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
