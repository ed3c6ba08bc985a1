"""Shared fixtures: every test gets its own data dir and database; none touches $HOME."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

FIXTURES = Path(__file__).parent / "fixtures"
SEED = FIXTURES / "seed_record.txt"
RECORDS40 = FIXTURES / "records40.jsonl"


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
def invoke(runner: CliRunner, db_path: Path) -> Any:
    """Run `kb --db <tmp> ARGS...` in-process; returns the click Result."""

    def run(*args: str, input: str | bytes | None = None, db: Path | str | None = None) -> Any:
        from kb.cli import cli

        return runner.invoke(
            cli, ["--db", str(db or db_path), *args], input=input, catch_exceptions=False
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
