"""The schema's life: new databases at head, Alembic and the models agree, old ones refused."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import inspect

from kb import db
from kb.config import HEAD_REVISION, resolve_database_url, to_url
from kb.knowledge import KnowledgeBase
from kb.models import METADATA, not_derived
from tests.conftest import LIST_MODULES_AT_EXIT, RECORDS40, SEED, corpus_records, seed_record


def schema_of(engine: Any) -> dict[str, Any]:
    inspector = inspect(engine)
    out = {}
    for table in sorted(inspector.get_table_names()):
        out[table] = {
            "columns": [
                (c["name"], str(c["type"]), c["nullable"]) for c in inspector.get_columns(table)
            ],
            "pk": inspector.get_pk_constraint(table),
            "fks": sorted(str(fk) for fk in inspector.get_foreign_keys(table)),
            "indexes": sorted(str(ix) for ix in inspector.get_indexes(table)),
        }
    return out


def not_fts(name: str | None, type_: str, parent_names: object) -> bool:
    return not (type_ == "table" and name is not None and name.startswith("records_fts"))


def fts_objects(engine: Any) -> list[tuple[str, str, str]]:
    """The full-text table (and any triggers on it), as SQLite stores their DDL."""
    with engine.connect() as conn:
        rows = conn.exec_driver_sql(
            "SELECT type, name, sql FROM sqlite_master WHERE name LIKE 'records_fts%' "
            "AND sql IS NOT NULL AND (type = 'trigger' OR sql LIKE 'CREATE VIRTUAL%') "
            "ORDER BY name"
        )
        return [tuple(row) for row in rows]


def table_ddl(engine: Any, name: str) -> str:
    """The table's CREATE statement as SQLite stores it: shows WITHOUT ROWID, which the
    inspector does not."""
    with engine.connect() as conn:
        sql = "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?"
        return str(conn.exec_driver_sql(sql, (name,)).scalar())


def test_head_revision_constant_is_the_scripts_head() -> None:
    scripts = ScriptDirectory(str(db.migrations_dir()))
    assert scripts.get_current_head() == HEAD_REVISION


def test_alembic_upgrade_head_and_create_all_make_the_same_schema(tmp_path: Path) -> None:
    created = db.make_engine(to_url(tmp_path / "created.sqlite3"))
    db.create_at_head(created)
    migrated = db.make_engine(to_url(tmp_path / "migrated.sqlite3"))
    with migrated.begin() as conn:
        config = db._alembic_config(migrated)
        config.attributes["connection"] = conn
        command.upgrade(config, "head")
    assert schema_of(created) == schema_of(migrated)
    with migrated.connect() as conn:
        context = MigrationContext.configure(conn, opts={"include_name": not_fts})
        assert compare_metadata(context, METADATA) == []
    assert fts_objects(created) == fts_objects(migrated)
    assert table_ddl(created, "record_tags") == table_ddl(migrated, "record_tags")
    # kb stamps a new database itself (kb.db.ALEMBIC_VERSION): Alembic's own table, and a
    # stamp Alembic reads as its head
    assert table_ddl(created, "alembic_version") == table_ddl(migrated, "alembic_version")
    with created.connect() as conn:
        assert MigrationContext.configure(conn).get_current_heads() == (HEAD_REVISION,)
    assert {name for _type, name, _sql in fts_objects(created)} == {"records_fts"}
    assert db.current_revision(created) == db.current_revision(migrated) == HEAD_REVISION


def test_a_command_on_sqlite_imports_neither_the_orm_nor_the_postgresql_dialect(
    tmp_path: Path,
) -> None:
    """kb.models' tables are Core and JSONB is looked up on PostgreSQL only: the ORM and the
    PostgreSQL dialect (with asyncio's drivers) cost each command 0.1 s to import."""
    modules_file = tmp_path / "modules.json"
    db_file = tmp_path / "kb.sqlite3"
    for args in (["import", "-q", str(SEED)], ["db", "current"]):
        script = [sys.executable, "-c", LIST_MODULES_AT_EXIT, str(modules_file)]
        subprocess.run([*script, "--db", str(db_file), *args], check=True, capture_output=True)
        modules = set(json.loads(modules_file.read_text()))
        assert "kb.models" in modules and "sqlalchemy" in modules  # it did open the database
        unwanted = ("sqlalchemy.orm", "sqlalchemy.dialects.postgresql")
        assert sorted(m for m in modules if m.startswith(unwanted)) == [], args


def test_new_database_is_created_at_head_in_the_user_data_dir(invoke: Any, runner: Any) -> None:
    from kb.cli import cli

    result = runner.invoke(cli, ["import", str(SEED)])
    assert result.exit_code == 0, result.output
    default = Path(resolve_database_url().removeprefix("sqlite:///"))
    assert default.name == "kb.sqlite3" and default.parent.name == "kb" and default.exists()
    assert runner.invoke(cli, ["db", "current"]).stdout.strip() == f"{HEAD_REVISION} (head)"


@pytest.mark.skipif(
    sys.platform.startswith(("win32", "cygwin", "darwin")),
    reason="kb applies the XDG rules itself only where they hold; elsewhere platformdirs does",
)
@pytest.mark.parametrize("home", [None, "", "relative/home", "/somewhere/home", "/"])
@pytest.mark.parametrize("xdg", [None, "", "relative/xdg", "/somewhere/xdg/"])
def test_the_user_folders_are_where_platformdirs_puts_them(
    monkeypatch: pytest.MonkeyPatch, home: str | None, xdg: str | None
) -> None:
    """kb.config reads the XDG rules itself (platformdirs is slow to import on a cold `kb
    match`): the data and cache folders must stay where platformdirs put them before."""
    import platformdirs

    from kb.config import default_database_path, user_cache_root

    for name, value in (("HOME", home), ("XDG_CACHE_HOME", xdg), ("XDG_DATA_HOME", xdg)):
        if value is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, value)
    assert user_cache_root() == Path(platformdirs.user_cache_dir("kb", appauthor=False))
    expected = Path(platformdirs.user_data_dir("kb", appauthor=False)) / "kb.sqlite3"
    assert default_database_path() == expected


def test_database_url_resolution_order(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("KB_DATABASE_URL", str(tmp_path / "env.sqlite3"))
    assert resolve_database_url(str(tmp_path / "opt.sqlite3")).endswith("opt.sqlite3")
    assert resolve_database_url(None).endswith("env.sqlite3")
    monkeypatch.setenv("KB_DATABASE_URL", "postgresql+psycopg://u@h/kb")
    assert resolve_database_url(None) == "postgresql+psycopg://u@h/kb"


def test_a_database_path_with_url_characters_is_the_file_used(tmp_path: Path) -> None:
    """A "?", "#" and "%41" in a --db path are part of the path: the records go into that very
    file (not "/tmp/q " before the "?", nor a folder with "A" for "%41"), and a match reads
    them back from it."""
    import io

    from kb import KnowledgeBase
    from kb.config import sqlite_file
    from tests.conftest import SEED

    folder = tmp_path / "q ?b #c %41"
    folder.mkdir()
    path = folder / "kb.sqlite3"
    assert sqlite_file(resolve_database_url(str(path))) == path
    with KnowledgeBase(str(path)) as kb:
        assert kb.import_sources([str(SEED)]).inserted == 1
        line = b"ValueError: Unknown KV cache group kind 'ful_attention' in backend_per_kind."
        assert [m.id for m in kb.match(io.BytesIO(line)).matches] == ["46a1fcb95e0d367e"]
    assert path.is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["q ?b #c %41"]


def test_database_at_an_older_revision_is_refused_until_upgraded(
    invoke: Any, db_path: Path
) -> None:
    scripts = ScriptDirectory(str(db.migrations_dir()))
    head = scripts.get_revision(HEAD_REVISION)
    assert head is not None
    older = head.down_revision
    engine = db.make_engine(to_url(db_path))
    with engine.begin() as conn:
        config = db._alembic_config(engine)
        config.attributes["connection"] = conn
        command.upgrade(config, str(older) if older else "base")
        if not older:
            # With a single revision, "older" is a database stamped at a revision that was
            # later removed from history: kb must still refuse it.
            conn.exec_driver_sql("INSERT INTO alembic_version VALUES ('ffffffffffff')")
    result = invoke("stats")
    assert result.exit_code == 3
    if older:
        assert f"is at schema revision {older}, this kb needs {HEAD_REVISION}" in result.stderr
        assert "Run `kb db upgrade`" in result.stderr
        assert invoke("db", "upgrade").exit_code == 0
        assert invoke("stats").exit_code == 0
    else:
        assert "which this kb does not know" in result.stderr


def test_tag_rows_survive_a_downgrade_to_text_ids_and_the_upgrade_back(
    invoke: Any, db_path: Path
) -> None:
    """0003 re-keys record_tags by records.key; both directions carry every tag row."""
    assert invoke("import", str(RECORDS40), str(SEED)).exit_code == 0

    def tag_rows(column: str, join: str) -> list[tuple[str, str]]:
        with sqlite3.connect(db_path) as conn:
            rows = conn.execute(
                f"SELECT r.id, t.tag FROM record_tags t JOIN records r ON r.{join} = t.{column}"
            )
            return sorted(rows)

    def table_sql() -> str:
        with sqlite3.connect(db_path) as conn:
            sql = "SELECT sql FROM sqlite_master WHERE name = 'record_tags'"
            return str(conn.execute(sql).fetchone()[0]).strip()

    at_head = tag_rows("record_key", "key")
    expected = sorted(
        (r["id"], tag) for r in [*corpus_records(), seed_record()] for tag in set(r["tags"])
    )
    assert at_head == expected
    assert table_sql().endswith("WITHOUT ROWID")
    engine = db.make_engine(to_url(db_path))
    with engine.begin() as conn:
        config = db._alembic_config(engine)
        config.attributes["connection"] = conn
        command.downgrade(config, "0002")
    assert tag_rows("record_id", "id") == at_head
    assert "WITHOUT ROWID" not in table_sql()
    assert invoke("db", "upgrade").exit_code == 0
    assert tag_rows("record_key", "key") == at_head
    assert table_sql().endswith("WITHOUT ROWID")
    tag = seed_record()["tags"][0]
    found = json.loads(invoke("search", "--tag", tag, "--limit", "100", "--json").stdout)
    assert {r["id"] for r in found["results"]} == {rid for rid, t in at_head if t == tag}


def test_a_database_that_is_not_kb_is_refused_with_exit_3(invoke: Any, db_path: Path) -> None:
    with sqlite3.connect(db_path) as conn:
        conn.execute("CREATE TABLE customers (id INTEGER)")
    result = invoke("stats")
    assert result.exit_code == 3
    assert "holds tables but is not a kb database" in result.stderr


def test_a_file_that_is_not_a_database_exits_3(invoke: Any, db_path: Path) -> None:
    db_path.write_bytes(b"this is not sqlite" * 100)
    result = invoke("stats")
    assert result.exit_code == 3
    assert result.stderr.startswith("Error: cannot")


def test_locked_database_times_out_with_exit_3(
    invoke: Any, db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert invoke("import", str(SEED)).exit_code == 0
    monkeypatch.setattr(db, "BUSY_TIMEOUT_MS", 200)
    holder = sqlite3.connect(db_path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        result = invoke("import", str(SEED))
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert result.exit_code == 3
    assert "database is locked" in result.stderr


def test_db_upgrade_on_a_new_database_creates_it(invoke: Any, db_path: Path) -> None:
    result = invoke("db", "upgrade")
    assert result.exit_code == 0
    assert f"to {HEAD_REVISION}" in result.stderr
    assert invoke("db", "current").stdout.strip() == f"{HEAD_REVISION} (head)"
    assert "Already at the newest" in invoke("db", "upgrade").stderr


def test_sqlite_runs_in_wal_mode(invoke: Any, db_path: Path) -> None:
    invoke("import", str(SEED))
    with sqlite3.connect(db_path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert conn.execute("PRAGMA page_size").fetchone()[0] == db.PAGE_SIZE


def test_an_existing_database_keeps_its_page_size(invoke: Any, db_path: Path) -> None:
    with sqlite3.connect(db_path) as conn:
        conn.execute("PRAGMA page_size = 4096")
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("CREATE TABLE t (x)")  # an existing file, as an older kb made it
        conn.execute("DROP TABLE t")
    assert invoke("import", str(SEED)).exit_code == 0
    with sqlite3.connect(db_path) as conn:
        assert conn.execute("PRAGMA page_size").fetchone()[0] == 4096
        assert conn.execute("SELECT count(*) FROM records").fetchone()[0] == 1


# ----------------------------------------------------------------------------- on both databases


def run_sql(url: str, *statements: str) -> None:
    engine = db.make_engine(to_url(url))
    with engine.begin() as conn:
        for statement in statements:
            conn.exec_driver_sql(statement)
    engine.dispose()


def kb_subprocess(url: str, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "kb", "--db", url, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.mark.databases
def test_db_upgrade_refuses_a_database_that_is_not_kb_and_adds_nothing(
    invoke: Any, empty_db_url: str
) -> None:
    run_sql(empty_db_url, "CREATE TABLE customers (id INTEGER)")
    result = invoke("db", "upgrade", db=empty_db_url)
    assert result.exit_code == 3
    assert "holds tables but is not a kb database" in result.stderr
    engine = db.make_engine(to_url(empty_db_url))
    assert inspect(engine).get_table_names() == ["customers"]
    assert invoke("stats", db=empty_db_url).exit_code == 3


@pytest.mark.databases
@pytest.mark.parametrize(
    "command_line", [["stats"], ["search", "kv"], ["match"], ["db", "upgrade"]]
)
def test_a_database_made_by_a_newer_kb_is_refused_with_exit_3(
    invoke: Any, db_url: str, command_line: list[str]
) -> None:
    assert invoke("import", str(SEED)).exit_code == 0
    run_sql(db_url, "UPDATE alembic_version SET version_num = '0999'")
    result = invoke(*command_line, input="ValueError: boom\n")
    assert result.exit_code == 3, result.output
    assert "at schema revision 0999" in result.stderr
    assert "made by a newer kb" in result.stderr
    assert "Traceback" not in result.output


@pytest.mark.databases
def test_two_upgrades_at_once_both_succeed_one_after_the_other(
    empty_db_url: str, tmp_path: Path
) -> None:
    """An old database upgraded by two processes at the same moment: the schema lock makes
    the second wait and find nothing left to do."""
    engine = db.make_engine(to_url(empty_db_url))
    with engine.begin() as conn:
        config = db._alembic_config(engine)
        config.attributes["connection"] = conn
        command.upgrade(config, "0001")
    engine.dispose()
    runs = [kb_subprocess(empty_db_url, "db", "upgrade") for _ in range(2)]
    outputs = [run.communicate(timeout=120) for run in runs]
    assert [run.returncode for run in runs] == [0, 0], outputs
    messages = sorted(err.strip() for _out, err in outputs)
    assert messages == [
        f"Already at the newest schema revision {HEAD_REVISION}.",
        f"Upgraded from 0001 to {HEAD_REVISION}.",
    ]
    assert db.current_revision(db.make_engine(to_url(empty_db_url))) == HEAD_REVISION


@pytest.mark.databases
def test_two_first_uses_of_an_empty_database_at_once_both_succeed(empty_db_url: str) -> None:
    runs = [kb_subprocess(empty_db_url, "import", str(SEED)) for _ in range(2)]
    outputs = [run.communicate(timeout=120) for run in runs]
    assert [run.returncode for run in runs] == [0, 0], outputs
    with KnowledgeBase(empty_db_url) as kb:
        assert kb.count() == 1


def test_upgrade_head_and_create_all_make_the_same_schema_on_postgresql(pg_server: Any) -> None:
    """On PostgreSQL too: the same tables, types (JSONB), indexes, and the same generated
    tsvector column with its GIN index, whichever way the database was made."""
    created_url = pg_server.create_database("kb_schema_created")
    migrated_url = pg_server.create_database("kb_schema_migrated")
    try:
        created = db.make_engine(created_url)
        db.create_at_head(created)
        migrated = db.make_engine(migrated_url)
        with migrated.begin() as conn:
            config = db._alembic_config(migrated)
            config.attributes["connection"] = conn
            command.upgrade(config, "head")
        assert schema_of(created) == schema_of(migrated)
        with migrated.connect() as conn:
            context = MigrationContext.configure(conn, opts={"include_name": not_derived})
            assert compare_metadata(context, METADATA) == []

        def derived(engine: Any) -> list[tuple[Any, ...]]:
            with engine.connect() as conn:
                rows = conn.exec_driver_sql(
                    "SELECT a.attname, format_type(a.atttypid, a.atttypmod), "
                    "pg_get_expr(d.adbin, d.adrelid) FROM pg_attribute a "
                    "LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum "
                    "WHERE a.attrelid = 'records'::regclass AND a.attnum > 0 "
                    "AND NOT a.attisdropped ORDER BY a.attname"
                )
                columns = [tuple(row) for row in rows]
                indexes = conn.exec_driver_sql(
                    "SELECT indexdef FROM pg_indexes WHERE tablename = 'records' ORDER BY 1"
                )
                return columns + [tuple(row) for row in indexes]

        assert derived(created) == derived(migrated)
        found = {row[0]: row[1] for row in derived(created) if len(row) == 3}
        assert found["search_vector"] == "tsvector" and found["tags"] == "jsonb"
        assert any("USING gin (search_vector)" in row[0] for row in derived(created))
        assert db.current_revision(created) == db.current_revision(migrated) == HEAD_REVISION
        created.dispose()
        migrated.dispose()
    finally:
        pg_server.drop_database("kb_schema_created")
        pg_server.drop_database("kb_schema_migrated")


@pytest.mark.parametrize("own", [True, False], ids=["own", "hashlib"])
def test_the_cache_folders_digest_is_sha256_with_or_without_the_interpreters_own(
    monkeypatch: pytest.MonkeyPatch, own: bool
) -> None:
    """kb.config digests a database's URL with the interpreter's own SHA-256 (no OpenSSL on a
    cold match), or hashlib's where it has none: the same folder either way."""
    import hashlib

    from kb import config

    if not own:
        monkeypatch.setattr(config, "_OWN_SHA256", ("kb_no_such_module",))
    for data in (b"", b"sqlite:///tmp/kb.sqlite3", "é☃".encode() * 1000):
        assert config._sha256_hex(data) == hashlib.sha256(data).hexdigest()
    url = "postgresql://kb:secret@db.example/kb"
    expected = hashlib.sha256(config.masked(url, mask="").encode()).hexdigest()[:16]
    assert config.cache_dir_for(url).name == expected
