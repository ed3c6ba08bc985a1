"""A SQLite knowledge base in a folder kb cannot write (a shared, read-only copy; WAL files
absent) still serves `match`, `search`, `show`, `stats` and `export`; an import into it is
refused with exit 3 and a message that says why. (Issue 13, defect 13.)

Root writes through permission bits, so as root the folder is made read-only by a read-only
bind mount in a mount namespace of the command's own; otherwise by chmod."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import SEED

SEED_LINE = (
    "ValueError: Unknown KV cache group kind 'ful_attention' in backend_per_kind. "
    "Valid kinds are: full_attention, sliding_window."
)
SEED_ID = "46a1fcb95e0d367e"


def can_mount_read_only() -> bool:
    if shutil.which("unshare") is None or shutil.which("mount") is None:
        return False
    probe = subprocess.run(
        ["unshare", "--mount", "sh", "-c", "mount --bind -o ro / /mnt 2>/dev/null || exit 1"],
        capture_output=True,
    )
    return probe.returncode == 0


ROOT = hasattr(os, "geteuid") and os.geteuid() == 0


@pytest.fixture(scope="module")
def read_only_mode() -> str:
    if not ROOT:
        return "chmod"
    if can_mount_read_only():
        return "mount"
    pytest.skip("as root, a read-only folder needs a bind mount in a mount namespace")


@pytest.fixture
def shared_copy(tmp_path: Path, read_only_mode: str) -> Any:
    """A knowledge base in its own folder, checkpointed (no -wal or -shm left beside it), and
    a runner of `kb ARGS` for which that folder is read-only."""
    folder = tmp_path / "shared"
    folder.mkdir()
    db = folder / "kb.sqlite3"
    env = dict(os.environ, KB_DATABASE_URL=str(db))
    subprocess.run([sys.executable, "-m", "kb", "import", "-q", str(SEED)], env=env, check=True)
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    for extra in folder.glob("kb.sqlite3-*"):
        extra.unlink()
    if read_only_mode == "chmod":
        db.chmod(0o444)
        folder.chmod(0o555)

    def run(*args: str, input: str | None = None) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "kb", *args]
        if read_only_mode == "mount":
            mount = f"mount --bind -o ro '{folder}' '{folder}' && exec \"$@\""
            command = ["unshare", "--mount", "sh", "-c", mount, "sh", *command]
        return subprocess.run(command, env=env, input=input, capture_output=True, text=True)

    yield run
    folder.chmod(0o755)
    assert sorted(p.name for p in folder.iterdir()) == ["kb.sqlite3"]  # nothing was written


def test_a_read_only_database_serves_match_search_show_stats_and_export(shared_copy: Any) -> None:
    matched = shared_copy("match", "--json", input=SEED_LINE)
    assert matched.returncode == 0, matched.stderr
    assert [m["id"] for m in json.loads(matched.stdout)["matches"]] == [SEED_ID]
    found = shared_copy("search", "kv", "cache", "group", "--json")
    assert found.returncode == 0, found.stderr
    assert json.loads(found.stdout)["results"][0]["id"] == SEED_ID
    shown = shared_copy("show", SEED_ID, "--format", "json")
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["id"] == SEED_ID
    assert shared_copy("stats", "--json").returncode == 0
    exported = shared_copy("export")
    assert exported.returncode == 0 and json.loads(exported.stdout)["id"] == SEED_ID


def test_an_import_into_a_read_only_database_exits_3_saying_why(
    shared_copy: Any, tmp_path: Path
) -> None:
    result = shared_copy("import", str(SEED))
    assert result.returncode == 3, result.stderr
    first = result.stderr.splitlines()[0]
    assert first.startswith("Error: the database ") and "is read-only" in first
    assert "Traceback" not in result.stderr


def test_a_delete_from_a_read_only_database_exits_3_and_a_dry_run_still_answers(
    shared_copy: Any,
) -> None:
    result = shared_copy("delete", SEED_ID)
    assert result.returncode == 3, result.stderr
    first = result.stderr.splitlines()[0]
    assert first.startswith("Error: the database ") and "is read-only" in first
    dry = shared_copy("delete", "--dry-run", "--json", SEED_ID)
    assert dry.returncode == 0, dry.stderr
    assert [r["id"] for r in json.loads(dry.stdout)["deleted"]] == [SEED_ID]
