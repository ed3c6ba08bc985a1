"""Every failure gets its documented exit code and one clear line, never a traceback and never
exit 1 (which means "nothing found"): a log line of JSON nested thousands deep, a damaged or
foreign database on the quick path, `kb export` where it cannot write, a NaN score, Ctrl-C.
(Issue 13, defects 7, 8, 9 and 15.)"""

from __future__ import annotations

import gc
import json
import os
import resource
import signal
import sqlite3
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import SEED, corpus_records

# A line of the seed record's error, as a log shows it.
SEED_LINE = (
    "ValueError: Unknown KV cache group kind 'ful_attention' in backend_per_kind. "
    "Valid kinds are: full_attention, sliding_window."
)
SEED_ID = "46a1fcb95e0d367e"


@pytest.fixture
def seeded(invoke: Any) -> Any:
    result = invoke("import", str(SEED))
    assert result.exit_code == 0, result.output
    return invoke


def no_traceback(result: Any) -> None:
    assert "Traceback" not in result.stderr and "Error" in result.stderr.splitlines()[0]


# ----------------------------------------------------------------------------- hostile logs


@pytest.mark.parametrize("depth", [1_000, 100_000])
def test_a_json_log_line_nested_deep_is_read_as_text(seeded: Any, depth: int) -> None:
    """A structured log line is parsed for the tracebacks it carries; one nested deeper than
    the parser goes is just a line, and the error after it is still found."""
    deep = '{"msg": "a\\nb", "x": ' + "[" * depth + "]" * depth + "}"
    result = seeded("match", "--json", input=f"{deep}\n{SEED_LINE}\n")
    assert result.exit_code == 0, result.stderr[-2000:]
    assert [m["id"] for m in json.loads(result.stdout)["matches"]] == [SEED_ID]


@pytest.mark.parametrize("value", ["nan", "NaN", "-nan", "inf", "-1", "1.5"])
def test_a_min_score_that_is_not_a_number_from_0_to_1_is_a_usage_error(
    seeded: Any, value: str
) -> None:
    result = seeded("match", "--min-score", value, input=SEED_LINE)
    assert result.exit_code == 2
    assert "--min-score" in result.stderr


def test_the_library_refuses_a_nan_min_score(db_path: Path) -> None:
    from kb import KnowledgeBase

    with KnowledgeBase(str(db_path)) as kb:
        kb.import_sources([str(SEED)])
        with pytest.raises(ValueError, match="min_score"):
            kb.match(SEED_LINE, min_score=float("nan"))


# ----------------------------------------------------------------------------- damaged databases


def checkpointed(path: Path) -> Path:
    """The database with everything in its main file (no WAL to read pages from)."""
    gc.collect()  # the connections the in-process commands left behind
    with sqlite3.connect(path) as conn:
        busy, _, _ = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
    conn.close()
    assert busy == 0
    return path


def corrupt_pages(path: Path) -> None:
    """Random bytes over every page but the first: the header and the schema stay readable."""
    page_size = 16384
    size = checkpointed(path).stat().st_size
    with open(path, "r+b") as fh:
        fh.seek(page_size)
        fh.write(os.urandom(size - page_size))


def drop_table(path: Path, table: str) -> None:
    with sqlite3.connect(checkpointed(path)) as conn:
        conn.execute(f"DROP TABLE {table}")
    conn.close()


def not_a_database(path: Path) -> None:
    checkpointed(path).write_bytes(os.urandom(65536))


DAMAGE: dict[str, Callable[[Path], None]] = {
    "corrupt pages": corrupt_pages,
    "records table missing": lambda path: drop_table(path, "records"),
    "full-text table missing": lambda path: drop_table(path, "records_fts"),
    "not a database": not_a_database,
}


@pytest.mark.parametrize("damage", sorted(DAMAGE))
@pytest.mark.parametrize(
    "command",
    [["match", "-"], ["search", "kv", "cache"], ["show", SEED_ID], ["stats"], ["export"]],
    ids=lambda c: c[0],
)
def test_a_damaged_database_exits_3_with_a_message(
    seeded: Any, db_path: Path, damage: str, command: list[str]
) -> None:
    """The quick path (match and search without SQLAlchemy) reports it as the full one does:
    the cache of the matcher is current, so only reading the records can notice."""
    assert seeded("match", "-", input=SEED_LINE).exit_code == 0  # the quick path is ready
    DAMAGE[damage](db_path)
    result = seeded(*command, input=SEED_LINE)
    if damage == "full-text table missing" and command[0] != "search":
        assert result.exit_code == 0  # they do not read it
        return
    assert result.exit_code == 3, (result.exit_code, result.stderr[-2000:])
    no_traceback(result)
    assert "database" in result.stderr.splitlines()[0]


# ----------------------------------------------------------------------------- export targets


def test_export_into_a_missing_folder_is_an_error_naming_it(seeded: Any, tmp_path: Path) -> None:
    target = tmp_path / "no" / "such" / "out.jsonl"
    result = seeded("export", str(target))
    assert result.exit_code == 2
    assert result.stderr.startswith(f"Error: {target}: ")
    assert "no such folder" in result.stderr
    assert not target.parent.exists()


def test_export_onto_a_folder_is_refused_and_the_folder_kept(seeded: Any, tmp_path: Path) -> None:
    folder = tmp_path / "out"
    folder.mkdir()
    (folder / "keep").write_text("x")
    result = seeded("export", str(folder))
    assert result.exit_code == 2
    assert result.stderr.startswith(f"Error: {folder}: is a folder")
    assert [p.name for p in folder.iterdir()] == ["keep"]


def test_export_through_a_symlink_writes_its_target_and_keeps_the_link(
    seeded: Any, tmp_path: Path
) -> None:
    real = tmp_path / "real.jsonl"
    real.write_text("old\n")
    link = tmp_path / "link.jsonl"
    link.symlink_to(real)
    assert seeded("export", str(link)).exit_code == 0
    assert link.is_symlink() and os.readlink(link) == str(real)
    assert json.loads(real.read_text())["id"] == SEED_ID
    # A link to a file not there yet creates it.
    dangling = tmp_path / "dangling.jsonl"
    dangling.symlink_to(tmp_path / "later.jsonl")
    assert seeded("export", str(dangling)).exit_code == 0
    assert dangling.is_symlink() and (tmp_path / "later.jsonl").is_file()


def test_export_into_a_fifo_writes_through_it(seeded: Any, tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    received: list[bytes] = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_bytes()))
    reader.start()
    result = seeded("export", str(fifo))
    reader.join(timeout=30)
    assert result.exit_code == 0, result.stderr
    assert stat.S_ISFIFO(fifo.lstat().st_mode)
    assert json.loads(received[0])["id"] == SEED_ID


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_export_to_a_full_device_is_an_error_and_the_device_stays(
    seeded: Any, tmp_path: Path
) -> None:
    """As root, `kb export /dev/full` once replaced the device with a regular file."""
    link = tmp_path / "full"
    link.symlink_to("/dev/full")
    result = seeded("export", str(link))
    assert result.exit_code == 2
    assert "No space left on device" in result.stderr
    assert stat.S_ISCHR(os.stat("/dev/full").st_mode) and link.is_symlink()


def test_export_on_a_full_disk_leaves_the_old_file_whole(tmp_path: Path) -> None:
    """A file-size limit (what a full disk looks like to a writer) stops the export: exit 2,
    the file it was to replace unchanged, no temporary file left."""
    db = tmp_path / "kb.sqlite3"
    env = dict(os.environ, KB_DATABASE_URL=str(db))
    records = tmp_path / "r.jsonl"
    records.write_text("".join(json.dumps(r) + "\n" for r in corpus_records(40)))
    subprocess.run([sys.executable, "-m", "kb", "import", "-q", str(records)], env=env, check=True)
    target = tmp_path / "out" / "backup.jsonl"
    target.parent.mkdir()
    target.write_text("the previous backup\n")

    def limit_file_size() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (50_000, 50_000))

    run = subprocess.run(
        [sys.executable, "-m", "kb", "export", str(target)],
        env=env,
        capture_output=True,
        text=True,
        preexec_fn=limit_file_size,
    )
    assert run.returncode == 2, run.stderr
    assert run.stderr.startswith(f"Error: {target}: cannot write: File too large")
    assert target.read_text() == "the previous backup\n"
    assert [p.name for p in target.parent.iterdir()] == ["backup.jsonl"]


def test_export_to_a_closed_pipe_stops_quietly(tmp_path: Path) -> None:
    db = tmp_path / "kb.sqlite3"
    env = dict(os.environ, KB_DATABASE_URL=str(db))
    records = tmp_path / "r.jsonl"
    records.write_text("".join(json.dumps(r) + "\n" for r in corpus_records(40)) * 1)
    subprocess.run([sys.executable, "-m", "kb", "import", "-q", str(records)], env=env, check=True)
    run = subprocess.run(
        f"{sys.executable} -m kb export - | head -c 10 >/dev/null; echo ${{PIPESTATUS[0]}}",
        shell=True,
        executable="/bin/bash",
        env=env,
        capture_output=True,
        text=True,
    )
    assert "Traceback" not in run.stderr and "BrokenPipe" not in run.stderr, run.stderr
    assert run.stdout.strip() in ("0", "141")


# ----------------------------------------------------------------------------- Ctrl-C


def wait_until_open(process: subprocess.Popen[Any], name: str, timeout: float = 30) -> None:
    """Until the process holds a file whose path ends with `name` (Linux's /proc)."""
    fds = Path(f"/proc/{process.pid}/fd")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert process.poll() is None, process.communicate()
        try:
            if any(os.readlink(fd).endswith(name) for fd in fds.iterdir()):
                return
        except OSError:
            pass
        time.sleep(0.02)
    raise AssertionError(f"the process never opened {name}")


def sigint_as_from_a_terminal() -> None:
    """For Popen(preexec_fn=...): Ctrl-C's default action in the child. A shell starts a
    background job with SIGINT ignored, the ignore is inherited, and a Python started with
    SIGINT ignored keeps ignoring it (as it should): a suite run in the background would
    otherwise test nothing here."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def wait_until_reading_a_pipe(process: subprocess.Popen[Any], timeout: float = 30) -> None:
    """Until the process's main thread waits in a pipe's read (Linux's /proc wchan names the
    kernel function: `pipe_read`, `anon_pipe_read`): where a Ctrl-C finds it when a paste or
    a feed has paused. On a loaded machine a fixed sleep may find it still setting up."""
    wchan = Path(f"/proc/{process.pid}/wchan")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert process.poll() is None, process.communicate()
        try:
            if "pipe" in wchan.read_text():
                return
        except OSError:
            break
        time.sleep(0.02)
    time.sleep(0.3)  # no wchan here: give it the time it usually needs


needs_proc = pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc")


@needs_proc
def test_ctrl_c_during_an_import_exits_130_and_says_nothing_was_stored(tmp_path: Path) -> None:
    db = tmp_path / "kb.sqlite3"
    env = dict(os.environ, KB_DATABASE_URL=str(db))
    fifo = tmp_path / "records.jsonl"
    os.mkfifo(fifo)
    kb = subprocess.Popen(
        [sys.executable, "-m", "kb", "import", str(fifo)],
        env=env,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=sigint_as_from_a_terminal,
    )
    with open(fifo, "w") as feed:  # opened: kb is reading; the records go, the end never comes
        feed.write("".join(json.dumps(r) + "\n" for r in corpus_records(5)))
        feed.flush()
        wait_until_open(kb, "kb.sqlite3")
        wait_until_reading_a_pipe(kb)
        kb.send_signal(signal.SIGINT)
        _, stderr = kb.communicate(timeout=30)
    assert kb.returncode == 130
    assert stderr.splitlines() == ["Interrupted: nothing was stored (the import was rolled back)."]
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT count(*) FROM records").fetchone() == (0,)


@needs_proc
def test_ctrl_c_during_a_match_exits_130_with_one_line(tmp_path: Path) -> None:
    db = tmp_path / "kb.sqlite3"
    env = dict(os.environ, KB_DATABASE_URL=str(db))
    subprocess.run([sys.executable, "-m", "kb", "import", "-q", str(SEED)], env=env, check=True)
    kb = subprocess.Popen(
        [sys.executable, "-m", "kb", "match", "-"],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=sigint_as_from_a_terminal,
    )
    assert kb.stdin is not None
    kb.stdin.write(SEED_LINE + "\n")
    kb.stdin.flush()  # and the paste never ends
    wait_until_open(kb, "matcher.sqlite3")
    wait_until_reading_a_pipe(kb)
    kb.send_signal(signal.SIGINT)
    _, stderr = kb.communicate(timeout=30)
    assert kb.returncode == 130
    assert stderr.splitlines() == ["Interrupted."]


def test_ctrl_c_during_the_matcher_build_says_the_records_were_stored(
    invoke: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kb.knowledge import KnowledgeBase

    def interrupted(self: Any, progress: Any = None) -> bool:
        raise KeyboardInterrupt

    monkeypatch.setattr(KnowledgeBase, "build_matcher", interrupted)
    result = invoke("import", str(SEED))
    assert result.exit_code == 130
    assert result.stderr.splitlines()[-1] == (
        "Interrupted: 1 record was stored; the matcher index was not built "
        "(the next `kb match` builds it)."
    )
    monkeypatch.undo()
    assert invoke("match", input=SEED_LINE).exit_code == 0
