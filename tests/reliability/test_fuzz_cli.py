"""Bad input never crashes a command: a fixed seed of fuzz_cli.py's rounds (beside this file)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.reliability.fuzz_cli import fuzz

SEED = 20261206
# About 0.13 s a round on the 2-core machine: a few seconds of the suite. More by hand,
# `python tests/reliability/fuzz_cli.py SEED SECONDS`: seed 7 found, within its first 90
# seconds, that a message starting with NUL broke the matcher's index (kb.patterns; tested on
# its own now).
ROUNDS = 40


@pytest.mark.databases
def test_mutated_records_logs_and_queries_never_crash_a_command(
    tmp_path: Path, database: str, db_url: str
) -> None:
    # On SQLite three files, one new every third round; on PostgreSQL the test's database.
    databases = [db_url] if database == "postgresql" else None
    fuzzer = fuzz(SEED, tmp_path, rounds=ROUNDS, databases=databases)
    assert fuzzer.crashes == []
    # The rounds reached every command, not only failed imports.
    assert fuzzer.invocations > ROUNDS * 4
    if databases is None:
        assert any(tmp_path.glob("db*.sqlite3"))


def test_the_fuzzer_reports_a_command_that_raises(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kb.knowledge import KnowledgeBase

    def broken(*_args: Any, **_kwargs: Any) -> None:
        raise RuntimeError("a bug")

    monkeypatch.setattr(KnowledgeBase, "stats", broken)
    fuzzer = fuzz(SEED, tmp_path, rounds=3)
    assert fuzzer.crashes
    assert {crash.args[2] for crash in fuzzer.crashes} == {"stats"}
    assert "a bug" in fuzzer.crashes[0].error
