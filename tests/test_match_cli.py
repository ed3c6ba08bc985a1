"""`kb match` from the command line: formats, exit codes, stdin, and the quick cold path."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from kb import quick
from kb.config import cache_dir_for
from tests.conftest import LIST_MODULES_AT_EXIT, SEED, kb_noting_its_end, seed_record

pytestmark = pytest.mark.databases  # each test on SQLite and on PostgreSQL

LOG = (
    "2026-11-29T10:00:00Z INFO starting worker\n"
    "Traceback (most recent call last):\n"
    '  File "/srv/app/.venv/lib/python3.11/site-packages/vllm/config/attention.py", line 169, '
    "in validate_backend_per_kind_before\n"
    "    raise ValueError(\n"
    "ValueError: Unknown KV cache group kind 'ful_attention' in backend_per_kind. Valid kinds "
    "are: chunked_local_attention, full_attention, mamba, sliding_window.\n"
    "2026-11-29T10:00:01Z INFO shutting down\n"
)
CLEAN = "2026-11-29T10:00:00Z INFO all good\n2026-11-29T10:00:01Z INFO 0 errors\n"


@pytest.fixture
def seeded(invoke: Any) -> Any:
    assert invoke("import", str(SEED)).exit_code == 0
    return invoke


def test_match_text_shows_the_error_its_fix_and_the_did_you_mean(
    seeded: Any, tmp_path: Path
) -> None:
    log = tmp_path / "app.log"
    log.write_text(LOG)
    result = seeded("match", str(log))
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert out.startswith(f"1 known error in {log} (6 lines against 1 record,")
    assert "1. line 5: ValueError: Unknown KV cache group kind 'ful_attention'" in out
    assert "frame:vllm/config/attention.py:169" in out
    assert "captured: kind = 'ful_attention'" in out
    assert "did you mean 'full_attention'?" in out
    assert "What it means" in out and "Solutions\n     1. Use one of the valid kinds" in out
    assert "Example fix" in out and "More: kb show 46a1fcb95e0d367e" in out


def test_match_json_follows_the_contract(seeded: Any) -> None:
    result = seeded("match", "--json", input=LOG)
    assert result.exit_code == 0
    out = json.loads(result.stdout)
    assert set(out) == {"matches", "unmatched", "stats"}
    assert out["unmatched"] == []  # always there, empty when every error line is known
    (match,) = out["matches"]
    assert match["id"] == "46a1fcb95e0d367e" and match["method"] == "pattern"
    assert (match["line"], match["end_line"]) == (5, 5)
    assert match["captures"][0] == "ful_attention"
    assert "pattern" in match["evidence"]
    assert match["record"]["githubUrl"].startswith("https://github.com/vllm-project/vllm/")
    assert {"lines", "records", "candidates", "elapsed_ms"} <= set(out["stats"])


def test_nothing_found_exits_1_and_json_is_still_printed(seeded: Any) -> None:
    result = seeded("match", "--format", "json", input=CLEAN)
    assert result.exit_code == 1
    assert json.loads(result.stdout)["matches"] == []
    text = seeded("match", input=CLEAN)
    assert text.exit_code == 1
    assert text.stdout.startswith("No known error in the pasted text (2 lines")


UNKNOWN = (
    "2026-11-29T10:00:00Z INFO starting worker\n"
    "Traceback (most recent call last):\n"
    '  File "/srv/app/.venv/lib/python3.11/site-packages/vllm/engine/rotor.py", line 88, in spin\n'
    "vllm.errors.RotorError: the KV cache rotor jammed on backend_per_kind\n"
)


def test_a_traceback_no_record_explains_is_listed_with_suggestions_not_left_bare(
    seeded: Any,
) -> None:
    text = seeded("match", input=UNKNOWN)
    assert text.exit_code == 1  # still "no known error"
    out = text.stdout
    assert out.startswith("No known error in the pasted text (4 lines")
    assert "1 error line no record explains" in out.splitlines()[0]
    assert "Not recognised" in out
    assert "line 4: vllm.errors.RotorError: the KV cache rotor jammed" in out
    assert "raised at vllm/engine/rotor.py:88" in out
    assert "maybe 46a1fcb95e0d367e" in out  # kb search finds the seed record by its words
    data = json.loads(seeded("match", "--json", input=UNKNOWN).stdout)
    (entry,) = data["unmatched"]
    assert entry["line"] == 4 and entry["error_class"] == "vllm.errors.RotorError"
    assert entry["frame"] == "vllm/engine/rotor.py:88"
    assert [s["id"] for s in entry["suggestions"]] == ["46a1fcb95e0d367e"]
    markdown = seeded("match", "--format", "markdown", input=UNKNOWN).stdout
    assert "## Not recognised" in markdown and "`vllm/engine/rotor.py:88`" in markdown


def test_markdown_is_ready_for_a_ticket(seeded: Any) -> None:
    out = seeded("match", "--format", "markdown", input=LOG).stdout
    assert out.startswith("# 1 known error in the pasted text")
    assert "## 1. Line 5" in out
    assert "### ValueError: Unknown KV cache group kind" in out


def test_min_score_above_every_match_reports_nothing(seeded: Any) -> None:
    assert seeded("match", "--min-score", "0.999", input=LOG).exit_code == 1


def test_log_text_is_made_safe_before_it_is_printed(seeded: Any) -> None:
    hostile = LOG.replace("ful_attention", "ful_attention\x1b]0;pwned\x07\x1b[2J")
    out = seeded("match", input=hostile).stdout
    assert "\x1b" not in out and "\x07" not in out
    assert "pwned" not in out


def test_missing_log_file_exits_2(seeded: Any, tmp_path: Path) -> None:
    result = seeded("match", str(tmp_path / "nope.log"))
    assert result.exit_code == 2
    assert result.stderr.startswith(f"Error: {tmp_path / 'nope.log'}: cannot read")


def test_cold_quick_path_and_full_path_give_the_same_answer(tmp_path: Path) -> None:
    db = tmp_path / "kb.sqlite3"
    env = dict(os.environ, KB_DATABASE_URL=str(db))
    kb = [sys.executable, "-m", "kb"]
    subprocess.run([*kb, "import", "-q", str(SEED)], env=env, check=True)
    url = f"sqlite:///{db.resolve()}"
    reader = quick.QuickReader.open(url)
    assert reader is not None  # the database qualifies for the quick path
    reader.close()
    quick_run = subprocess.run(
        [*kb, "match", "--json"], input=LOG, text=True, env=env, capture_output=True, check=True
    )
    # Without a cache, nor an index stored in the file, the full path (SQLAlchemy, schema
    # checks) rebuilds it.
    for cached in cache_dir_for(url).glob("*"):
        cached.unlink()
    with sqlite3.connect(db) as conn:
        conn.execute("DELETE FROM matcher_index")
    full_run = subprocess.run(
        [*kb, "match", "--json"], input=LOG, text=True, env=env, capture_output=True, check=True
    )
    assert json.loads(quick_run.stdout)["matches"] == json.loads(full_run.stdout)["matches"]
    assert json.loads(quick_run.stdout)["matches"][0]["id"] == "46a1fcb95e0d367e"


# What a cold `kb match` has no use for: the database layer, the matcher's build and the user
# folders' library (kb.config reads the XDG rules itself), and for a log too small to split the
# C heap's settings (kb.matcher.heap); and, unless a near miss is tried, the near-miss search
# (with kb.patterns, which reads templates).
NOT_ON_THE_COLD_PATH = {
    "sqlalchemy", "alembic", "kb.knowledge", "kb.matcher.build", "platformdirs",
    "kb.matcher.heap",
}  # fmt: skip
NEAR_MISS_SEARCH = {"rapidfuzz", "kb.matcher.fuzzy", "kb.patterns"}


# Calls kb.cli.main() as a wrapper would, and says what main() ended with.
WRAPS_MAIN = (
    "import sys\n"
    "sys.argv = ['kb', *sys.argv[1:]]\n"
    "from kb.cli import main\n"
    "try:\n"
    "    main()\n"
    "except SystemExit as done:\n"
    "    sys.stderr.write(f'after main: {done.code}\\n')\n"
)


def test_a_match_ends_without_the_interpreters_finalization_and_loses_nothing(
    tmp_path: Path, db_url: str
) -> None:
    """kb.cli.program (the `kb` program) and exit_now: `kb match` ends with its output flushed
    whole through a pipe, its exit status (0 found, 1 nothing found, 2 no such file) and its
    atexit handlers run, but without the interpreter freeing every object (the object's
    __del__ never runs); another command ends as Python ends any program, and main() called
    by other code returns to it."""
    env = dict(os.environ, KB_DATABASE_URL=db_url)
    subprocess.run([sys.executable, "-m", "kb", "import", "-q", str(SEED)], env=env, check=True)
    (tmp_path / "app.log").write_text(LOG)
    (tmp_path / "clean.log").write_text(CLEAN)

    def kb(*args: str) -> subprocess.CompletedProcess[str]:
        return kb_noting_its_end(env, *args)

    found = kb("match", "--json", str(tmp_path / "app.log"))
    assert found.returncode == 0, found.stderr
    assert json.loads(found.stdout)["matches"][0]["id"] == "46a1fcb95e0d367e"
    assert found.stderr.splitlines()[-1:] == ["atexit ran"]
    text = kb("match", str(tmp_path / "app.log"))
    assert text.returncode == 0 and "Unknown KV cache group kind" in text.stdout
    assert text.stdout.endswith("\n") and "finalized" not in text.stderr
    clean = kb("match", "--json", str(tmp_path / "clean.log"))
    assert clean.returncode == 1 and json.loads(clean.stdout)["matches"] == []
    assert "finalized" not in clean.stderr and "atexit ran" in clean.stderr
    missing = kb("match", str(tmp_path / "no-such.log"))
    assert missing.returncode == 2 and "cannot read" in missing.stderr
    other = kb("stats", "--json")
    assert other.returncode == 0 and json.loads(other.stdout)
    assert other.stderr.splitlines()[-2:] == ["atexit ran", "finalized"]
    # main() itself never ends the process: a caller's own code after it still runs
    wrapped = subprocess.run(
        [sys.executable, "-c", WRAPS_MAIN, "match", "--json", str(tmp_path / "app.log")],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert wrapped.returncode == 0 and wrapped.stderr.splitlines()[-1:] == ["after main: 0"]


@pytest.mark.parametrize("reworded", [False, True], ids=["exact", "reworded"])
def test_a_cold_match_imports_no_database_layer_no_build_and_no_near_miss_search_unless_tried(
    tmp_path: Path, reworded: bool, db_url: str
) -> None:
    """On SQLite the standard library's sqlite3, on PostgreSQL psycopg alone: no SQLAlchemy."""
    env = dict(os.environ, KB_DATABASE_URL=db_url)
    subprocess.run([sys.executable, "-m", "kb", "import", "-q", str(SEED)], env=env, check=True)
    log = tmp_path / "app.log"
    # a valid kind: no "did you mean" (which needs rapidfuzz)
    exact = LOG.replace("ful_attention", "full_attention")
    # the message alone, reworded: nothing but a near miss can find it
    (line,) = [line for line in exact.splitlines() if line.startswith("ValueError")]
    log.write_text(
        line.replace("Unknown KV cache group kind", "No such KV cache group type")
        if reworded
        else exact
    )
    modules_file = tmp_path / "modules.json"
    run = subprocess.run(
        [
            sys.executable,
            "-c",
            LIST_MODULES_AT_EXIT,
            str(modules_file),
            "match",
            str(log),
            "--json",
        ],
        env=env,
        capture_output=True,
        text=True,
    )
    out = json.loads(run.stdout)
    modules = set(json.loads(modules_file.read_text()))
    tops = {name.split(".")[0] for name in modules} | modules
    assert "kb.matcher.index" in modules  # the quick path loaded the matcher and matched
    assert tops & NOT_ON_THE_COLD_PATH == set()
    if reworded:
        assert out["stats"]["fuzzy_queries"] >= 1
        assert tops >= NEAR_MISS_SEARCH
    else:
        assert [m["id"] for m in out["matches"]] == ["46a1fcb95e0d367e"]
        assert out["stats"]["fuzzy_queries"] == 0
        assert tops & NEAR_MISS_SEARCH == set()
    if "://" not in db_url:  # a SQLite file: psycopg imports subprocess and hashlib itself
        assert "hashlib" not in modules  # OpenSSL's libcrypto, for one digest (kb.config)
        # Text into a pipe is wrapped (kb.terminal), never paged: no pager's process.
        command = [sys.executable, "-c", LIST_MODULES_AT_EXIT, str(modules_file), "match"]
        text = subprocess.run([*command, str(log)], env=env, capture_output=True, text=True)
        assert text.returncode == 0 and text.stdout
        modules = set(json.loads(modules_file.read_text()))
        assert "kb.terminal" in modules and "subprocess" not in modules


def test_match_on_a_database_at_an_old_schema_exits_3(invoke: Any, db_url: str) -> None:
    from alembic import command

    from kb import db
    from kb.config import to_url

    engine = db.make_engine(to_url(db_url))
    at_head = db.current_revision(engine) is not None  # PostgreSQL's come from the template
    with engine.begin() as conn:
        config = db._alembic_config(engine)
        config.attributes["connection"] = conn
        (command.downgrade if at_head else command.upgrade)(config, "0001")
    result = invoke("match", input=LOG)
    assert result.exit_code == 3
    assert "Run `kb db upgrade`" in result.stderr


def test_a_nul_in_a_message_or_code_neither_breaks_the_index_nor_hides_the_record(
    invoke: Any, tmp_path: Path, db_path: Path
) -> None:
    # A message starting with NUL made Hyperscan refuse the whole index (its bindings read a
    # literal up to the NUL): the import exited 1 with a traceback and every match after it.
    # SQLite only (db_path): PostgreSQL refuses such a record at import (tests/test_import.py).
    lines = []
    for number, (message, code) in enumerate(
        [("\x00boom: the widget exploded", None), ("the gadget\x00 melted away", "\x00E42")]
    ):
        record = {
            **seed_record(),
            "id": f"{number:016x}",
            "slug": f"nul-{number}",
            "errorMessage": message,
            "messagePattern": message,
            "errorCode": code,
        }
        lines.append(json.dumps({"record": record}))
    dataset = tmp_path / "nul.jsonl"
    dataset.write_text("\n".join(lines), encoding="utf-8")
    assert invoke("import", str(dataset)).exit_code == 0
    log = tmp_path / "nul.log"
    log.write_bytes(b"start\n\x00boom: the widget exploded\nthe gadget\x00 melted away\n")
    result = invoke("match", str(log), "--json")
    assert result.exit_code == 0, result.output
    found = [(m["line"], m["record"]["id"]) for m in json.loads(result.output)["matches"]]
    assert sorted(found) == [(2, "0000000000000000"), (3, "0000000000000001")]


def test_matching_against_an_empty_knowledge_base_says_what_to_do(invoke: Any) -> None:
    result = invoke("match", input="ValueError: boom\n")
    assert result.exit_code == 1
    assert result.stdout.startswith("No known error in the pasted text (1 line against 0 records")
    assert "The knowledge base is empty: import a dataset first (kb import PATH)." in result.stderr


def test_a_machine_without_the_index_fetches_it_from_the_database_instead_of_building_it(
    seeded: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`kb import` stored the index it built; a teammate whose cache folder is empty gets it
    from the database (SQLite's quick path reads it from the file), never rebuilding it."""
    from kb.matcher import build

    def rebuilt(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("the index was rebuilt instead of fetched")

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "another-machine"))
    monkeypatch.setattr(build, "write_index", rebuilt)
    result = seeded("match", "--json", input=LOG)
    assert result.exit_code == 0, result.output
    assert [m["id"] for m in json.loads(result.stdout)["matches"]] == ["46a1fcb95e0d367e"]


def test_fetching_or_building_the_index_says_so_with_its_true_duration(
    seeded: Any, db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import re
    import time

    from kb.knowledge import KnowledgeBase
    from kb.shared_index import TABLE

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "fetching"))
    lines: list[str] = []
    with KnowledgeBase(db_url) as base:
        started = time.perf_counter()
        base.matcher(status=lines.append)
        took = time.perf_counter() - started
        assert lines[0].startswith("Fetching the matcher index for this revision")
        reported = re.fullmatch(r"Fetched the matcher index in (\d+\.\d) s\.", lines[1])
        assert reported is not None and float(reported[1]) <= took + 0.05
        with base.engine.begin() as conn:  # nothing stored: the next machine builds it
            conn.exec_driver_sql(f"DELETE FROM {TABLE}")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "building"))
    lines.clear()
    with KnowledgeBase(db_url) as base:
        base.matcher(status=lines.append)
        assert lines[0].startswith("Building the matcher index for this revision (1 record;")
        assert re.fullmatch(r"Built the matcher index in \d+\.\d s\.", lines[1])
        with base.engine.connect() as conn:  # and stored it for the next one
            assert conn.exec_driver_sql(f"SELECT count(*) FROM {TABLE}").scalar() == 1


@pytest.mark.parametrize("compressor", ["isal", "zlib"])
def test_a_stored_index_of_many_parts_comes_back_whole_and_in_order(
    db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, compressor: str
) -> None:
    """The parts are compressed on threads: whatever order they finish in, they are stored
    and fetched in the file's order; made by ISA-L (where installed) or by the standard
    library's zlib, the fetching side reads them with the standard library's."""
    import random
    import sys
    import zlib

    import kb.shared_index as shared
    from kb.knowledge import KnowledgeBase
    from kb.sql import SqlAlchemyRunner

    if compressor == "zlib":
        monkeypatch.setitem(sys.modules, "isal", None)  # its import fails, as when missing
        assert shared._compressor() == (zlib.compress, shared.COMPRESSION_LEVEL)
    else:
        from isal import isal_zlib  # a project dependency

        assert shared._compressor() == (isal_zlib.compress, shared.ISAL_LEVEL)
    monkeypatch.setattr(shared, "PART_BYTES", 1000)
    rng = random.Random(7)  # parts that compress unevenly: some finish before earlier ones
    content = (
        b"".join(
            rng.randbytes(1000) if rng.random() < 0.5 else bytes([rng.randrange(256)]) * 1000
            for _ in range(23)
        )
        + b"tail"
    )
    source = tmp_path / "built.sqlite3"
    source.write_bytes(content)
    with KnowledgeBase(db_url) as base:
        with base.engine.begin() as conn:
            assert shared.store(conn, source, "empty", 1)
        with base.engine.connect() as conn:
            assert conn.exec_driver_sql(f"SELECT count(*) FROM {shared.TABLE}").scalar() == 24
            fetched = tmp_path / "fetched"
            fetched.mkdir()
            assert shared.fetch(SqlAlchemyRunner(conn), fetched, "matcher.sqlite3", "empty", 1)
    assert (fetched / "matcher.sqlite3").read_bytes() == content


def _stored_parts(base: Any) -> list[tuple[int, bytes]]:
    from kb.shared_index import TABLE

    with base.engine.connect() as conn:
        rows = conn.exec_driver_sql(f"SELECT part, data FROM {TABLE} ORDER BY part").all()
    return [(int(part), bytes(data)) for part, data in rows]


def test_parts_written_beside_the_cache_file_are_stored_as_compressing_it_would_store_them(
    db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The parts a build beside an import writes (kb.shared_index.write_parts) are what the
    store sends, byte for byte what compressing the file gives, and go once it ran; parts
    made from another state of the file (touched since, replaced by a file of the same size
    and time, or their file cut short) are not used: the file is compressed instead."""
    import os
    import random

    import kb.shared_index as shared
    from kb.knowledge import KnowledgeBase

    monkeypatch.setattr(shared, "PART_BYTES", 1000)
    rng = random.Random(11)
    source = tmp_path / "matcher.sqlite3"
    source.write_bytes(b"".join(rng.randbytes(500) + bytes(500) for _ in range(9)) + b"tail")
    written = shared.parts_written_for(source)
    compressing = shared._parts

    def refused(path: Path, workers: int = 2) -> Any:
        raise AssertionError("compressed the file, with its parts written beside it")

    with KnowledgeBase(db_url) as base:
        with base.engine.begin() as conn:
            assert shared.store(conn, source, "empty", 1)
        expected = _stored_parts(base)
        assert len(expected) == 10
        shared.write_parts(source, written)
        monkeypatch.setattr(shared, "_parts", refused)
        assert shared.store_quietly(base.engine, source, "empty", 1, replace=True)
        assert _stored_parts(base) == expected
        assert not written.exists()
        # parts of another state of the file: compressed again, and the stale parts removed
        monkeypatch.setattr(shared, "_parts", compressing)
        shared.write_parts(source, written)
        os.utime(source, ns=(source.stat().st_atime_ns, source.stat().st_mtime_ns + 10**9))
        assert shared._written_parts(source, written) is None
        shared.write_parts(source, written)  # a new file of the same size and time: a rebuild
        other = source.with_name("rebuilt")
        other.write_bytes(source.read_bytes())
        os.utime(other, ns=(source.stat().st_atime_ns, source.stat().st_mtime_ns))
        os.replace(other, source)
        assert shared._written_parts(source, written) is None
        shared.write_parts(source, written)
        with written.open("r+b") as fh:
            fh.truncate(written.stat().st_size - 1)
        assert shared._written_parts(source, written) is None
        assert shared.store_quietly(base.engine, source, "empty", 1, replace=True)
        assert _stored_parts(base) == expected
        assert not written.exists()


def test_a_slow_step_is_announced_on_a_terminal_only_once_it_takes_a_moment(
    capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import time

    from kb.cli.shared import SlowNotice

    quick_one = SlowNotice()
    quick_one("Fetching ...")
    quick_one("Fetched in 0.0 s.")
    time.sleep(SlowNotice.NOTICE_AFTER_S + 0.2)
    assert capsys.readouterr().err == ""
    slow_one = SlowNotice()
    slow_one("Fetching ...")
    time.sleep(SlowNotice.NOTICE_AFTER_S + 0.2)
    slow_one("Fetched in 0.5 s.")
    assert capsys.readouterr().err == "Fetching ...\nFetched in 0.5 s.\n"


@pytest.mark.skipif(
    not sys.platform.startswith("linux") or len(os.sched_getaffinity(0)) < 2,
    reason="a log is matched in two parts only on Linux with two processors or more",
)
def test_a_big_log_file_is_matched_in_two_parts_with_the_answers_of_one_pass(
    seeded: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`kb match FILE` may match a big file in two parts at once (kb.matcher.split; 16 MB and
    more, lowered here): the same errors, lines and repeats as one pass over the same text
    read from stdin (never split), and the stats say so."""
    from kb.matcher import bigfile

    monkeypatch.setattr(bigfile, "SPLIT_MIN_BYTES", 0)
    chatter = "".join(f"2026-11-29T10:00:{n % 60:02d}Z INFO tick {n}\n" for n in range(700))
    text = (chatter + LOG) * 6 + CLEAN
    log = tmp_path / "big.log"
    log.write_text(text)
    two = json.loads(seeded("match", "--json", str(log)).stdout)
    one = json.loads(seeded("match", "--json", input=text).stdout)
    assert two["stats"]["parts"] == 2 and "parts" not in one["stats"]
    assert two["stats"]["lines"] == one["stats"]["lines"] == text.count("\n")
    assert two["matches"] == one["matches"] and two["unmatched"] == one["unmatched"]
    (found,) = two["matches"]
    assert found["occurrences"] == 6 and len(found["other_lines"]) == 5
