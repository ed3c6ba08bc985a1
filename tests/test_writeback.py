"""kb.writeback: an import's SQLite file synced while the import goes on."""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine

from kb import writeback
from kb.knowledge import KnowledgeBase
from tests.conftest import RECORDS40


@pytest.fixture
def synced(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The files kb.writeback syncs, by name, every 10 ms."""
    names: list[str] = []

    def sync(fd: int) -> None:
        # A first load deletes the WAL (kb.db); one deleted between the thread's look and
        # its sync is named "<path> (deleted)", the same file as far as these tests go.
        names.append(os.readlink(f"/proc/self/fd/{fd}").removesuffix(" (deleted)"))

    if not Path("/proc/self/fd").is_dir():
        pytest.skip("needs /proc to name a file descriptor")
    monkeypatch.setattr(writeback, "_SYNC", sync)
    monkeypatch.setattr(writeback, "WRITEBACK_SECONDS", 0.01)
    return names


def test_an_import_syncs_its_file_while_it_runs_and_stops_with_it(
    tmp_path: Path, synced: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "kb.sqlite3"
    written_back = writeback.written_back

    @contextlib.contextmanager
    def slow(engine: Any) -> Iterator[None]:  # 40 records take less than the interval
        with written_back(engine):
            time.sleep(0.1)
            yield

    monkeypatch.setattr("kb.ingest.written_back", slow)
    with KnowledgeBase(str(db)) as kb:
        assert kb.import_sources([str(RECORDS40)]).inserted == 40
    assert synced and set(synced) <= {str(db.resolve()), str(db.resolve()) + "-wal"}
    assert str(db.resolve()) in synced
    count = len(synced)
    time.sleep(0.05)
    assert len(synced) == count, "the thread went on syncing after the import"
    assert not [t for t in threading.enumerate() if t.name == "kb-writeback"]


def test_the_thread_ends_at_the_first_file_system_that_cannot_sync(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[int] = []

    def refuse(fd: int) -> None:
        calls.append(fd)
        raise OSError("not here")

    monkeypatch.setattr(writeback, "_SYNC", refuse)
    monkeypatch.setattr(writeback, "WRITEBACK_SECONDS", 0.01)
    db = tmp_path / "kb.sqlite3"
    db.write_bytes(b"")
    with writeback.written_back(create_engine(f"sqlite:///{db}")):
        time.sleep(0.1)
    assert calls and len(set(calls)) == 1 and len(calls) == 1  # once, then given up


@pytest.mark.parametrize(
    "url", ["sqlite://", "sqlite:///:memory:", "sqlite:///file:kb.sqlite3?uri=true"]
)
def test_nothing_is_synced_for_a_database_without_a_file_of_its_own(
    url: str, synced: list[str]
) -> None:
    assert writeback.database_files(create_engine(url)) == []
    with writeback.written_back(create_engine(url)):
        time.sleep(0.05)
    assert synced == []
    assert not [t for t in threading.enumerate() if t.name == "kb-writeback"]


def test_a_file_deleted_and_made_again_is_synced_anew(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A first load deletes the WAL and makes a new one after it (kb.db): the thread syncs the
    # file at the path, not the deleted one it opened before. Each file is told by what it holds.
    synced: list[bytes] = []
    monkeypatch.setattr(writeback, "_SYNC", lambda fd: synced.append(os.pread(fd, 16, 0)))
    monkeypatch.setattr(writeback, "WRITEBACK_SECONDS", 0.01)
    db = tmp_path / "kb.sqlite3"
    db.write_bytes(b"database")
    wal = tmp_path / "kb.sqlite3-wal"
    wal.write_bytes(b"first WAL")
    with writeback.written_back(create_engine(f"sqlite:///{db}")):
        time.sleep(0.1)
        wal.unlink()
        time.sleep(0.05)
        wal.write_bytes(b"second WAL")
        time.sleep(0.1)
    wals = [content for content in synced if content != b"database"]
    assert wals[0] == b"first WAL" and wals[-1] == b"second WAL"
    assert wals == sorted(wals)  # never the first again once the second was synced
