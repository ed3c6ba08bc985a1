"""`kb match --timeout SECONDS` (default 60, 0 for none): past it the log is read no further,
the errors found so far are reported, stderr and `stats.stopped` say it stopped, and the exit
status is found / not found as ever. (Issue 13: a match has a deadline, as `kb serve` has.)"""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import seed_record

SEED_LINE = (
    "ValueError: Unknown KV cache group kind 'ful' in backend_per_kind. Valid kinds are: "
    "full_attention, mamba."
)
LATE_LINE = (
    "ValueError: Unknown KV cache group kind 'late' in backend_per_kind. Valid kinds are: x."
)


@pytest.fixture
def slow_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    """Small blocks, and a clock that moves a second each time the scan looks at it: the
    deadline passes after a few blocks, the same way on every machine."""
    ticks = itertools.count()
    monkeypatch.setattr("kb.logtext.BLOCK_BYTES", 4096)
    monkeypatch.setattr("kb.matcher.scan.time.monotonic", lambda: float(next(ticks)))


def long_log(tmp_path: Path) -> Path:
    noise = [f"2026-03-14T08:00:00Z INFO  [http] GET /metrics {i} 200" for i in range(20_000)]
    log = tmp_path / "long.log"
    log.write_text("\n".join([SEED_LINE, *noise, LATE_LINE]) + "\n")
    return log


def imported(invoke: Any, tmp_path: Path) -> None:
    path = tmp_path / "records.jsonl"
    path.write_text(json.dumps(seed_record()) + "\n")
    assert invoke("import", str(path)).exit_code == 0


@pytest.mark.usefixtures("slow_clock")
def test_a_match_past_its_timeout_reports_what_it_found_and_says_it_stopped(
    invoke: Any, tmp_path: Path
) -> None:
    imported(invoke, tmp_path)
    result = invoke("match", str(long_log(tmp_path)), "--json", "--timeout", "5")
    assert result.exit_code == 0, result.stderr
    found = json.loads(result.stdout)
    assert [m["captures"][0] for m in found["matches"]] == ["ful"]
    assert found["stats"]["stopped"] == "timeout"
    assert found["stats"]["lines"] < 20_002
    assert "stopped after 5 s (--timeout)" in result.stderr
    assert "--timeout 0 reads the whole log" in result.stderr


@pytest.mark.usefixtures("slow_clock")
def test_timeout_zero_reads_the_whole_log(invoke: Any, tmp_path: Path) -> None:
    imported(invoke, tmp_path)
    result = invoke("match", str(long_log(tmp_path)), "--json", "--timeout", "0")
    found = json.loads(result.stdout)
    assert sorted(m["captures"][0] for m in found["matches"]) == ["ful", "late"]
    assert "stopped" not in found["stats"] and found["stats"]["lines"] == 20_002
    assert "stopped" not in result.stderr


def test_a_log_matched_in_time_says_nothing_of_a_timeout(invoke: Any, tmp_path: Path) -> None:
    imported(invoke, tmp_path)
    result = invoke("match", str(long_log(tmp_path)), "--json")  # the default, 60 s
    found = json.loads(result.stdout)
    assert "stopped" not in found["stats"] and len(found["matches"]) == 2
    assert result.exit_code == 0


@pytest.mark.usefixtures("slow_clock")
def test_the_library_takes_a_timeout_too(tmp_path: Path) -> None:
    from kb.matcher import build_index, sources_from_records

    index = build_index(sources_from_records([seed_record()]), tmp_path, "timeout")
    report = index.match(long_log(tmp_path), timeout=5)
    assert report.stats["stopped"] == "timeout"
    assert [m.captures[0] for m in report.matches] == ["ful"]
