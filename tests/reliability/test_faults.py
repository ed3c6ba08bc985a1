"""Faults at the wrong moment: an import killed with SIGKILL while it inserts, fills the
full-text index or builds the matcher leaves the database as it was (or whole) and importable
again, and no half-written matcher cache is ever trusted; two imports and several matches at
once on one SQLite file all succeed or wait; a full disk fails an import cleanly, the
database intact. (Issue 13.)"""

from __future__ import annotations

import json
import os
import resource
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import SEED, corpus_records

SEED_LINE = (
    "ValueError: Unknown KV cache group kind 'ful_attention' in backend_per_kind. "
    "Valid kinds are: full_attention, sliding_window."
)
SEED_ID = "46a1fcb95e0d367e"
KB = [sys.executable, "-m", "kb"]


def generated_records(path: Path, count: int, offset: int = 0) -> Path:
    """`count` valid records (the corpus's, with new ids), one a line."""
    template = corpus_records()
    with open(path, "w") as out:
        for n in range(count):
            record = dict(template[n % len(template)], id=f"{offset + n + 1:016x}")
            out.write(json.dumps(record) + "\n")
    return path


def count_and_check(db: Path) -> int:
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        (count,) = conn.execute("SELECT count(*) FROM records").fetchone()
        (fts,) = conn.execute("SELECT count(*) FROM records_fts").fetchone()
    conn.close()
    assert fts == count  # the full-text index holds exactly the records
    return int(count)


def matches_seed(env: dict[str, str]) -> None:
    run = subprocess.run(
        [*KB, "match", "--json"], input=SEED_LINE, env=env, capture_output=True, text=True
    )
    assert run.returncode == 0, run.stderr
    assert [m["id"] for m in json.loads(run.stdout)["matches"]] == [SEED_ID]


@pytest.fixture
def seeded_env(tmp_path: Path) -> dict[str, str]:
    env = dict(os.environ, KB_DATABASE_URL=str(tmp_path / "kb.sqlite3"))
    subprocess.run([*KB, "import", "-q", str(SEED)], env=env, check=True)
    return env


def wait_for(process: subprocess.Popen[str], condition: Any, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert process.poll() is None, "the import finished before it could be killed"
        assert time.monotonic() < deadline, "the moment to kill never came"
        time.sleep(0.01)


@pytest.mark.parametrize("moment", ["inserting", "committing", "building the matcher"])
def test_an_import_killed_at_any_moment_leaves_a_whole_database_and_no_trusted_half_cache(
    tmp_path: Path, seeded_env: dict[str, str], moment: str
) -> None:
    db = Path(seeded_env["KB_DATABASE_URL"])
    records = generated_records(tmp_path / "r.jsonl", 3000)
    stderr_path = tmp_path / "stderr"
    with open(stderr_path, "w") as stderr:
        kb = subprocess.Popen(
            [*KB, "import", str(records), "--batch-size", "200"],
            env=seeded_env,
            stderr=stderr,
            text=True,
        )
        wal = Path(f"{db}-wal")
        if moment == "inserting":  # batches are in the transaction's WAL pages
            wait_for(kb, lambda: wal.exists() and wal.stat().st_size > 1_000_000)
        elif moment == "committing":  # the full-text fill and the commit come after the reading
            wait_for(kb, lambda: wal.exists() and wal.stat().st_size > 4_000_000)
        else:  # the records are committed; the build writes its temporary file
            wait_for(kb, lambda: "Building the matcher index" in stderr_path.read_text())
            cache = next(Path(seeded_env["XDG_CACHE_HOME"]).rglob("matcher.lock")).parent
            wait_for(kb, lambda: any(cache.glob(".matcher-*.tmp")))
        kb.send_signal(signal.SIGKILL)
        kb.wait()
    count = count_and_check(db)
    assert count in (1, 3001)  # as it was, or the whole import: never a part
    if moment == "building the matcher":
        assert count == 3001
    matches_seed(seeded_env)  # a cache left half-written would be refused here
    again = subprocess.run(
        [*KB, "import", "--json", str(records)], env=seeded_env, capture_output=True, text=True
    )
    assert again.returncode == 0, again.stderr
    assert count_and_check(db) == 3001
    matches_seed(seeded_env)
    cache_dir = next(Path(seeded_env["XDG_CACHE_HOME"]).rglob("matcher.sqlite3")).parent
    assert not list(cache_dir.glob(".matcher-*.tmp"))  # the killed build's file is gone


def test_two_imports_and_several_matches_at_once_all_succeed(
    tmp_path: Path, seeded_env: dict[str, str]
) -> None:
    db = Path(seeded_env["KB_DATABASE_URL"])
    first = generated_records(tmp_path / "a.jsonl", 1500)
    second = generated_records(tmp_path / "b.jsonl", 1500, offset=1500)
    imports = [
        subprocess.Popen(
            [*KB, "import", "-q", str(path)], env=seeded_env, stderr=subprocess.PIPE, text=True
        )
        for path in (first, second)
    ]
    finished: list[subprocess.CompletedProcess[str]] = []
    while any(p.poll() is None for p in imports) or len(finished) < 6:
        finished.append(
            subprocess.run(
                [*KB, "match", "--json"],
                input=SEED_LINE,
                env=seeded_env,
                capture_output=True,
                text=True,
            )
        )
    for process in imports:
        _, stderr = process.communicate(timeout=120)
        assert process.returncode == 0, stderr
    for run in finished:
        assert run.returncode == 0, run.stderr
        assert [m["id"] for m in json.loads(run.stdout)["matches"]] == [SEED_ID]
    assert count_and_check(db) == 3001


def test_a_full_disk_fails_an_import_cleanly_and_the_database_stays_whole(
    tmp_path: Path, seeded_env: dict[str, str]
) -> None:
    """A file-size limit is a full disk to SQLite: the WAL cannot grow past it."""
    db = Path(seeded_env["KB_DATABASE_URL"])
    records = generated_records(tmp_path / "r.jsonl", 2000)
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    limit = db.stat().st_size + 2_000_000

    def small_disk() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    run = subprocess.run(
        [*KB, "import", str(records)],
        env=seeded_env,
        capture_output=True,
        text=True,
        preexec_fn=small_disk,
    )
    assert run.returncode == 3, run.stderr
    first = run.stderr.splitlines()[0]
    assert first.startswith("Error: import failed, nothing was stored: "), first
    assert "Traceback" not in run.stderr
    assert count_and_check(db) == 1
    matches_seed(seeded_env)
    again = subprocess.run([*KB, "import", "-q", str(records)], env=seeded_env)
    assert again.returncode == 0
    assert count_and_check(db) == 2001
