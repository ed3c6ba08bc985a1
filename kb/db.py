"""Engines, SQLite pragmas, the schema's life (create at head, check, upgrade), and the
key/value facts stored beside the records (`kb_meta`).

A new empty database is created at the newest schema (`create_all`, then stamped);
an older one must be upgraded with `kb db upgrade`, and every other command refuses it.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

from sqlalchemy import (
    Column,
    Connection,
    Engine,
    MetaData,
    PrimaryKeyConstraint,
    String,
    Table,
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
from sqlalchemy.pool import NullPool

from kb.config import HEAD_REVISION, masked, sqlite_file, sqlite_read_only, sqlite_reader_uri
from kb.errors import DatabaseError, SchemaOutOfDate
from kb.models import META, METADATA, RECORDS

# How long a command waits for another process's write lock before giving up (exit 3).
BUSY_TIMEOUT_MS = 30_000
# How long connecting to a PostgreSQL server may take before kb says it is unreachable: a
# firewalled host otherwise hangs for the system's TCP timeout (two minutes or more).
CONNECT_TIMEOUT_S: Final = 10
# The PostgreSQL advisory lock every schema change holds (any constant; "kb" in ASCII), so two
# `kb db upgrade` (or two first uses of an empty database) run one after the other.
SCHEMA_LOCK: Final = 0x6B62
# A server's pool: connections kept open per worker process (the matcher threads, the revision
# watcher and a request or two at once); beyond these, short-lived extra ones.
# A reader's transaction on PostgreSQL: one snapshot for all its statements (a count and the
# rows it counts, the revision and the records), where READ COMMITTED gives each its own.
READER_ISOLATION: Final = "REPEATABLE READ"
POOL_SIZE: Final = 4
POOL_OVERFLOW: Final = 8

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
    try:
        cursor.execute("PRAGMA journal_mode = WAL")
    except sqlite3.OperationalError as exc:
        if exc.sqlite_errorcode != sqlite3.SQLITE_BUSY:
            raise
        # A first load holds the file under a rollback journal (import_transaction): this
        # connection reads under it, waiting for its lock as any reader would, and the
        # load turns WAL back on when it has committed.
    cursor.execute("PRAGMA synchronous = NORMAL")
    cursor.execute("PRAGMA foreign_keys = ON")
    cursor.close()


@contextlib.contextmanager
def import_transaction(engine: Engine) -> Iterator[Connection]:
    """One import's transaction: committed when the block ends, rolled back when it raises.

    A first load into a SQLite file (its records table empty, no other connection open)
    runs under a rollback journal instead of the WAL, which is turned back on after it.
    In WAL every page the load writes goes into the WAL and is copied into the database
    by the checkpoint after the commit: 286 MB of WAL for 69,652 records, written and read
    again, where the rollback journal of an empty table holds a few pages. The import is
    as atomic either way; what differs is that a reader may wait for the load's lock (once
    its pages spill from the page cache into the file) instead of reading the empty
    knowledge base beside it.

    A first load also runs without SQLite's foreign-key checks, which cost a look-up of the
    parent row for every row written: its tag rows come from the records it stored (one
    INSERT ... SELECT of theirs), its records name its own import run, and it deletes
    nothing, so no cascade is missed. At 150,000 records the tag rows took 0.33-0.37 s
    against 0.49-0.58 with the checks (2026-12-06); the records' own rows took the same
    time either way. The connection has them again before it goes back to the pool."""
    with engine.connect() as conn:
        first_load = _rollback_journal_for_first_load(conn)
        if first_load:
            _sqlite_of(conn).execute("PRAGMA foreign_keys = OFF")
        try:
            with conn.begin():
                yield conn
        finally:
            if first_load:
                raw = _sqlite_of(conn)
                with contextlib.suppress(sqlite3.Error):  # the next connection turns it on
                    raw.execute("PRAGMA journal_mode = WAL")
                try:
                    raw.execute("PRAGMA foreign_keys = ON")
                except sqlite3.Error:
                    conn.invalidate()  # never back to the pool without its checks


def _rollback_journal_for_first_load(conn: Connection) -> bool:
    """Leave WAL for a rollback journal where the records table is empty; True if it did.
    SQLite refuses while another connection has the file open (this stays in WAL then)."""
    if conn.dialect.name != "sqlite":
        return False
    raw = _sqlite_of(conn)
    try:
        # fetchall: a statement left unfinished would hold a read lock on the file
        if raw.execute(f"SELECT 1 FROM {RECORDS.name} LIMIT 1").fetchall():
            return False
        ((mode,),) = raw.execute("PRAGMA journal_mode = DELETE").fetchall()
    except sqlite3.Error:
        return False
    return bool(mode == "delete")


def _sqlite_of(conn: Connection) -> sqlite3.Connection:
    raw = conn.connection.driver_connection
    assert isinstance(raw, sqlite3.Connection)
    return raw


def _on_read_only_connect(dbapi_connection: Any, _record: Any) -> None:
    # As _on_sqlite_connect, without the pragmas that write (page size, WAL).
    dbapi_connection.isolation_level = None
    dbapi_connection.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")


def _on_sqlite_begin(connection: Any) -> None:
    connection.exec_driver_sql("BEGIN")


def _stored_json(value: Any) -> str:
    from kb.jsontext import stored_text  # msgspec: only when a JSON column is written

    return stored_text(value)


def make_engine(url: str, *, pooled: bool = False) -> Engine:
    """An engine for `url`; for SQLite the file's folder is created and WAL is on.

    A command is one short process: it connects when it needs to and closes at once (no pool,
    so a CLI never holds a server connection it does not use). A server (`pooled`) keeps a
    few connections per worker, checked before each use."""
    try:
        parsed = make_url(url)
    except (ArgumentError, ValueError) as exc:
        raise DatabaseError(
            f"not a database URL: {masked(url)} ({masked(str(exc))})",
            hint="Use a path to a SQLite file or a URL such as "
            "postgresql+psycopg://USER:PASSWORD@HOST:5432/DATABASE.",
        ) from None
    is_sqlite = parsed.get_backend_name() == "sqlite"
    if is_sqlite and parsed.database and parsed.database != ":memory:":
        Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
    read_only = read_only_file(url)
    options: dict[str, Any] = {}
    if read_only is not None:  # a shared copy: read as such, or SQLite cannot open it at all
        import sqlite3

        reader_uri = sqlite_reader_uri(read_only)
        options["creator"] = lambda: sqlite3.connect(reader_uri, uri=True, check_same_thread=False)
    if pooled and not is_sqlite:
        options.update(pool_size=POOL_SIZE, max_overflow=POOL_OVERFLOW, pool_pre_ping=True)
    elif not pooled and not (is_sqlite and parsed.database in (None, "", ":memory:")):
        options["poolclass"] = NullPool  # an in-memory SQLite database lives in its connection
    # (a pooled SQLite engine keeps SQLAlchemy's own pool for a file)
    if parsed.get_backend_name() == "postgresql" and "connect_timeout" not in parsed.query:
        options["connect_args"] = {"connect_timeout": CONNECT_TIMEOUT_S}
    if is_sqlite:
        # The JSON columns' text as the importer's fast path writes it (kb.jsontext.stored_text),
        # whatever writes them: an updated record's words stay searchable. (PostgreSQL keeps
        # JSONB, which holds every character as it is whatever text it was given.)
        options["json_serializer"] = _stored_json
    try:
        engine = create_engine(parsed, **options)
    except (NoSuchModuleError, ImportError) as exc:
        raise DatabaseError(
            f"cannot use {describe_url(parsed)}: {masked(str(exc))}",
            hint="For PostgreSQL install kb's postgres extra: pip install 'kb[postgres]'.",
        ) from None
    if is_sqlite:
        on_connect = _on_sqlite_connect if read_only is None else _on_read_only_connect
        event.listen(engine, "connect", on_connect)
        event.listen(engine, "begin", _on_sqlite_begin)
    return engine


def describe_url(url: Any) -> str:
    """A URL as it may be printed: no password, in the user part or in the query."""
    return masked(url.render_as_string(hide_password=True))


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
            hint="Work on a copy you can write, or ask whoever owns it.",
        )


def describe(engine: Engine) -> str:
    return describe_url(engine.url)


def unusable(engine: Engine, exc: DBAPIError, doing: str = "cannot open") -> DatabaseError:
    """The one-line DatabaseError (exit 3) for a driver's failure, with the next step:
    unreachable server, unknown database, wrong credentials, locked file."""
    reason = " ".join(masked(str(exc.orig)).split())
    lowered = reason.lower()
    hint = None
    if "password authentication failed" in lowered or "no password supplied" in lowered:
        hint = "Check the user name and password in the URL (or in ~/.pgpass)."
    elif "does not exist" in lowered and "database" in lowered:
        hint = "Create the database first (createdb NAME), or correct its name in the URL."
    elif any(
        words in lowered
        for words in ("connection refused", "timeout expired", "could not translate", "port")
    ):
        hint = "Is the server running, and are the host and port in the URL right?"
    elif "database is locked" in lowered:
        hint = "Another kb is writing to it; try again when it has finished."
    return DatabaseError(f"{doing} the database {describe(engine)}: {reason}", hint=hint)


@contextlib.contextmanager
def connected(engine: Engine, doing: str = "cannot open") -> Iterator[Connection]:
    """A connection whose reads all see one snapshot of the knowledge base (an import that
    commits meanwhile is seen by none of them or, next time, by all); failing to connect is a
    DatabaseError (exit 3) that says why. SQLite's read transaction is a snapshot already."""
    try:
        conn = engine.connect()
        if conn.dialect.name == "postgresql":
            conn = conn.execution_options(isolation_level=READER_ISOLATION)
    except DBAPIError as exc:
        raise unusable(engine, exc, doing) from None
    with conn:
        yield conn


def current_revision(engine: Engine) -> str | None:
    """The Alembic revision stamped in the database, or None when it has none."""
    with connected(engine) as conn:
        if not inspect(conn).has_table("alembic_version"):
            return None
        row = conn.execute(text("SELECT version_num FROM alembic_version")).first()
    return None if row is None else str(row[0])


def _is_empty(conn: Connection) -> bool:
    return not inspect(conn).get_table_names()


def _lock_schema(conn: Connection) -> None:
    """Hold the schema lock until this transaction ends (PostgreSQL; SQLite's own write lock,
    taken by BEGIN IMMEDIATE, does the same there)."""
    if conn.dialect.name == "postgresql":
        conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": SCHEMA_LOCK})
    elif conn.dialect.name == "sqlite":
        # A deferred transaction that reads, then writes, fails when another wrote in between;
        # taking the write lock first makes the second upgrade wait, then find nothing to do.
        conn.exec_driver_sql("SELECT 1")  # begins the transaction (the "begin" event)
        with contextlib.suppress(DBAPIError):
            conn.exec_driver_sql("COMMIT")
        conn.exec_driver_sql("BEGIN IMMEDIATE")


def _stamped(conn: Connection) -> str | None:
    if not inspect(conn).has_table("alembic_version"):
        return None
    row = conn.execute(text("SELECT version_num FROM alembic_version")).first()
    return None if row is None else str(row[0])


def _alembic_config(engine: Engine) -> Any:
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(migrations_dir()))
    config.set_main_option("sqlalchemy.url", describe(engine).replace("%", "%%"))
    return config


# The table `alembic stamp` keeps the revision in, as Alembic makes it (alembic.ddl.impl,
# version_table_impl): a new database is stamped here, without Alembic. Importing it and
# reading the migration scripts took 0.15-0.2 s of every first command on a new database: a
# one-record `kb import` into a new file 0.65-0.71 s with them, 0.50 without (2026-12-06).
# tests/test_db.py compares this table with the one Alembic's own upgrade makes.
ALEMBIC_VERSION: Final = Table(
    "alembic_version",
    MetaData(),
    Column("version_num", String(32), nullable=False),
    PrimaryKeyConstraint("version_num", name="alembic_version_pkc"),
)


def _create_in(conn: Connection) -> None:
    """Every table of a new database, stamped at HEAD_REVISION (what `alembic stamp head`
    does on a database with no version table)."""
    METADATA.create_all(conn)
    ALEMBIC_VERSION.create(conn)
    conn.execute(insert(ALEMBIC_VERSION).values(version_num=HEAD_REVISION))


def create_at_head(engine: Engine) -> None:
    """Create every table of a new database and stamp it at the newest revision."""
    with engine.begin() as conn:
        _create_in(conn)


def _foreign(engine: Engine) -> DatabaseError:
    return DatabaseError(
        f"{describe(engine)} holds tables but is not a kb database",
        hint="Point --db at a new file or an empty database.",
    )


def _newer(engine: Engine, revision: str) -> DatabaseError:
    return DatabaseError(
        f"the database {describe(engine)} is at schema revision {revision}, which this kb "
        f"does not know: it was made by a newer kb (this one knows up to {HEAD_REVISION})",
        hint="Upgrade kb (pip install -U kb) to use it.",
    )


def ensure_ready(engine: Engine) -> None:
    """Make a usable database of `engine`: create a new one, refuse an old or foreign one."""
    revision = current_revision(engine)
    if revision == HEAD_REVISION:
        return
    if revision is None:
        try:
            with engine.begin() as conn:
                _lock_schema(conn)
                revision = _stamped(conn)  # another process may have created it meanwhile
                if revision is None:
                    if not _is_empty(conn):
                        raise _foreign(engine)
                    _create_in(conn)
                    return
        except DBAPIError as exc:
            raise unusable(engine, exc, "cannot create kb's tables in") from None
        if revision == HEAD_REVISION:
            return
    if revision in known_revisions():
        raise SchemaOutOfDate(
            f"the database {describe(engine)} is at schema revision {revision}, "
            f"this kb needs {HEAD_REVISION}",
            hint="Run `kb db upgrade` to upgrade it.",
        )
    raise _newer(engine, revision)


def known_revisions() -> set[str]:
    """Every revision id in the migration scripts (read only when a database is not at head)."""
    from alembic.script import ScriptDirectory

    scripts = ScriptDirectory(str(migrations_dir()))
    return {script.revision for script in scripts.walk_revisions()}


def upgrade(engine: Engine) -> tuple[str | None, str]:
    """Bring the database to the newest revision; returns (before, after). Safe to run from
    several processes at once: each holds the schema lock, and the later ones find the work
    done. Refuses a database that holds other tables than kb's, or one made by a newer kb."""
    from alembic import command

    refuse_read_only(engine)
    current_revision(engine)  # a clear message when the database cannot be reached at all
    try:
        with engine.begin() as conn:
            _lock_schema(conn)
            before = _stamped(conn)
            if before is None:
                if not _is_empty(conn):
                    raise _foreign(engine)
                _create_in(conn)
                return None, HEAD_REVISION
            if before not in known_revisions():
                raise _newer(engine, before)
            config = _alembic_config(engine)
            config.attributes["connection"] = conn
            command.upgrade(config, "head")
    except DBAPIError as exc:
        raise unusable(engine, exc, "cannot upgrade") from None
    except SQLAlchemyError as exc:
        raise DatabaseError(f"upgrade of {describe(engine)} failed: {masked(str(exc))}") from None
    return before, HEAD_REVISION


def set_meta(conn: Connection, key: str, value: str) -> None:
    table = META
    done = conn.execute(update(table).where(table.c.key == key).values(value=value)).rowcount
    if not done:
        conn.execute(insert(table).values(key=key, value=value))


def get_meta(conn: Connection, key: str) -> str | None:
    table = META
    row = conn.execute(select(table.c.value).where(table.c.key == key)).first()
    return None if row is None else str(row[0])
