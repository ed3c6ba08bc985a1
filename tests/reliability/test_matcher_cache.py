"""The matcher cache is derived data: a cache folder kb cannot write (no home folder, a file in
its way, a full disk) still lets `kb match` work; a damaged cache is noticed, removed and
rebuilt, never trusted and never left for a person to delete; it reaches the disk before it
takes its name; one process builds it while the others wait and load it; a killed build's
leftovers go with the next build. (Issue 13, defects 7 and 14.)"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kb.config import cache_dir_for
from kb.matcher import CACHE_FILE
from tests.conftest import SEED, corpus_records, seed_record
from tests.reliability.test_exit_codes import wait_until_open

SEED_LINE = (
    "ValueError: Unknown KV cache group kind 'ful_attention' in backend_per_kind. "
    "Valid kinds are: full_attention, sliding_window."
)
SEED_ID = "46a1fcb95e0d367e"


def cache_file(db_path: Path) -> Path:
    return cache_dir_for(f"sqlite:///{db_path.resolve()}") / CACHE_FILE


def matched_ids(result: Any) -> list[str]:
    return [m["id"] for m in json.loads(result.stdout)["matches"]]


@pytest.fixture
def seeded(invoke: Any, db_path: Path) -> Any:
    result = invoke("import", str(SEED))
    assert result.exit_code == 0, result.output
    assert cache_file(db_path).is_file()
    return invoke


# ----------------------------------------------------------------------------- no cache folder


def test_match_works_when_the_cache_folder_cannot_be_made(
    invoke: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file where the cache folder should be: the import says so and stores its records,
    and each match builds the index for itself."""
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))
    imported = invoke("import", str(SEED))
    assert imported.exit_code == 0, imported.stderr
    assert "note: cannot write the matcher cache in " in imported.stderr
    for _ in range(2):
        result = invoke("match", "--json", input=SEED_LINE)
        assert result.exit_code == 0, result.stderr
        assert matched_ids(result) == [SEED_ID]
        assert "the index is built for this run alone" in result.stderr


def test_match_works_when_the_cache_disk_is_full(
    seeded: Any, db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import kb.matcher.build as build

    cache_file(db_path).unlink()
    with sqlite3.connect(db_path) as conn:  # nor a copy in the database to fetch: a build
        conn.execute("DELETE FROM matcher_index")
    real_write = build.write_index
    cache_dir = cache_file(db_path).parent

    def full(sources: Any, where: Path, *args: Any, **kwargs: Any) -> None:
        if Path(where) == cache_dir:
            raise sqlite3.OperationalError("database or disk is full")
        real_write(sources, where, *args, **kwargs)

    monkeypatch.setattr(build, "write_index", full)
    result = seeded("match", "--json", input=SEED_LINE)
    assert result.exit_code == 0, result.stderr
    assert matched_ids(result) == [SEED_ID]
    assert "(database or disk is full); the index is built for this run alone" in result.stderr


def no_home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """HOME unset and no passwd entry: where ~ cannot be expanded."""
    import pwd
    import tempfile

    for name in ("HOME", "XDG_CACHE_HOME", "XDG_DATA_HOME"):
        monkeypatch.delenv(name, raising=False)

    def unknown(uid: int) -> Any:
        raise KeyError(uid)

    monkeypatch.setattr(pwd, "getpwuid", unknown)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))


def test_match_works_without_a_home_folder(
    invoke: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    no_home(monkeypatch, tmp_path)
    assert invoke("import", str(SEED)).exit_code == 0
    result = invoke("match", "--json", input=SEED_LINE)
    assert result.exit_code == 0, result.stderr
    assert matched_ids(result) == [SEED_ID]
    private = tmp_path / f"kb-cache-{os.getuid()}"
    assert list(private.glob(f"*/{CACHE_FILE}"))  # the cache went to a private temp folder
    assert private.stat().st_mode & 0o077 == 0


def test_without_a_home_folder_the_default_database_is_a_clear_error(
    runner: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kb.cli import cli

    no_home(monkeypatch, tmp_path)
    result = runner.invoke(cli, ["stats"])
    assert result.exit_code == 3
    assert result.stderr.splitlines() == [
        "Error: there is no home folder to keep the knowledge base in (HOME is not set)",
        "Name the database with --db PATH or KB_DATABASE_URL.",
    ]


def test_a_cache_folder_planted_by_someone_else_is_not_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kb.config import user_cache_root

    no_home(monkeypatch, tmp_path)
    planted = tmp_path / f"kb-cache-{os.getuid()}"
    planted.mkdir(mode=0o777)
    planted.chmod(0o777)  # anyone could have put a cache in it
    root = user_cache_root()
    assert root != planted and root.parent == tmp_path
    assert root.stat().st_mode & 0o077 == 0


# ----------------------------------------------------------------------------- damaged caches


def damage_tables(path: Path, tables: tuple[str, ...] = ("keys", "patterns", "records")) -> None:
    """Random bytes over the root pages of the tables a match reads lazily: the header, the
    meta table and the prefilter's databases stay intact, so the cache opens as current."""
    with sqlite3.connect(path) as conn:
        roots = dict(conn.execute("SELECT name, rootpage FROM sqlite_master WHERE type='table'"))
        page_size = conn.execute("PRAGMA page_size").fetchone()[0]
    conn.close()
    with open(path, "r+b") as fh:
        for table in tables:
            fh.seek((roots[table] - 1) * page_size)
            fh.write(os.urandom(page_size))


@pytest.mark.parametrize("source", ["stdin", "file"])
def test_a_cache_damaged_past_its_header_is_removed_and_rebuilt(
    seeded: Any, db_path: Path, tmp_path: Path, source: str
) -> None:
    damage_tables(cache_file(db_path))
    log = tmp_path / "app.log"
    log.write_text(SEED_LINE + "\n")
    args = ["match", "--json"] + ([str(log)] if source == "file" else [])
    result = seeded(*args, input=SEED_LINE + "\n")
    assert result.exit_code == 0, result.stderr
    assert matched_ids(result) == [SEED_ID]
    assert "is damaged" in result.stderr and "rebuilding it" in result.stderr
    again = seeded(*args, input=SEED_LINE + "\n")  # the new cache is whole
    assert again.exit_code == 0 and again.stderr == ""
    assert matched_ids(again) == [SEED_ID]


@pytest.mark.parametrize(
    "damage",
    [
        # cut short
        "UPDATE fuzzy_ints SET items = substr(items, 1, length(items) - 1) WHERE list = 'patterns'",
        # a length fewer than templates
        "UPDATE fuzzy_ints SET items = substr(items, 1, length(items) - 4) WHERE list = 'lengths'",
        "DELETE FROM fuzzy_ints WHERE list = 'by_length'",  # a list missing
        "UPDATE fuzzy SET templates = templates || x'0a'",  # a template more than the ends say
        # ends that do not end the text
        "UPDATE fuzzy_ints SET items = zeroblob(length(items)) WHERE list = 'ends'",
        # a place no template has
        "UPDATE fuzzy_ints SET items = x'ffffffff' || substr(items, 5) WHERE list = 'by_length'",
        # not UTF-8 (read when a window needs it)
        "UPDATE fuzzy SET templates = x'ff' || substr(templates, 2)",
    ],
    ids=[
        "cut-patterns",
        "fewer-lengths",
        "no-by-length",
        "extra-template",
        "ends",
        "by-length",
        "not-utf8",
    ],
)
def test_a_damaged_near_miss_row_is_removed_and_rebuilt(
    seeded: Any, db_path: Path, damage: str
) -> None:
    """The near-miss templates' lists are read when a near miss is first tried, their text a
    stretch at a time (kb.matcher.templates): blobs that disagree or cannot be read mean the
    cache is damaged (removed, rebuilt, matched)."""
    with sqlite3.connect(cache_file(db_path)) as conn:
        assert conn.execute(damage).rowcount > 0
    conn.close()
    reworded = SEED_LINE.replace("Unknown KV cache group kind", "No such KV cache group type")
    result = seeded("match", "--json", input=reworded + "\n")
    assert result.exit_code == 0, result.stderr
    assert "is damaged" in result.stderr and "rebuilding it" in result.stderr
    out = json.loads(result.stdout)
    assert [(m["id"], m["method"]) for m in out["matches"]] == [(SEED_ID, "fuzzy")]


def test_the_library_rebuilds_a_damaged_cache_and_matches_a_stream_again(db_path: Path) -> None:
    import io

    from kb import KnowledgeBase

    with KnowledgeBase(str(db_path)) as kb:
        kb.import_sources([str(SEED)])
        kb.build_matcher()
        damage_tables(cache_file(db_path))
        kb._index = None  # as a new process would: load the cache from the file
        report = kb.match(io.BytesIO(SEED_LINE.encode()))
        assert [m.id for m in report.matches] == [SEED_ID]


def test_a_cache_folder_whose_name_reads_as_a_uri_query_is_opened(
    db_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The cache is opened by a file: URI: "?", "#", "%" and a space in its folder's name are
    quoted, not read as a query, a fragment or an escape."""
    import io

    from kb import KnowledgeBase

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "odd ?mode=rw#x %41 name"))
    with KnowledgeBase(str(db_path)) as kb:
        kb.import_sources([str(SEED)])
        kb.build_matcher()
        assert "?mode=rw#x %41" in str(cache_file(db_path))
        kb._index = None  # as a new process would: load the cache from the file
        report = kb.match(io.BytesIO(SEED_LINE.encode()))
        assert [m.id for m in report.matches] == [SEED_ID]


def test_the_shards_are_read_through_a_map_that_is_gone_after_them(db_path: Path) -> None:
    """The shards' blobs come through a memory map of the cache file (faster than SQLite's
    page reads), which is unmapped once they are read, so a long match holds no map."""
    from kb import KnowledgeBase
    from kb.matcher.cache import CacheReader, open_current
    from kb.matcher.prefilter import Prefilter

    with KnowledgeBase(str(db_path)) as kb:
        kb.import_sources([str(SEED)])
        kb.build_matcher()
        revision = kb.revision()
    opened = open_current(cache_file(db_path).parent, revision, "shard_bytes", "kinds")
    assert opened is not None
    con, meta = opened
    reader = CacheReader(con, json.loads(meta["kinds"]))
    sizes = []
    for blob in reader.shards():
        sizes.append(len(blob))
        assert con.execute("PRAGMA mmap_size").fetchone()[0] > 0  # mapped while they are read
    assert sizes and all(sizes)
    assert con.execute("PRAGMA mmap_size").fetchone()[0] == 0
    prefilter = Prefilter(reader, int(meta["shard_bytes"]))
    prefilter.load()
    assert prefilter.loaded
    assert con.execute("PRAGMA mmap_size").fetchone()[0] == 0
    reader.close()


def test_a_damaged_cache_beyond_the_replay_limit_is_removed_and_named(
    seeded: Any, db_path: Path, tmp_path: Path
) -> None:
    """A paste through a pipe longer than what is kept for a second reading cannot be matched
    again: the damaged cache is removed all the same, and the message says to run it again."""
    damage_tables(cache_file(db_path))
    limit = "import kb.matcher.replay as r; r.REPLAY_BYTES = 10; from kb.cli import main; main()"
    run = subprocess.run(
        [sys.executable, "-c", limit, "--db", str(db_path), "match", "-"],
        input=SEED_LINE + "\n",
        capture_output=True,
        text=True,
    )
    assert run.returncode == 3, run.stderr
    assert "is damaged" in run.stderr and "Run the command again" in run.stderr
    assert "Traceback" not in run.stderr
    assert seeded("match", input=SEED_LINE + "\n").exit_code == 0


def stored_copy(db_path: Path) -> bytes:
    """The matcher cache file the database holds for the other machines."""
    import zlib

    with sqlite3.connect(db_path) as conn:
        parts = conn.execute("SELECT data FROM matcher_index ORDER BY format, part").fetchall()
    conn.close()
    return b"".join(zlib.decompress(data) for (data,) in parts)


def store_copy(db_path: Path, content: bytes) -> None:
    """Put `content` in place of the stored cache file, under the same revision and format."""
    import zlib

    with sqlite3.connect(db_path) as conn:
        ((revision, version),) = conn.execute(
            "SELECT DISTINCT revision, format FROM matcher_index"
        ).fetchall()
        conn.execute("DELETE FROM matcher_index")
        conn.execute(
            "INSERT INTO matcher_index (revision, format, part, data) VALUES (?, ?, 0, ?)",
            (revision, version, zlib.compress(content)),
        )
    conn.close()


@pytest.mark.parametrize("damage", ["past its header", "random"])
def test_a_damaged_copy_in_the_database_is_replaced_by_the_rebuild(
    seeded: Any, db_path: Path, damage: str
) -> None:
    """The copy stored for other machines is what a machine without a cache fetches: were it
    damaged, each fetch would bring the damage back. The rebuild after it takes its place."""
    local = cache_file(db_path)
    if damage == "random":
        local.write_bytes(os.urandom(local.stat().st_size))
    else:
        damage_tables(local)
    store_copy(db_path, local.read_bytes())
    for attempt in range(2):  # as on a new machine each time: no cache, the stored copy fetched
        local.unlink(missing_ok=True)
        result = seeded("match", "--json", input=SEED_LINE + "\n")
        assert result.exit_code == 0, result.stderr
        assert matched_ids(result) == [SEED_ID]
        if attempt == 0 and damage != "random":  # a header that does not open is never trusted
            assert "is damaged" in result.stderr and "rebuilding it" in result.stderr
        if attempt == 1:
            assert result.stderr == ""  # the rebuilt copy was stored: nothing damaged now
    assert stored_copy(db_path) == local.read_bytes()


DAMAGE: dict[str, Callable[[Path], None]] = {
    "truncated": lambda path: os.truncate(path, path.stat().st_size // 2),
    "random": lambda path: path.write_bytes(os.urandom(path.stat().st_size)),
    "empty": lambda path: path.write_bytes(b""),
    "all tables": lambda path: damage_tables(
        path, ("shards", "lookup", "keys", "patterns", "records", "files", "codes", "fuzzy")
    ),
}


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_a_truncated_random_or_empty_cache_is_never_trusted(
    seeded: Any, db_path: Path, damage: str
) -> None:
    DAMAGE[damage](cache_file(db_path))
    result = seeded("match", "--json", input=SEED_LINE + "\n")
    assert result.exit_code == 0, result.stderr
    assert matched_ids(result) == [SEED_ID]


def test_the_cache_reaches_the_disk_before_it_takes_its_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Written with SQLite's syncs off: a power cut after an unsynced rename could leave the
    name on a file whose pages never reached the disk."""
    import kb.matcher.build as build
    from kb.matcher import sources_from_records

    events: list[tuple[str, str]] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd: int) -> None:
        events.append(("fsync", os.readlink(f"/proc/self/fd/{fd}")))
        real_fsync(fd)

    def replace(src: Any, dst: Any) -> None:
        events.append(("replace", str(src)))
        real_replace(src, dst)

    monkeypatch.setattr(build.os, "fsync", fsync)
    monkeypatch.setattr(build.os, "replace", replace)
    build.write_index(sources_from_records(corpus_records(3)), tmp_path, "r1")
    kinds = [kind for kind, _ in events]
    assert kinds == ["fsync", "replace", "fsync"]
    assert events[0][1] == events[1][1]  # the temporary file itself, before its rename
    assert events[2][1] == str(tmp_path)  # then the folder, so the rename itself is kept


@pytest.mark.parametrize("sync_fails", [False, True], ids=["synced", "sync-failed"])
def test_the_build_beside_an_import_ends_with_its_file_on_the_disk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sync_fails: bool
) -> None:
    """The child syncs its file on a thread while it writes the word lists and the parts,
    and ends only after the sync: the import renames the file into place after the child
    ended. A sync that fails leaves no file to install and a failed child."""
    import io
    import pickle
    import struct
    from types import SimpleNamespace

    import kb.matcher.background as background
    from kb.records import parse_record

    rows = [parse_record(record).values for record in corpus_records(5)]
    payload = pickle.dumps([tuple(row.get(c) for c in background.COLUMNS) for row in rows])
    stdin = io.BytesIO(struct.pack("<Q", len(payload)) + payload + struct.pack("<Q", 0))
    monkeypatch.setattr(background.sys, "stdin", SimpleNamespace(buffer=stdin))
    synced: list[str] = []
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        if sync_fails:
            raise OSError(5, "Input/output error")
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    path = tmp_path / ".matcher-import-test.part"
    status = background.main([str(path), "r1"])
    if sync_fails:
        assert status == 1 and not path.exists()
    else:
        assert status == 0 and path.exists()
        assert synced == [str(path)]
        assert background.parts_path(path).exists()


def test_the_build_beside_an_import_reads_its_rows_without_the_cyclic_collector(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The child (a process that ends with its build) reads the rows with the cyclic
    collector off (kb.pacing.NO_COLLECTIONS) and ends the build with it on; called in a
    process that goes on, as here, the collector is on after it, also when the rows stopped
    half-way."""
    import gc
    import io
    import pickle
    import struct
    from types import SimpleNamespace

    import kb.matcher.background as background
    import kb.matcher.build as build
    from kb.records import parse_record

    rows = [parse_record(record).values for record in corpus_records(3)]
    payload = pickle.dumps([tuple(row.get(c) for c in background.COLUMNS) for row in rows])
    feed = struct.pack("<Q", len(payload)) + payload + struct.pack("<Q", 0)
    reading: list[bool] = []
    finishing: list[bool] = []
    function, finish = build.raising_function, build._RowWriter.finish

    def watched_function(**kwargs: Any) -> Any:
        reading.append(gc.isenabled())
        return function(**kwargs)

    def watched_finish(self: Any) -> Any:
        finishing.append(gc.isenabled())
        return finish(self)

    monkeypatch.setattr(build, "raising_function", watched_function)
    monkeypatch.setattr(build._RowWriter, "finish", watched_finish)
    assert gc.isenabled()
    monkeypatch.setattr(background.sys, "stdin", SimpleNamespace(buffer=io.BytesIO(feed)))
    assert background.main([str(tmp_path / ".matcher-import-a.part"), "r1"]) == 0
    assert reading == [False] * 3 and finishing == [True]
    assert gc.isenabled()

    cut = io.BytesIO(feed[: len(feed) // 2])  # the import stopped half-way through a batch
    monkeypatch.setattr(background.sys, "stdin", SimpleNamespace(buffer=cut))
    with pytest.raises(EOFError):
        background.main([str(tmp_path / ".matcher-import-b.part"), "r2"])
    assert gc.isenabled()

    def failing_write(self: Any, pending: Any) -> None:
        raise RuntimeError("the build broke between two rows")

    # The build fails while the rows are read (a chunk of one row written at once): the
    # failure's frames hold the unfinished row stream, and still the collector is back.
    monkeypatch.setattr(build, "BUILD_CHUNK", 1)
    monkeypatch.setattr(build._RowWriter, "write", failing_write)
    monkeypatch.setattr(background.sys, "stdin", SimpleNamespace(buffer=io.BytesIO(feed)))
    with pytest.raises(RuntimeError) as failed:
        background.main([str(tmp_path / ".matcher-import-c.part"), "r3"])
    assert failed.value.__traceback__ is not None
    assert gc.isenabled()


# ----------------------------------------------------------------------------- one builder


def test_a_killed_builds_leftover_goes_with_the_next_build(seeded: Any, db_path: Path) -> None:
    leftover = cache_file(db_path).parent / ".matcher-killed.tmp"
    leftover.write_bytes(b"half a cache")  # as young as a running build's
    cache_file(db_path).unlink()
    with sqlite3.connect(db_path) as conn:  # nor a copy in the database to fetch: a build
        conn.execute("DELETE FROM matcher_index")
    assert seeded("match", input=SEED_LINE).exit_code == 0
    assert not leftover.exists()


@pytest.mark.skipif(sys.platform == "win32", reason="flock")
def test_matches_during_a_build_wait_for_it_and_build_nothing(tmp_path: Path) -> None:
    """Holding the build lock as an importer building the index does, while three matches
    start on a revision without a cache: they wait, and then load what the builder wrote."""
    import fcntl

    from kb import KnowledgeBase
    from kb.matcher import write_index
    from kb.matcher.build import sources_from_records

    db = tmp_path / "kb.sqlite3"
    with KnowledgeBase(str(db)) as kb:
        kb.import_sources([str(SEED)])  # a new revision, and no cache for it
        revision = kb.revision()
        cache_dir = kb.cache_dir()
    cache_dir.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, KB_DATABASE_URL=str(db))
    with open(cache_dir / "matcher.lock", "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        log = tmp_path / "app.log"
        log.write_text(SEED_LINE + "\n")
        matches = [
            subprocess.Popen(
                [sys.executable, "-m", "kb", "match", "--json", str(log)],
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for _ in range(3)
        ]
        for process in matches:
            wait_until_open(process, "matcher.lock")
        time.sleep(0.5)
        assert [p.poll() for p in matches] == [None] * 3, "a match did not wait for the build"
        assert not (cache_dir / CACHE_FILE).exists()
        write_index(sources_from_records([seed_record()]), cache_dir, revision)
        built = (cache_dir / CACHE_FILE).stat().st_ino
    for process in matches:
        stdout, stderr = process.communicate(timeout=60)
        assert process.returncode == 0, stderr
        assert [m["id"] for m in json.loads(stdout)["matches"]] == [SEED_ID]
        assert "another kb is building the matcher index; waiting for it" in stderr
    assert (cache_dir / CACHE_FILE).stat().st_ino == built  # loaded, not rebuilt


# ----------------------------------------------------------------------------- beside the import


def cache_rows(path: Path) -> dict[str, list[Any]]:
    """Every table of a cache file, its build time left out."""
    with sqlite3.connect(path) as con:
        tables = [t for (t,) in con.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        rows = {t: con.execute(f"SELECT * FROM {t}").fetchall() for t in tables}
    rows["meta"] = [row for row in rows["meta"] if row[0] != "built_s"]
    return rows


def write_jsonl(path: Path, records: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def test_the_index_built_beside_an_import_is_the_one_a_build_after_it_writes(
    tmp_path: Path, db_path: Path
) -> None:
    from kb.knowledge import KnowledgeBase

    source = write_jsonl(tmp_path / "records.jsonl", corpus_records())
    with KnowledgeBase(str(db_path)) as kb:
        report = kb.import_sources([str(source)], build_matcher=True)
        assert report.inserted == len(corpus_records())
        beside = cache_rows(cache_file(db_path))  # written by the child, installed after commit
        assert dict(beside["meta"])["revision"] == kb.revision()
        kb.matcher(rebuild=True)
        assert cache_rows(cache_file(db_path)) == beside
    assert not list(cache_file(db_path).parent.glob(".matcher-import-*"))


def test_a_build_that_remembers_the_patterns_it_prepared_writes_what_one_without_writes(
    tmp_path: Path, db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """kb.matcher.build keeps the latest prepared (messagePattern, errorMessage) pairs: an
    error raised in several places is prepared once. Records repeating pairs, near and far
    apart (past the memory: 4 kept here), make the same cache file as a build that keeps
    none."""
    from kb.knowledge import KnowledgeBase
    from kb.matcher import build

    records = corpus_records()

    def copies(rows: list[dict[str, Any]], first: int) -> list[dict[str, Any]]:
        return [dict(r, id=f"{first + i:016x}") for i, r in enumerate(rows)]

    near = copies(records[4::-1], 0)  # the 4 latest pairs remembered (records 1-4), then 0
    far = copies(records[:3], 100)  # forgotten by then
    again = near + far
    source = write_jsonl(tmp_path / "records.jsonl", [*records[:5], *near, *records[5:], *far])
    prepared = build._prepared
    calls: list[str] = []

    def counted(message_pattern: str, error_message: str) -> Any:
        calls.append(message_pattern)
        return prepared(message_pattern, error_message)

    monkeypatch.setattr(build, "_prepared", counted)
    monkeypatch.setattr(build, "PREPARED_MEMO", 4)
    with KnowledgeBase(str(db_path)) as kb:
        kb.import_sources([str(source)])
        kb.matcher(rebuild=True)
        remembered = cache_rows(cache_file(db_path))
        assert len(remembered["records"]) == len(records) + len(again)
        assert len(calls) == len(records) + 1 + len(far)  # four of the near copies found
        monkeypatch.setattr(build, "PREPARED_MEMO", 0)
        kb.matcher(rebuild=True)
        assert cache_rows(cache_file(db_path)) == remembered


def test_the_build_beside_an_import_compresses_the_copy_the_database_stores(
    invoke: Any, db_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`kb import` stores the parts its build's child compressed (kb.shared_index), not its
    own compression of the file: the stored copy is the installed cache file, and nothing of
    the child's is left beside it."""
    import kb.shared_index as shared

    def refused(path: Path, workers: int = 2) -> Any:
        raise AssertionError("the import compressed the cache file itself")

    monkeypatch.setattr(shared, "_parts", refused)  # in this process; the child is its own
    source = write_jsonl(tmp_path / "records.jsonl", corpus_records())
    result = invoke("import", str(source))
    assert result.exit_code == 0, result.output
    assert stored_copy(db_path) == cache_file(db_path).read_bytes()
    folder = cache_file(db_path).parent
    assert not shared.parts_written_for(cache_file(db_path)).exists()
    assert not list(folder.glob(".matcher-import-*"))


def test_a_first_load_stores_the_copy_of_its_build_in_its_own_transaction(
    tmp_path: Path, db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The build beside a first load is waited for before the import commits, and the copy
    of its file the database keeps goes into the import's own transaction: it is there, the
    installed file byte for byte, when the import returns (before any store after it). A store
    that fails there after writing a part is rolled back alone: the records are committed,
    no part is left, and the store after the commit (build_matcher) keeps the copy."""
    import kb.shared_index as shared
    from kb.knowledge import KnowledgeBase

    records = corpus_records()
    source = write_jsonl(tmp_path / "records.jsonl", records)
    with KnowledgeBase(str(db_path)) as kb:
        kb.import_sources([str(source)], build_matcher=True)
        assert stored_copy(db_path) == cache_file(db_path).read_bytes()
        assert not shared.parts_written_for(cache_file(db_path)).exists()

    other = tmp_path / "other.sqlite3"
    reading = shared._read_parts

    def one_then_broken(parts: Path, places: list[tuple[int, int]]) -> Any:
        yield next(reading(parts, places))
        raise OSError("the disk went away")

    monkeypatch.setattr(shared, "_read_parts", one_then_broken)
    with KnowledgeBase(str(other)) as kb:
        report = kb.import_sources([str(source)], build_matcher=True)
        assert report.inserted == kb.count() == len(records)
        assert stored_copy(other) == b""  # the part written before the failure rolled back
        monkeypatch.setattr(shared, "_read_parts", reading)
        assert not kb.build_matcher()  # built beside the import already: only stored now
        assert stored_copy(other) == cache_file(other).read_bytes()


def test_the_pipe_to_the_build_beside_an_import_holds_a_whole_batch(tmp_path: Path) -> None:
    """The import goes on while the child works on the batch before (kb.matcher.background):
    a batch of 1,000 corpus records' rows fits in the pipe, where Linux's default 64 KB
    made the import wait at every batch."""
    fcntl = pytest.importorskip("fcntl")
    import itertools

    from kb.matcher.background import PIPE_MAX_SIZE, BackgroundBuild
    from kb.records import parse_record

    if not hasattr(fcntl, "F_GETPIPE_SZ") or not PIPE_MAX_SIZE.exists():
        pytest.skip("pipes are resized on Linux only")
    limit = int(PIPE_MAX_SIZE.read_text())
    # 1,000 rows as the import stores them, each its own copy (pickle writes a repeat once)
    records = itertools.islice(itertools.cycle(corpus_records()), 1000)
    rows = [parse_record(json.loads(json.dumps(r))).values for r in records]
    build = BackgroundBuild(tmp_path / "cache")
    sent: list[bytes] = []
    try:
        assert build._child is not None and build._child.stdin is not None
        size = fcntl.fcntl(build._child.stdin.fileno(), fcntl.F_GETPIPE_SZ)
        build._write = lambda data, _meanwhile=None: sent.append(data)  # type: ignore[method-assign]
        build.rows(rows)
    finally:
        build.abandon()
    assert size == min(1 << 20, limit)
    if limit >= 1 << 20:
        assert size > len(sent[0]) > 64 << 10


def test_the_rows_sent_to_the_build_beside_an_import(tmp_path: Path) -> None:
    """What the child gets for each row: its COLUMNS in order, the documentation cut to
    DOC_CHARS; a row without some column (not an import's) travels with None there."""
    import pickle
    import struct

    from kb.matcher.background import COLUMNS, DOC_CHARS, BackgroundBuild

    whole = {column: f"{column}-value" for column in COLUMNS} | {"line_number": 7, "x": 1}
    long_doc = whole | {"documentation": "d" * (DOC_CHARS + 50)}
    no_doc = whole | {"documentation": None}
    build = BackgroundBuild(tmp_path / "cache")
    sent: list[bytes] = []
    try:
        build._write = lambda data, _meanwhile=None: sent.append(data)  # type: ignore[method-assign]
        build.rows([whole, long_doc, no_doc])
        build.rows([{"id": "a" * 16, "documentation": "doc"}])
    finally:
        build.abandon()
    batches = []
    for data in sent:
        (size,) = struct.unpack("<Q", data[:8])
        assert size == len(data) - 8
        batches.append(pickle.loads(data[8:]))
    expected = tuple(whole[column] for column in COLUMNS)
    assert batches[0] == [
        expected,
        (*expected[:-1], "d" * DOC_CHARS),
        (*expected[:-1], None),
    ]
    assert batches[1] == [("a" * 16, *[None] * (len(COLUMNS) - 2), "doc")]


def _stopped_build(tmp_path: Path) -> tuple[Any, list[dict[str, Any]]]:
    """A build beside an import whose child is stopped (SIGSTOP: it reads nothing), and a
    batch of rows of about 1.5 MB (each text its own: pickle writes a repeated one once)."""
    import signal

    from kb.matcher.background import BackgroundBuild

    if not hasattr(signal, "SIGSTOP"):
        pytest.skip("no SIGSTOP here")
    build = BackgroundBuild(tmp_path / "cache")
    assert build._child is not None
    build._child.send_signal(signal.SIGSTOP)
    rows = [{"id": f"{i:016x}", "documentation": f"{i:06d}" + "x" * 1500} for i in range(1000)]
    return build, rows


def test_the_import_goes_on_while_the_build_beside_it_is_behind(tmp_path: Path) -> None:
    """Batches are written by a thread of their own (kb.matcher.background): with the child
    stopped, the import still hands over more rows than its pipe holds, and giving the build
    up then neither waits for the child nor leaves anything behind. (Liveness, not speed: each
    step has a minute.)"""
    import threading

    from kb.matcher.background import QUEUE_BATCHES

    build, rows = _stopped_build(tmp_path)

    def send() -> None:
        for _ in range(QUEUE_BATCHES // 2):  # 8 batches: 12 MB, past any pipe
            build.rows(rows)

    sending = threading.Thread(target=send, daemon=True)
    sending.start()
    sending.join(60)
    stopped_ok = not sending.is_alive()
    giving_up = threading.Thread(target=build.abandon, daemon=True)
    giving_up.start()
    giving_up.join(60)
    assert stopped_ok, "the import waited for a child that was not reading"
    assert not giving_up.is_alive(), "giving the build up waited for the stopped child"
    assert not build.usable and not build.path.exists()
    assert not list((tmp_path / "cache").glob(".matcher-import-*"))


def test_an_import_about_to_commit_waits_a_bounded_time_for_the_build_beside_it(
    tmp_path: Path, db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A build whose child does not end (stopped here, reading nothing, with rows queued for
    it) is waited for COMMIT_WAIT_SECONDS before the import commits, not longer: nothing of
    it goes into the import's transaction, which then commits as before (the build is waited
    for, or given up, after it)."""
    import kb.matcher.background as background
    from kb.knowledge import KnowledgeBase
    from kb.shared_index import TABLE

    monkeypatch.setattr(background, "COMMIT_WAIT_SECONDS", 0.5)
    build, rows = _stopped_build(tmp_path)
    try:
        build.rows(rows)
        build.rows(rows)  # more than its pipe holds: the sender is still writing
        with KnowledgeBase(str(db_path)) as kb, kb.engine.begin() as conn:
            started = time.monotonic()
            build.committing(conn)
            waited = time.monotonic() - started
            assert conn.exec_driver_sql(f"SELECT count(*) FROM {TABLE}").scalar() == 0
        assert 0.4 < waited < 30, waited  # the bound, not the child's end (liveness: 30 s)
        assert build.usable and build._child is not None and build._child.poll() is None
    finally:
        build.abandon()
    assert not build.path.exists()


def test_the_import_works_on_while_the_build_beside_it_is_a_full_queue_behind(
    tmp_path: Path,
) -> None:
    """With the queue to the child full, `rows` calls the import's own work (`meanwhile`) for
    as long as it has some, and only then waits for a place; giving the build up then lets
    that wait end. (Liveness, not speed: each step has a minute.)"""
    import threading

    from kb.matcher.background import QUEUE_BATCHES

    build, rows = _stopped_build(tmp_path)
    calls: list[int] = []

    def meanwhile() -> bool:
        calls.append(len(calls))
        return len(calls) <= 3  # work three times, then none

    def send() -> None:
        for _ in range(QUEUE_BATCHES + 4):  # past the queue, the pipe and the write under way
            build.rows(rows, meanwhile)

    sending = threading.Thread(target=send, daemon=True)
    sending.start()
    deadline = time.monotonic() + 60
    while len(calls) < 4 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert calls == [0, 1, 2, 3], "the import waited without doing its own work first"
    time.sleep(0.2)
    assert sending.is_alive(), "the import did not wait once it had nothing to do"
    build.abandon()
    sending.join(60)
    assert not sending.is_alive(), "giving the build up left the import waiting"
    assert not build.usable and not build.path.exists()


def test_the_import_ends_its_rows_without_waiting_for_the_build_to_read_them(
    tmp_path: Path,
) -> None:
    """`end` hands the end over and returns while the child has not read the batches queued
    before it (the sender's thread writes them); a row sent after the end gives the build up,
    and nothing is left running or behind. (Liveness, not speed: each step has a minute.)"""
    import threading

    from kb.matcher.background import QUEUE_BATCHES

    build, rows = _stopped_build(tmp_path)
    for _ in range(QUEUE_BATCHES // 2):  # 12 MB, past any pipe: the thread is still writing
        build.rows(rows)
    ending = threading.Thread(target=build.end, daemon=True)
    ending.start()
    ending.join(60)
    assert not ending.is_alive(), "the end waited for a child that was not reading"
    assert build.usable and build._sender is not None and build._sender.finishing
    build.rows(rows)  # rows after the end do not describe the table: the build is given up
    assert not build.usable and not build.path.exists()
    assert build._child is None and build._sender is None
    assert not list((tmp_path / "cache").glob(".matcher-import-*"))


def test_a_build_whose_feeding_thread_cannot_start_leaves_nothing_running_or_behind(
    invoke: Any, db_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A process out of threads: the build beside the import is given up at once (its
    child stopped, its file removed) and `kb import` builds the index after the import."""
    import threading

    from kb.matcher.background import BackgroundBuild

    children: list[Any] = []
    popen = subprocess.Popen

    def recorded(*args: Any, **kwargs: Any) -> Any:
        children.append(popen(*args, **kwargs))
        return children[-1]

    start = threading.Thread.start

    def no_thread(self: threading.Thread) -> None:
        if self.name == "kb-build-rows":
            raise RuntimeError("can't start new thread")
        start(self)

    monkeypatch.setattr(subprocess, "Popen", recorded)
    monkeypatch.setattr(threading.Thread, "start", no_thread)
    with pytest.raises(OSError, match="cannot start the thread"):
        BackgroundBuild(tmp_path / "cache")
    assert len(children) == 1 and children[0].poll() is not None
    assert not list((tmp_path / "cache").glob(".matcher-import-*"))
    monkeypatch.setattr(subprocess, "Popen", popen)
    result = invoke("import", str(SEED))
    assert result.exit_code == 0, result.output
    assert matched_ids(invoke("match", "--json", input=SEED_LINE)) == [SEED_ID]
    assert not list(cache_file(db_path).parent.glob(".matcher-import-*"))


def test_the_words_table_lists_every_word_of_every_near_miss_template_by_its_place(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The words are listed chunk by chunk as templates come in (kb.matcher.build); read back
    against the fuzzy row itself (written chunk by chunk too), with chunks of three records
    and every record twice (repeated templates, in later chunks, take no place of their own).
    Each template comes with a pattern of a record that has it."""
    import dataclasses

    import kb.matcher.build as build
    from kb.matcher.cache import CacheReader, words_of

    monkeypatch.setattr(build, "BUILD_CHUNK", 3)
    sources = list(build.sources_from_records(corpus_records()))
    again = [dataclasses.replace(src, id=src.id[::-1]) for src in sources]
    path = tmp_path / "cache.sqlite3"
    build.write_cache_file(iter(sources + again), path, "r1")
    con = sqlite3.connect(path)
    try:
        reader = CacheReader(con, [], path=path, identity=None)
        store = reader.fuzzy_templates()
        # the text is stored by length: each template back in its place
        by_length = store.texts(0, len(store))
        templates = [""] * len(store)
        for position, template in enumerate(by_length):
            templates[store.place(position)] = template
        patterns = store.patterns
        assert [len(template) for template in by_length] == sorted(map(len, by_length))
        assert list(store.lengths) == [len(template) for template in templates]
        words = {w: (df, rows) for w, df, rows in con.execute("SELECT w, df, rows FROM words")}
        reader.load_patterns(patterns)
        for template, pattern in zip(templates, patterns, strict=True):
            records = reader.pattern(pattern).records
            reader.load_records(records)
            messages = {reader.record(rec_idx).error_message for rec_idx in records}
            assert template in {build.fuzzy_template(message) for message in messages}
    finally:
        con.close()
    assert len(templates) == len(set(templates)) > 20
    expected: dict[str, list[int]] = {}
    for place, template in enumerate(templates):
        for word in sorted(set(words_of(template))):
            expected.setdefault(word, []).append(place)
    # WORD_LISTED_MIN is far above these counts: every word has its list
    assert words == {
        w: (len(places), json.dumps(places, separators=(",", ":")))
        for w, places in expected.items()
    }


def test_an_import_into_a_knowledge_base_with_records_builds_after_it(
    seeded: Any, db_path: Path, tmp_path: Path
) -> None:
    source = write_jsonl(tmp_path / "more.jsonl", corpus_records(10))
    assert seeded("import", str(source)).exit_code == 0
    meta = dict(cache_rows(cache_file(db_path))["meta"])
    assert meta["records"] == "11"  # the seed record and the ten
    assert not list(cache_file(db_path).parent.glob(".matcher-import-*"))


def test_a_failed_build_beside_the_import_is_built_again_after_it(
    invoke: Any, db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import kb.matcher.background as background

    monkeypatch.setattr(background.BackgroundBuild, "_wait", lambda self: False)
    result = invoke("import", str(SEED))
    assert result.exit_code == 0, result.output
    assert matched_ids(invoke("match", "--json", input=SEED_LINE)) == [SEED_ID]
    assert not list(cache_file(db_path).parent.glob(".matcher-import-*"))


def test_a_rolled_back_import_leaves_no_build_beside_it(
    tmp_path: Path, db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kb.ingest.importer import Importer
    from kb.knowledge import KnowledgeBase

    def fail(self: Importer) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(Importer, "finish", fail)
    source = write_jsonl(tmp_path / "records.jsonl", corpus_records())
    with KnowledgeBase(str(db_path)) as kb:
        with pytest.raises(KeyboardInterrupt):
            kb.import_sources([str(source)], build_matcher=True)
        assert kb.count() == 0
        assert not cache_file(db_path).exists()
        assert not list(cache_file(db_path).parent.glob(".matcher-import-*"))
