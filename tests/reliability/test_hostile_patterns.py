"""Hostile patterns: a record whose messagePattern backtracks catastrophically, is invalid, is
a megabyte long, or matches anything never hangs, crashes or floods a match, and the real
error beside it is still found. (Issue 13, defects 1 and 2; the matcher runs RE2 only.)"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import seed_record

# A time no hostile pattern may push a match of these small logs past (an honest match of
# them takes well under a second; the bound is wide for a loaded CI machine).
BOUND_S = 20.0
SEED_LINE = (
    "ValueError: Unknown KV cache group kind 'ful' in backend_per_kind. Valid kinds are: "
    "full_attention, mamba."
)

HOSTILE = {
    "alternation under a star, with a lookahead": r"ValueError: (\w|\w)*(?=zzz)",
    "nested quantifier": r"(a+)+b",
    "four lazy groups": r"(.+?)(.+?)(.+?)(.+?)x",
    "backreference": r"(\w+) and \1 again(?!x)",
    "invalid": r"ValueError: ((unclosed",
    "match anything": r"(.+?)",
    "a megabyte long": "Q" * (1 << 20),
    "a long literal past Hyperscan's limit": "ValueError: " + "literal " * 4000,
}


def hostile_record(pattern: str, n: int) -> dict[str, Any]:
    base = seed_record()
    return {
        **base,
        "id": f"{n:016x}",
        "slug": f"hostile-{n}",
        "messagePattern": pattern,
        "errorMessage": pattern[:200] or "x",
    }


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_a_hostile_pattern_never_hangs_or_claims_the_log(
    invoke: Any, tmp_path: Path, name: str
) -> None:
    records = [seed_record(), hostile_record(HOSTILE[name], 1)]
    path = tmp_path / "records.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    assert invoke("import", str(path)).exit_code in (0, 1)
    noise = [
        "ValueError: " + "a" * 30 + " " + "b" * 30,  # the classic 60-character trap
        "a" * 50_000 + "c",
        "x " * 50_000,
        "aaaa and aaaa again " * 5000,
    ]
    log = tmp_path / "app.log"
    log.write_text("\n".join([*noise, SEED_LINE, *noise]) + "\n")
    started = time.perf_counter()
    result = invoke("match", str(log), "--json")
    elapsed = time.perf_counter() - started
    assert elapsed < BOUND_S, f"{name}: {elapsed:.1f} s"
    found = json.loads(result.stdout)["matches"]
    assert [m["id"] for m in found] == [seed_record()["id"]], name


@pytest.mark.databases
def test_hostile_records_can_be_deleted_and_matching_goes_on_without_them(
    invoke: Any, tmp_path: Path
) -> None:
    # Issue 13, defect 2: an over-long literal once broke every match, with no way to take
    # the record out. Every hostile record goes in one `kb delete`; the seed is still found.
    hostile = {name: hostile_record(HOSTILE[name], n) for n, name in enumerate(sorted(HOSTILE), 1)}
    long_literal = hostile["a long literal past Hyperscan's limit"]["id"]
    path = tmp_path / "records.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in [seed_record(), *hostile.values()]))
    assert invoke("import", str(path)).exit_code in (0, 1)
    stored = [json.loads(line)["id"] for line in invoke("export").stdout.splitlines()]
    assert long_literal in stored
    doomed = [record_id for record_id in stored if record_id != seed_record()["id"]]

    result = invoke("delete", *doomed)

    assert result.exit_code == 0, result.output
    assert [line.split()[0] for line in result.stdout.splitlines()[1:]] == doomed
    assert [json.loads(line)["id"] for line in invoke("export").stdout.splitlines()] == [
        seed_record()["id"]
    ]
    found = json.loads(invoke("match", "--json", input=SEED_LINE + "\n").stdout)["matches"]
    assert [m["id"] for m in found] == [seed_record()["id"]]
    assert invoke("show", long_literal).exit_code == 1


def test_python_s_warnings_about_a_pattern_never_reach_the_terminal(
    tmp_path: Path, db_path: Path
) -> None:
    # `[a-z--]` makes Python's regex parser warn "Possible set difference": the warning line,
    # naming kb's source, was printed by `kb import` (the pattern checked) and could be by `kb
    # match` (a backtracking-only pattern confirmed by `re`). A process of its own, as a user
    # runs it: the test runner's own warning capture would hide what the terminal sees.
    set_syntax = r"Gadget (\w+) and \1 melted [a-z--]+ down"
    records = [seed_record(), hostile_record(set_syntax, 1)]
    dataset = tmp_path / "records.jsonl"
    dataset.write_text("".join(json.dumps(r) + "\n" for r in records))
    log = tmp_path / "app.log"
    log.write_text(f"start\n{SEED_LINE}\nValueError: Gadget foo and foo melted x-y down\n")
    env = {key: value for key, value in os.environ.items() if key != "PYTHONWARNINGS"}
    kb = [sys.executable, "-m", "kb", "--db", str(db_path)]
    imported = subprocess.run(
        [*kb, "import", str(dataset)], env=env, capture_output=True, text=True, timeout=120
    )
    assert imported.returncode == 0, imported.stderr
    matched = subprocess.run(
        [*kb, "match", str(log), "--json"], env=env, capture_output=True, text=True, timeout=120
    )
    assert matched.returncode == 0, matched.stderr
    found = {(m["line"], m["record"]["id"]) for m in json.loads(matched.stdout)["matches"]}
    assert (3, f"{1:016x}") in found  # the pattern was run, and confirmed by `re`
    for stderr in (imported.stderr, matched.stderr):
        assert "Warning" not in stderr
        assert "set difference" not in stderr


def test_quiet_parses_in_several_threads_leave_python_s_warnings_as_they_were() -> None:
    # warnings.catch_warnings swaps process-wide filters: two threads in it at once can put
    # back each other's, leaving warnings off for the rest of a server's life.
    import threading
    import warnings

    from kb.regex import quietly

    def parse_slowly() -> None:
        def call() -> None:
            time.sleep(0.002)  # long enough for the other threads to come in
            re.compile(r"[a-z--]+")

        for _ in range(20):
            quietly(call)

    before = list(warnings.filters)
    threads = [threading.Thread(target=parse_slowly) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert warnings.filters == before
