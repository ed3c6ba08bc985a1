"""kb match on real logs: tracebacks captured from pinned libraries, made noisy the way users
make them (timestamps, ANSI, CRLF, compose prefixes, pytest and Jupyter reports, wrapping),
several errors at once, reworded messages, and clean logs that must come back empty.

The logs and their answer keys are in tests/fixtures/reallogs/ (see its README for how they
were captured). The knowledge base is every corpus record of the repositories involved.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kb.knowledge import KnowledgeBase

REALLOGS = Path(__file__).parent / "fixtures" / "reallogs"
LOGS = sorted(path.name.removesuffix(".expected.json") for path in REALLOGS.glob("*.expected.json"))


@pytest.fixture(scope="module")
def kb(tmp_path_factory: pytest.TempPathFactory) -> Any:
    folder = tmp_path_factory.mktemp("reallogs")
    base = KnowledgeBase(str(folder / "kb.sqlite3"))
    report = base.import_sources([str(REALLOGS / "records.jsonl.gz")])
    assert report.rejected == 0 and report.inserted > 8000
    yield base
    base.close()


def expected_of(name: str) -> dict[str, Any]:
    return json.loads((REALLOGS / f"{name}.expected.json").read_text())


def lines_of(match: Any) -> set[int]:
    return {match.line, *range(match.line, match.end_line + 1), *match.other_lines}


def accepts(match: Any, entry: dict[str, Any]) -> bool:
    """The match names the expected record, or one the answer key says is equally right."""
    right = {entry["id"], *entry.get("alternatives", [])}
    if match.id in right or entry["id"] in match.duplicates:
        return True
    if entry.get("method") == "fuzzy":
        return entry["id"] in {alt for alt, _score in match.alternatives}
    return False


@pytest.mark.parametrize("name", LOGS)
def test_every_expected_error_is_found_at_its_line_and_nothing_else(kb: Any, name: str) -> None:
    key = expected_of(name)
    report = kb.match((REALLOGS / f"{name}.log").read_bytes())
    allowed_lines: set[int] = set()
    for entry in key["expected"]:
        where = {entry["line"], *entry.get("also_lines", [])}
        allowed_lines |= where
        found = [m for m in report.matches if lines_of(m) & where and accepts(m, entry)]
        got = [(m.id, m.line, m.method, round(m.score, 2)) for m in report.matches]
        assert found, f"{name}: {entry['id']} at line {entry['line']} not found; got {got}"
    for entry in key.get("tolerated", []):
        allowed_lines.add(entry["line"])
    extra = [
        (m.id, m.line, m.method, round(m.score, 2), m.text[:80])
        for m in report.matches
        if not lines_of(m) & allowed_lines
    ]
    assert not extra, f"{name}: unexpected matches {extra}"


def test_clean_logs_are_part_of_the_set() -> None:
    clean = [name for name in LOGS if not expected_of(name)["expected"]]
    assert len(clean) >= 5
