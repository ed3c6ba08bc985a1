"""The prefilter's key databases, compiled in a worker process (kb.matcher.keydb)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import hyperscan
import pytest

from kb import patterns
from kb.knowledge import KnowledgeBase
from kb.matcher import keydb
from tests.conftest import seed_record

KEYS = [(0, "Connection refused"), (7, "No module named"), (9, 'File "'), (12, "naïve key")]
TEXT = 'x File "a.py"\nConnectionError: Connection refused\nNo module named naïve key'.encode()


def _found(blob: bytes) -> list[tuple[int, int]]:
    db: Any = hyperscan.loadb(blob, hyperscan.HS_MODE_BLOCK)
    db.scratch = hyperscan.Scratch(db)
    out: list[tuple[int, int]] = []
    db.scan(TEXT, match_event_handler=lambda key, _f, to, _fl, _c: out.append((key, to)))
    return sorted(out)


def _refuse_here(*_args: Any) -> bytes:
    raise AssertionError("compiled in this process, not in the worker")


def test_key_database_is_compiled_by_the_worker_and_finds_every_key(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The worker runs keydb.py by its path in a new interpreter: this process's own compile
    made to fail shows that it was never called, and the database the worker sent back is the
    one this process would have made, byte for byte."""
    here = keydb.compile_literals([k for k, _ in KEYS], [t.encode() for _, t in KEYS])
    monkeypatch.setattr(keydb, "IN_PROCESS_KEYS", 0)
    monkeypatch.setattr(keydb, "compile_literals", _refuse_here)
    blob = keydb.compiled(KEYS)
    assert blob == here
    ends = {key: to for key, to in _found(blob)}
    assert set(ends) == {0, 7, 9, 12}
    assert TEXT[: ends[12]].endswith("naïve key".encode())


def test_a_key_the_worker_refuses_is_left_out_and_the_others_compiled(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Hyperscan refuses an empty literal (kb never makes one: kb.patterns).
    monkeypatch.setattr(keydb, "IN_PROCESS_KEYS", 0)
    monkeypatch.setattr(keydb, "compile_literals", _refuse_here)
    blob = keydb.compiled([*KEYS[:2], (3, ""), *KEYS[2:]])
    assert {key for key, _ in _found(blob)} == {0, 7, 9, 12}


@pytest.mark.parametrize("in_process_keys", [0, 10_000])
def test_keys_hyperscan_refuses_all_raise_hyperscan_error_with_its_reason(
    monkeypatch: pytest.MonkeyPatch, in_process_keys: int
) -> None:
    monkeypatch.setattr(keydb, "IN_PROCESS_KEYS", in_process_keys)
    with pytest.raises(hyperscan.error, match="empty string"):
        keydb.compiled([(1, ""), (2, "")])


def test_refused_keys_anywhere_among_many_leave_exactly_the_others() -> None:
    words = [f"key{number:03d}!" for number in range(40)]
    refused = {0, 17, 18, 39}
    ids = list(range(40))
    expressions = [b"" if number in refused else words[number].encode() for number in ids]
    blob = keydb.compile_literals(ids, expressions)
    db: Any = hyperscan.loadb(blob, hyperscan.HS_MODE_BLOCK)
    db.scratch = hyperscan.Scratch(db)
    found: set[int] = set()
    db.scan(" ".join(words).encode(), match_event_handler=lambda key, *_: found.add(key))
    assert found == set(ids) - refused


@pytest.mark.parametrize("executable", ["/nonexistent/python", "/bin/false", ""])
def test_keys_are_compiled_here_when_no_worker_can_run(
    monkeypatch: pytest.MonkeyPatch, executable: str
) -> None:
    """No interpreter to start, or one that fails without a word (as a worker killed for
    memory does): the keys are compiled in this process, and the database is the same."""
    monkeypatch.setattr(keydb, "IN_PROCESS_KEYS", 0)
    monkeypatch.setattr(sys, "executable", executable)
    calls: list[int] = []
    compile_here = keydb.compile_literals

    def counted(ids: list[int], expressions: list[bytes]) -> bytes:
        calls.append(len(ids))
        return compile_here(ids, expressions)

    monkeypatch.setattr(keydb, "compile_literals", counted)
    blob = keydb.compiled(KEYS)
    assert calls == [len(KEYS)]
    assert blob == compile_here([k for k, _ in KEYS], [t.encode() for _, t in KEYS])


def test_few_keys_never_start_a_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    import subprocess

    def no_worker(*_args: Any, **_kwargs: Any) -> Any:
        raise AssertionError("a worker was started for a handful of keys")

    monkeypatch.setattr(subprocess, "run", no_worker)
    assert {key for key, _ in _found(keydb.compiled(KEYS))} == {0, 7, 9, 12}


def test_a_worker_compiles_while_the_caller_goes_on_and_a_failed_build_stops_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Compiling starts the worker and returns: the build goes on (the next shard's keys,
    the templates) and takes the database when it needs it. A build that fails kills the
    worker rather than leave it blocked on output no one reads."""
    monkeypatch.setattr(keydb, "IN_PROCESS_KEYS", 0)
    running = keydb.Compiling(KEYS)
    assert running._worker is not None  # started, not waited for
    assert {key for key, _ in _found(running.result())} == {0, 7, 9, 12}
    stopped = keydb.Compiling(KEYS)
    worker = stopped._worker
    assert worker is not None
    stopped.abandon()
    assert worker.returncode is not None and stopped._worker is None


def test_a_key_hyperscan_refuses_costs_no_other_pattern_its_match(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """End to end, through a build of the index: one pattern's best key made one Hyperscan
    refuses (a NUL first, which its bindings read as an empty literal; kb.patterns makes none
    now). The build failed on it (every match with it); now it leaves that key out, and the
    other record is found as before (the refused one may still be, by its whole message)."""
    original = patterns._keys_from_runs

    def refused_for_the_widget(runs: list[str]) -> tuple[tuple[str, ...], int, int]:
        keys, before, lines = original(runs)
        refused = [f"\0{run}" for run in runs if "widget" in run]
        return (*refused, *keys), before, lines

    dataset = tmp_path / "two.jsonl"
    dataset.write_text(
        "\n".join(
            json.dumps(
                {
                    "record": {
                        **seed_record(),
                        "id": f"{n:016x}",
                        "slug": f"two-{n}",
                        "errorMessage": message,
                        "messagePattern": message,
                    }
                }
            )
            for n, message in enumerate(["the widget exploded at once", "the gadget melted away"])
        ),
        encoding="utf-8",
    )
    with KnowledgeBase(str(tmp_path / "kb.sqlite3")) as kb:
        assert kb.import_sources([str(dataset)]).inserted == 2
        monkeypatch.setattr(patterns, "_keys_from_runs", refused_for_the_widget)
        kb.matcher(rebuild=True)
        report = kb.match("start\nthe widget exploded at once\nthe gadget melted away\n")
    assert (3, "0000000000000001") in [(m.line, m.id) for m in report.matches]
