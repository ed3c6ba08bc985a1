"""A first load into an empty SQLite knowledge base runs under a rollback journal, so its pages
are written once and not again by a checkpoint (kb.db.import_transaction); every other import
stays in WAL, and the file is in WAL again when the load ends."""

from __future__ import annotations

import contextlib
import json
import re
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from kb.knowledge import KnowledgeBase
from tests.conftest import corpus_records

ROLLBACK, WAL = (1, 1), (2, 2)  # the file format's read/write versions (header bytes 18-19)


def journal_of(db_path: Path) -> tuple[int, int]:
    """The journal the file is under now, as its header says (what a new connection obeys)."""
    with db_path.open("rb") as handle:
        header = handle.read(20)
    return header[18], header[19]


def write_records(path: Path, count: int, first: int = 0) -> Path:
    """`count` records of the corpus fixture under new ids: enough bytes that reading them
    reports progress many times."""
    template = corpus_records()
    with path.open("w", encoding="utf-8") as out:
        for i in range(first, first + count):
            record = dict(template[i % len(template)], id=format(i + 1, "016x"))
            out.write(json.dumps(record) + "\n")
    return path


def imported_under(db_path: Path, source: Path) -> set[tuple[int, int]]:
    """Import `source` and say which journals the file was under while the import read it."""
    seen: set[tuple[int, int]] = set()
    with KnowledgeBase(str(db_path)) as kb:
        report = kb.import_sources([str(source)], progress=lambda _n: seen.add(journal_of(db_path)))
    assert report.rejected == 0 and report.inserted
    return seen


def journal_mode(db_path: Path) -> str:
    with contextlib.closing(sqlite3.connect(db_path)) as conn:
        return str(conn.execute("PRAGMA journal_mode").fetchone()[0])


@pytest.fixture
def empty_db(tmp_path: Path) -> Path:
    db_path = tmp_path / "kb.sqlite3"
    with KnowledgeBase(str(db_path)):
        pass
    assert journal_of(db_path) == WAL
    return db_path


def test_a_first_load_runs_under_a_rollback_journal_and_leaves_wal_on(
    empty_db: Path, tmp_path: Path
) -> None:
    seen = imported_under(empty_db, write_records(tmp_path / "in.jsonl", 400))
    assert seen == {ROLLBACK}
    assert journal_mode(empty_db) == "wal"
    assert not Path(f"{empty_db}-journal").exists()
    with KnowledgeBase(str(empty_db)) as kb:
        assert kb.count() == 400
        # the full-text index was filled under it too
        word = max(re.findall(r"[A-Za-z]+", corpus_records(1)[0]["errorMessage"]), key=len)
        assert kb.search(word).total > 0


def test_an_import_into_records_stays_in_wal(empty_db: Path, tmp_path: Path) -> None:
    imported_under(empty_db, write_records(tmp_path / "first.jsonl", 10))
    seen = imported_under(empty_db, write_records(tmp_path / "more.jsonl", 400, first=10))
    assert seen == {WAL}
    with KnowledgeBase(str(empty_db)) as kb:
        assert kb.count() == 410


def test_a_first_load_beside_an_open_connection_stays_in_wal(
    empty_db: Path, tmp_path: Path
) -> None:
    """SQLite cannot leave WAL while another connection has the file open: the load goes on
    in WAL, as before, and that connection reads on."""
    with contextlib.closing(sqlite3.connect(empty_db)) as other:
        other.execute("SELECT count(*) FROM records").fetchone()
        seen = imported_under(empty_db, write_records(tmp_path / "in.jsonl", 400))
        assert seen == {WAL}
        assert other.execute("SELECT count(*) FROM records").fetchone()[0] == 400


def test_a_first_load_that_fails_leaves_the_file_empty_and_in_wal(
    empty_db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kb.ingest import writers

    def broken(*_args: Any, **_kwargs: Any) -> None:
        raise sqlite3.OperationalError("disk I/O error")

    monkeypatch.setattr(writers.SqliteWriter, "finish", broken)
    with pytest.raises(Exception, match="disk I/O error"), KnowledgeBase(str(empty_db)) as kb:
        kb.import_sources([str(write_records(tmp_path / "in.jsonl", 400))])
    assert journal_mode(empty_db) == "wal"
    with KnowledgeBase(str(empty_db)) as kb:
        assert kb.count() == 0


def test_a_reader_opens_the_file_while_a_first_load_holds_it(empty_db: Path) -> None:
    """A kb connection turns WAL on as it opens; under a first load's rollback journal SQLite
    refuses that at once ("database is locked"), and the reader reads under the journal
    instead (the committed state: no records yet)."""
    loader = sqlite3.connect(empty_db, isolation_level=None)
    try:
        assert loader.execute("PRAGMA journal_mode = DELETE").fetchone()[0] == "delete"
        loader.execute("BEGIN IMMEDIATE")
        loader.execute("INSERT INTO kb_meta (key, value) VALUES ('loading', 'yes')")
        with KnowledgeBase(str(empty_db)) as reader:
            assert reader.count() == 0
        loader.execute("ROLLBACK")
    finally:
        loader.close()


def foreign_keys_while_finishing(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Make every import say, as its writer finishes, whether its connection checks foreign
    keys (1) or not (0)."""
    from kb.ingest import writers

    seen: list[int] = []
    finish = writers.SqliteWriter.finish

    def spying(self: Any, wrote: bool) -> None:
        seen.append(self.conn.exec_driver_sql("PRAGMA foreign_keys").scalar_one())
        finish(self, wrote)

    monkeypatch.setattr(writers.SqliteWriter, "finish", spying)
    return seen


def test_only_a_first_load_runs_without_foreign_key_checks_and_its_rows_hold_to_them(
    empty_db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = foreign_keys_while_finishing(monkeypatch)
    imported_under(empty_db, write_records(tmp_path / "first.jsonl", 300))
    imported_under(empty_db, write_records(tmp_path / "more.jsonl", 50, first=300))
    assert seen == [0, 1]
    with contextlib.closing(sqlite3.connect(empty_db)) as conn:
        assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
        assert conn.execute("SELECT count(DISTINCT record_key) FROM record_tags").fetchone() == (
            350,
        )


def test_a_pooled_connection_checks_foreign_keys_again_after_a_first_load(
    empty_db: Path, tmp_path: Path
) -> None:
    """A server's engine keeps its connections: the one a first load used goes back to the
    pool with its checks on, so deleting a record still takes its tag rows with it."""
    from kb.db import import_transaction, make_engine

    engine = make_engine(f"sqlite:///{empty_db}", pooled=True)
    try:
        with import_transaction(engine) as conn:
            assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar_one() == 0
            used = conn.connection.driver_connection
        with engine.connect() as conn:
            assert conn.connection.driver_connection is used  # the same connection, pooled
            assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar_one() == 1
    finally:
        engine.dispose()
