"""`kb serve`: the flags of the web server (its code, in kb.serve, is imported only to run)."""

from __future__ import annotations

import click

from kb.cli.shared import a_number


@click.command(short_help="Serve a web page and a JSON API to a team.")
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
    callback=lambda _ctx, _param, value: a_number(value),
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
