"""Shared fixtures: every test gets its own data dir and database; none touches $HOME.

The database-facing tests (modules or tests marked `databases`) run once on SQLite and once
on PostgreSQL: a throw-away cluster (tests/pg_server.py) started for the session on first
use, and a fresh database per test, copied from a template that has kb's schema. Without
PostgreSQL installed they skip and say why; in CI (`CI` set) that is a failure.
"""

from __future__ import annotations

import gzip
import inspect
import itertools
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

DATABASES = ("sqlite", "postgresql")
PG_TEMPLATE = "kb_template"
_database_numbers = itertools.count(1)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "databases: run on SQLite and on PostgreSQL (the tests that take the `db_url` or "
        "`invoke` fixture and not the SQLite file itself, `db_path`)",
    )


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """`databases` tests get a `database` parameter: both, unless the test itself asks for
    the SQLite file (`db_path`), which only SQLite has."""
    if "database" not in metafunc.fixturenames:
        return
    own = inspect.signature(metafunc.function).parameters
    both = metafunc.definition.get_closest_marker("databases") is not None
    names = DATABASES if both and "db_path" not in own else DATABASES[:1]
    metafunc.parametrize("database", names, indirect=True, ids=list(names))


@pytest.fixture
def database(request: pytest.FixtureRequest) -> str:
    return str(getattr(request, "param", "sqlite"))


@pytest.fixture(scope="session")
def pg_server() -> Iterator[Any]:
    """The session's PostgreSQL cluster, with a template database at kb's newest schema."""
    from tests import pg_server as pg

    try:
        server = pg.start()
    except pg.Unavailable as exc:
        if os.environ.get("CI"):
            pytest.fail(f"CI needs PostgreSQL for the database tests: {exc}")
        pytest.skip(f"no PostgreSQL server for these tests: {exc}")
    try:
        from kb.knowledge import KnowledgeBase

        url = server.create_database(PG_TEMPLATE)
        KnowledgeBase(url).close()  # the schema, created once and copied for every test
        yield server
    finally:
        server.stop()


@pytest.fixture
def pg_url(pg_server: Any) -> Iterator[str]:
    """A new, empty kb database on the session's server (dropped afterwards)."""
    name = f"kb_test_{os.getpid()}_{next(_database_numbers)}"
    url = pg_server.create_database(name, template=PG_TEMPLATE)
    yield url
    pg_server.drop_database(name)


@pytest.fixture
def empty_db_url(database: str, request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A database with no tables at all: a new SQLite path, or a new PostgreSQL database
    (not copied from the template)."""
    if database != "postgresql":
        yield str(tmp_path / "empty.sqlite3")
        return
    server = request.getfixturevalue("pg_server")
    name = f"kb_empty_{os.getpid()}_{next(_database_numbers)}"
    yield server.create_database(name)
    server.drop_database(name)


@pytest.fixture
def db_url(database: str, request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The test's database: a SQLite file (as a path), or a PostgreSQL URL."""
    if database == "postgresql":
        return str(request.getfixturevalue("pg_url"))
    return str(tmp_path / "kb.sqlite3")


FIXTURES = Path(__file__).parent / "fixtures"
SEED = FIXTURES / "seed_record.txt"
RECORDS40 = FIXTURES / "records40.jsonl"

# Runs the CLI as `kb ARGS...` and writes the names of every module it imported to a file
# (`python -c LIST_MODULES_AT_EXIT FILE ARGS...`).
LIST_MODULES_AT_EXIT = (
    "import atexit, json, sys\n"
    "out = sys.argv[1]\n"
    "atexit.register(lambda: open(out, 'w').write(json.dumps(sorted(sys.modules))))\n"
    "sys.argv = ['kb', *sys.argv[2:]]\n"
    "from kb.cli import main\n"
    "main()\n"
)

# Runs the CLI as `kb ARGS...`; an atexit handler says it ran and leaves an object that says
# so when the interpreter's finalization frees it (made then, so no earlier gc.freeze() keeps
# it: the finalization frees it with the sys module's attributes).
NOTES_ITS_END = (
    "import atexit, os, sys\n"
    "class Late:\n"
    "    def __del__(self, write=os.write):\n"
    "        write(2, b'finalized\\n')\n"
    "def last():\n"
    "    sys.stderr.write('atexit ran\\n')\n"
    "    sys.kb_late = Late()\n"
    "atexit.register(last)\n"
    "sys.argv = ['kb', *sys.argv[1:]]\n"
    "from kb.cli import program\n"
    "program()\n"
)


def kb_noting_its_end(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """`kb ARGS...` in a process of its own that says on stderr when its atexit handlers ran
    and when the interpreter's finalization freed its objects (NOTES_ITS_END)."""
    return subprocess.run(
        [sys.executable, "-c", NOTES_ITS_END, *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.fixture(autouse=True)
def _isolated_user_dirs(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("XDG_DATA_HOME", str(home / "data"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(home / "cache"))
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("KB_DATABASE_URL", raising=False)
    monkeypatch.setenv("NO_COLOR", "1")


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "kb.sqlite3"


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


@pytest.fixture
def invoke(runner: CliRunner, db_url: str) -> Any:
    """Run `kb --db <the test's database> ARGS...` in-process; returns the click Result."""

    def run(*args: str, input: str | bytes | None = None, db: Path | str | None = None) -> Any:
        from kb.cli import cli

        return runner.invoke(
            cli, ["--db", str(db or db_url), *args], input=input, catch_exceptions=False
        )

    return run


def seed_record() -> dict[str, Any]:
    return json.loads(SEED.read_text())["record"]


def corpus_records(n: int | None = None) -> list[dict[str, Any]]:
    lines = RECORDS40.read_text().splitlines()
    return [json.loads(line)["record"] for line in lines[:n]]


@pytest.fixture
def records() -> Iterator[list[dict[str, Any]]]:
    yield corpus_records()


@pytest.fixture
def http_mirror() -> Iterator[Any]:
    """Serve folders over HTTP on loopback, the way the published dataset is fetched."""
    import functools
    import threading
    from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

    servers: list[ThreadingHTTPServer] = []

    class QuietHandler(SimpleHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

    def serve(folder: Path) -> str:
        handler = functools.partial(QuietHandler, directory=str(folder))
        server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}"

    yield serve
    for server in servers:
        server.shutdown()
        server.server_close()


def corpus_dir() -> Path | None:
    """The shared corpus folder (KB_CORPUS, else ../shared/corpus), or None when absent."""
    for candidate in (
        Path(os.environ.get("KB_CORPUS", "")),
        Path(__file__).resolve().parents[2] / "shared" / "corpus",
        Path("/work/shared/corpus"),
    ):
        if (candidate / "records.jsonl.gz").is_file():
            return candidate
    return None


@pytest.fixture(scope="session")
def full_corpus_index(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The matcher index of the whole shared corpus, built once per test session (~20 s) and
    shared by every test that needs it; skipped when the corpus is not there."""
    corpus = corpus_dir()
    if corpus is None:
        pytest.skip("the shared corpus is not available")
    from kb.matcher import build_index, sources_from_records

    def records() -> Iterator[dict[str, Any]]:
        with gzip.open(corpus / "records.jsonl.gz", "rt", encoding="utf-8") as fh:
            for line in fh:
                yield json.loads(line)["record"]

    cache = tmp_path_factory.mktemp("corpus-cache")
    return build_index(sources_from_records(records()), cache, "corpus")
