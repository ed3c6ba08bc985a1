"""Engines, SQLite pragmas, the schema's life (create at head, check, upgrade), and the
key/value facts stored beside the records (`kb_meta`).

A new empty database is created at the newest schema (`create_all`, then stamped);
an older one must be upgraded with `kb db upgrade`, and every other command refuses it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy import (
    Connection,
    Engine,
    create_engine,
    event,
    insert,
    inspect,
    select,
    text,
    update,
)
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, DBAPIError, NoSuchModuleError, SQLAlchemyError

from kb.config import HEAD_REVISION, sqlite_file, sqlite_read_only, sqlite_reader_uri
from kb.errors import DatabaseError, SchemaOutOfDate
from kb.models import META, Base

# How long a command waits for another process's write lock before giving up (exit 3).
BUSY_TIMEOUT_MS = 30_000

PAGE_SIZE = 16384  # bytes, for new SQLite files

PACKAGE_DIR = Path(__file__).resolve().parent


def migrations_dir() -> Path:
    """Where the Alembic scripts are: inside the wheel, or at the top of a source checkout."""
    for candidate in (PACKAGE_DIR / "_migrations", PACKAGE_DIR.parent / "migrations"):
        if (candidate / "env.py").is_file():
            return candidate
    raise DatabaseError("kb's migration scripts are missing from this installation")


def _on_sqlite_connect(dbapi_connection: Any, _record: Any) -> None:
    # Let SQLAlchemy's "begin" event issue BEGIN itself, so a transaction spans everything.
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    cursor.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    # Only a new, empty file takes this (before WAL is on): a record is ~4.5 KB, which on 4 KB
    # pages spills to an overflow page each; 16 KB pages hold three whole records. A 150k
    # import measured 31 s at 4 KB, 26 s at 8 KB, 23 s at 16 KB; the file 25% smaller.
    cursor.execute(f"PRAGMA page_size = {PAGE_SIZE}")
    cursor.execute("PRAGMA journal_mode = WAL")
    cursor.execute("PRAGMA synchronous = NORMAL")
    cursor.execute("PRAGMA foreign_keys = ON")
    cursor.close()


def _on_read_only_connect(dbapi_connection: Any, _record: Any) -> None:
    # As _on_sqlite_connect, without the pragmas that write (page size, WAL).
    dbapi_connection.isolation_level = None
    dbapi_connection.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")


def _on_sqlite_begin(connection: Any) -> None:
    connection.exec_driver_sql("BEGIN")


def make_engine(url: str) -> Engine:
    """An engine for `url`; for SQLite the file's folder is created and WAL is on."""
    try:
        parsed = make_url(url)
    except ArgumentError as exc:
        raise DatabaseError(f"not a database URL: {url}") from exc
    is_sqlite = parsed.get_backend_name() == "sqlite"
    if is_sqlite and parsed.database and parsed.database != ":memory:":
        Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
    read_only = read_only_file(url)
    options: dict[str, Any] = {}
    if read_only is not None:  # a shared copy: read as such, or SQLite cannot open it at all
        import sqlite3

        reader_uri = sqlite_reader_uri(read_only)
        options["creator"] = lambda: sqlite3.connect(reader_uri, uri=True, check_same_thread=False)
    try:
        engine = create_engine(parsed, future=True, **options)
    except (NoSuchModuleError, ImportError) as exc:
        raise DatabaseError(
            f"cannot use {parsed.render_as_string(hide_password=True)}: {exc}",
            hint="For PostgreSQL install kb[postgres].",
        ) from exc
    if is_sqlite:
        on_connect = _on_sqlite_connect if read_only is None else _on_read_only_connect
        event.listen(engine, "connect", on_connect)
        event.listen(engine, "begin", _on_sqlite_begin)
    return engine


def read_only_file(url: str) -> Path | None:
    """The SQLite file at `url` if kb may only read it (it or its folder is not writable)."""
    path = sqlite_file(url)
    return path if path is not None and sqlite_read_only(path) else None


def refuse_read_only(engine: Engine) -> None:
    """DatabaseError (exit 3) for a database kb may only read, before a command writes."""
    path = read_only_file(describe(engine))
    if path is not None:
        raise DatabaseError(
            f"the database {path} is read-only (the file or its folder cannot be written)",
            hint="Import into a copy you can write, or ask whoever owns it.",
        )


def describe(engine: Engine) -> str:
    return engine.url.render_as_string(hide_password=True)


def current_revision(engine: Engine) -> str | None:
    """The Alembic revision stamped in the database, or None when it has none."""
    try:
        with engine.connect() as conn:
            if not inspect(conn).has_table("alembic_version"):
                return None
            row = conn.execute(text("SELECT version_num FROM alembic_version")).first()
    except DBAPIError as exc:
        raise DatabaseError(f"cannot open the database {describe(engine)}: {exc.orig}") from exc
    return None if row is None else str(row[0])


def _is_empty(engine: Engine) -> bool:
    with engine.connect() as conn:
        return not inspect(conn).get_table_names()


def _alembic_config(engine: Engine) -> Any:
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(migrations_dir()))
    config.set_main_option("sqlalchemy.url", describe(engine).replace("%", "%%"))
    return config


def create_at_head(engine: Engine) -> None:
    """Create every table of a new database and stamp it at the newest revision."""
    from alembic import command

    with engine.begin() as conn:
        Base.metadata.create_all(conn)
        config = _alembic_config(engine)
        config.attributes["connection"] = conn
        command.stamp(config, "head")


def ensure_ready(engine: Engine) -> None:
    """Make a usable database of `engine`: create a new one, refuse an old or foreign one."""
    try:
        revision = current_revision(engine)
        if revision == HEAD_REVISION:
            return
        if revision is None:
            if not _is_empty(engine):
                raise DatabaseError(
                    f"{describe(engine)} holds tables but is not a kb database",
                    hint="Point --db at a new file or an empty database.",
                )
            create_at_head(engine)
            return
    except DBAPIError as exc:
        raise DatabaseError(f"cannot use the database {describe(engine)}: {exc.orig}") from exc
    if revision in known_revisions():
        raise SchemaOutOfDate(
            f"the database {describe(engine)} is at schema revision {revision}, "
            f"this kb needs {HEAD_REVISION}",
            hint="Run `kb db upgrade` to upgrade it.",
        )
    raise DatabaseError(
        f"the database {describe(engine)} is at schema revision {revision}, "
        "which this kb does not know (made by a newer kb?)",
        hint="Upgrade kb.",
    )


def known_revisions() -> set[str]:
    """Every revision id in the migration scripts (read only when a database is not at head)."""
    from alembic.script import ScriptDirectory

    scripts = ScriptDirectory(str(migrations_dir()))
    return {script.revision for script in scripts.walk_revisions()}


def upgrade(engine: Engine) -> tuple[str | None, str]:
    """Bring the database to the newest revision; returns (before, after)."""
    from alembic import command

    refuse_read_only(engine)
    before = current_revision(engine)
    if before is None and _is_empty(engine):
        create_at_head(engine)
        return None, HEAD_REVISION
    try:
        with engine.begin() as conn:
            config = _alembic_config(engine)
            config.attributes["connection"] = conn
            command.upgrade(config, "head")
    except SQLAlchemyError as exc:
        raise DatabaseError(f"upgrade of {describe(engine)} failed: {exc}") from exc
    return before, current_revision(engine) or HEAD_REVISION


def set_meta(conn: Connection, key: str, value: str) -> None:
    table = META
    done = conn.execute(update(table).where(table.c.key == key).values(value=value)).rowcount
    if not done:
        conn.execute(insert(table).values(key=key, value=value))


def get_meta(conn: Connection, key: str) -> str | None:
    table = META
    row = conn.execute(select(table.c.value).where(table.c.key == key)).first()
    return None if row is None else str(row[0])
