"""`kb serve`: one knowledge base for a team, as a web page and a JSON API.

`run()` checks the settings and the database, builds the matcher index once (so workers only
load it), then hands over to uvicorn. The web stack (Starlette, uvicorn, Jinja2) is the `serve`
extra and is imported only here and below, never by the rest of kb.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from kb.errors import DatabaseError, KbError
from kb.serve.config import ENV_CONFIG, ServeConfig, ServeError


def _require_extra() -> None:
    try:
        import jinja2  # noqa: F401
        import starlette  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError as exc:
        raise ServeError(
            f"kb serve needs the web server packages ({exc.name} is missing)",
            hint="Install them with: pip install 'kb[serve]'",
        ) from None


def _check_database(url: str) -> int:
    """The number of records, after making sure the matcher cache is current. Refuses a
    SQLite file that does not exist rather than serving a new empty one."""
    from sqlalchemy.engine import make_url

    from kb.knowledge import KnowledgeBase

    parsed = make_url(url)
    database = parsed.database
    is_file = parsed.get_backend_name() == "sqlite" and database not in (None, "", ":memory:")
    if is_file and not Path(str(database)).is_file():
        raise DatabaseError(
            f"there is no knowledge base at {database}",
            hint="Import a dataset first: kb --db PATH import data/",
        )
    with KnowledgeBase(url) as kb:
        if kb.cached_matcher() is None:
            print("Building the matcher index...", file=sys.stderr)
            kb.build_matcher()
        return kb.count()


def run(config: ServeConfig) -> None:
    """Serve until interrupted. KbError (exit 2 or 3) when it cannot start."""
    config.check()
    _require_extra()
    records = _check_database(config.db_url)
    host = f"[{config.host}]" if ":" in config.host else config.host
    print(
        f"kb serve: {records:,} records on http://{host}:{config.port}/ "
        f"({config.workers} worker{'s' * (config.workers != 1)}"
        + (", token required" if config.token else "")
        + (", imports allowed" if config.allow_import else "")
        + ")",
        file=sys.stderr,
    )
    if not records:
        print("The knowledge base is empty: import a dataset (kb import PATH).", file=sys.stderr)
    os.environ[ENV_CONFIG] = config.to_environment()
    from kb.serve.server import serve_forever

    if not serve_forever(config):
        raise ServeError(f"kb serve could not start on {host}:{config.port} (see above)")


__all__ = ["KbError", "ServeConfig", "run"]
