"""The library's `KnowledgeBase.match`: a `str` is the log itself, a path-like names a file,
and every match carries its record."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kb import KnowledgeBase
from tests.conftest import SEED, seed_record
from tests.test_match_cli import LOG

pytestmark = pytest.mark.databases  # each test on SQLite and on PostgreSQL


@pytest.fixture
def kb(db_url: str) -> Any:
    with KnowledgeBase(db_url) as kb:
        kb.import_sources([str(SEED)])
        yield kb


def test_a_path_names_a_file_and_a_str_is_the_log_itself(kb: Any, tmp_path: Path) -> None:
    log = tmp_path / "app.log"
    log.write_text(LOG)
    by_path = kb.match(log)
    assert [m.id for m in by_path.matches] == ["46a1fcb95e0d367e"]
    assert [m.id for m in kb.match(LOG).matches] == ["46a1fcb95e0d367e"]
    # A str is never taken for a file name: the name is just text with no error in it.
    assert kb.match(str(log)).matches == []


def test_a_match_carries_its_record_fetched_once_for_the_whole_report(
    kb: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[list[str]] = []
    fetch = kb.get_many
    monkeypatch.setattr(kb, "get_many", lambda ids: calls.append(list(ids)) or fetch(ids))
    report = kb.match(LOG + LOG.replace("ful_attention", "full_attn"))
    assert calls == []  # nothing fetched until asked for
    records = [m.record for m in report.in_log_order()]
    assert records and all(r == seed_record() for r in records)
    assert calls == [["46a1fcb95e0d367e"]]
