"""A big log file's prefilter scan by a helper process (kb.matcher.prescan): the hits it finds in
the whole file are each block's own, a match that takes them answers as one pass does and loads
no shard, and any helper that cannot be trusted (declined, failed, the file changed) is left
aside with the same answers."""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from kb import logtext
from kb.matcher import MatcherIndex, bigfile, build_index, children, prescan, sources_from_records
from kb.matcher.cachefile import CACHE_FILE
from kb.matcher.prefilter import hits_at, pytest_locations
from kb.matcher.rank import MatchReport
from kb.matcher.scan import LogScan
from tests.test_matcher import EXTRA, fixture_records
from tests.test_split import SLOW_EXIT_S, big_log, process_state, reading, report_of

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux") or len(os.sched_getaffinity(0)) < 2,
    reason="the helper is forked only where a big log is cut in two: Linux, two processors",
)


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    cache = tmp_path_factory.mktemp("cache")
    build_index(sources_from_records(fixture_records() + EXTRA), cache, "prescan-rev")
    return cache


def fresh_index(cache_dir: Path) -> MatcherIndex:
    """The cache loaded anew: nothing loaded yet (the shards' databases included)."""
    from kb.matcher import load_index

    index = load_index(cache_dir, "prescan-rev")
    assert index is not None
    return index


@pytest.fixture
def cut_small(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any file is big enough to be cut (16 MB in use), and read in blocks of 8 KB (4 MB):
    many blocks, many edges, carried lines from one to the next."""
    monkeypatch.setattr(bigfile, "SPLIT_MIN_BYTES", 0)
    monkeypatch.setattr(logtext, "BLOCK_BYTES", 8 << 10)


def scanned(index: MatcherIndex, cache_dir: Path, log: Path) -> prescan.Prescanned:
    helper = prescan.start(str(log), cache_file=cache_dir / CACHE_FILE)
    assert helper is not None
    with open(log, "rb") as fh:
        found = helper.result(fh.fileno(), index.revision, index._reader.identity)
    assert found is not None
    return found


def test_the_whole_files_hits_are_each_blocks_own(
    cache_dir: Path, tmp_path: Path, cut_small: None
) -> None:
    """Every block's hits and pytest locations, taken from the helper's scan of the whole file
    by the block's offset, are what scanning the block finds: on every edge of 2 KB blocks."""
    index = fresh_index(cache_dir)
    log = big_log(tmp_path / "big.log", lead=37)
    found = scanned(index, cache_dir, log)
    prefilter = index._prefilter
    prefilter.load()
    blocks = list(logtext.blocks(log.read_bytes(), block_bytes=2 << 10))
    assert len(blocks) > 100
    with_hits = 0
    for block in blocks:
        assert block.data is not None
        if block.offset is None:  # the rest of a line longer than 4 blocks: scanned instead
            continue
        hits, pytest_lines = hits_at(found, block.data, block.offset)
        assert hits == list(prefilter.hits_by_line(block.data))
        assert pytest_lines == pytest_locations(block.data)
        with_hits += bool(hits)
    assert with_hits >= 100  # blocks holding hits, some at their edges


def test_edges_of_the_hits() -> None:
    """A block at offset 10 of 5 bytes holds the hits that end at 11 to 15 (a hit's end is
    one past its last byte; a key holds no newline, so none that ends at 10 or before started
    inside it)."""
    import array

    ends = array.array("q", [10, 11, 15, 16])
    found = prescan.Prescanned(ends, array.array("q", [1, 2, 3, 4]), array.array("q", [10, 15]))
    assert found.hits(10, 5) == [(1, 2), (5, 3)]
    assert found.pytest_ends(10, 5) == [5]
    assert found.hits(100, 5) == [] and found.pytest_ends(0, 5) == []


def test_a_match_taking_the_helpers_hits_answers_as_one_pass_and_loads_no_shard(
    cache_dir: Path, tmp_path: Path, cut_small: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = big_log(tmp_path / "big.log", lead=11)
    one = report_of(fresh_index(cache_dir), log, split_it=False)
    index = fresh_index(cache_dir)
    carried = spy_on_carried_lines(monkeypatch)
    helper = prescan.start(str(log), cache_file=cache_dir / CACHE_FILE)
    assert helper is not None
    report = index.match(log, split=True, prescan=helper)
    assert report.stats["parts"] == 2
    two = report_of_report(report)
    assert two == one
    assert not index._prefilter.loaded  # neither the parts nor this process scanned a block
    # the carried lines' hits came from the helper too, and are what scanning them finds
    assert len(carried) > 20 and all(got is not None for _, got in carried)
    prefilter = fresh_index(cache_dir)._prefilter
    prefilter.load()
    for data, (hits, pytest_lines) in carried:
        assert hits == list(prefilter.hits_by_line(data))
        assert pytest_lines == pytest_locations(data)
    assert sum(bool(hits) for _, (hits, _) in carried) > 5


def spy_on_carried_lines(monkeypatch: pytest.MonkeyPatch) -> list[tuple[bytes, Any]]:
    """Where this process's part keeps each carried stretch's bytes and what LogScan._carried
    made of them (the child's part is not seen)."""
    carried: list[tuple[bytes, Any]] = []
    carried_of = LogScan._carried
    here = os.getpid()

    def spied(self: LogScan, lines: int, data: bytes) -> Any:
        got = carried_of(self, lines, data)
        if os.getpid() == here:
            carried.append((data, got))
        return got

    monkeypatch.setattr(LogScan, "_carried", spied)
    return carried


def report_of_report(report: MatchReport) -> dict[str, Any]:
    """test_split's reading of a report, the parts' figure aside (one pass has none)."""
    read = reading(report)
    read["stats"].pop("parts", None)
    return read


def test_a_file_changed_after_the_helper_read_it_is_scanned_by_the_parts(
    cache_dir: Path, tmp_path: Path, cut_small: None
) -> None:
    log = big_log(tmp_path / "big.log", lead=5)
    helper = prescan.start(str(log), cache_file=cache_dir / CACHE_FILE)
    assert helper is not None
    assert helper.accepted()
    with open(log, "a", encoding="utf-8") as fh:
        fh.write("2026-03-14T08:00:09.000Z INFO  [tick] one line more\n")
    index = fresh_index(cache_dir)
    report = index.match(log, split=True, prescan=helper)
    assert report_of_report(report) == report_of(fresh_index(cache_dir), log, split_it=False)
    assert index._prefilter.loaded  # its hits were left aside: the shards were scanned


def test_another_caches_result_is_left_aside(
    cache_dir: Path, tmp_path: Path, cut_small: None
) -> None:
    log = big_log(tmp_path / "big.log", lead=5)
    index = fresh_index(cache_dir)
    for revision, identity in (
        ("another-rev", index._reader.identity),
        (index.revision, (0, 0)),
        (index.revision, None),
    ):
        helper = prescan.start(str(log), cache_file=cache_dir / CACHE_FILE)
        assert helper is not None
        with open(log, "rb") as fh:
            assert helper.result(fh.fileno(), revision, identity) is None


def test_a_helper_declines_shards_too_big_and_the_match_reads_them_ahead(
    cache_dir: Path, tmp_path: Path, cut_small: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(prescan, "MAX_SHARD_BYTES", 0)
    monkeypatch.setattr(prescan, "PARTIAL_SHARD_BYTES", 0)  # not even its first shard
    log = big_log(tmp_path / "big.log", lead=5)
    helper = prescan.start(str(log), cache_file=cache_dir / CACHE_FILE)
    assert helper is not None and not helper.accepted()
    index = fresh_index(cache_dir)
    prefilter = index._prefilter
    read_ahead: list[bool] = []  # at each load, whether the blobs were being read already
    load = prefilter.load

    def spied(start: int = 0) -> None:
        read_ahead.append(prefilter.reading)
        load(start)

    monkeypatch.setattr(prefilter, "load", spied)
    report = index.match(log, split=True, prescan=helper)
    assert read_ahead[0] and prefilter.loaded  # ahead, while the lines were counted
    assert report_of_report(report) == report_of(fresh_index(cache_dir), log, split_it=False)


def test_a_helper_that_fails_or_dies_gives_no_result(
    cache_dir: Path, tmp_path: Path, cut_small: None
) -> None:
    log = big_log(tmp_path / "big.log", lead=5)
    missing = prescan.start(str(log), cache_file=tmp_path / "none" / CACHE_FILE)
    assert missing is not None and not missing.accepted()
    killed = prescan.start(str(log), cache_file=cache_dir / CACHE_FILE)
    assert killed is not None and killed._pid is not None
    os.kill(killed._pid, signal.SIGKILL)
    with open(log, "rb") as fh:
        index = fresh_index(cache_dir)
        assert killed.result(fh.fileno(), index.revision, index._reader.identity) is None
    assert killed._pid is None  # reaped


def test_a_helper_is_stopped_and_reaped_when_no_longer_wanted(
    cache_dir: Path, tmp_path: Path, cut_small: None
) -> None:
    log = big_log(tmp_path / "big.log", lead=5)
    helper = prescan.start(str(log), cache_file=cache_dir / CACHE_FILE)
    assert helper is not None and helper._pid is not None
    pid = helper._pid
    helper.close()
    helper.close()  # twice: nothing more
    with pytest.raises(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)


def test_a_helper_that_sent_its_hits_is_not_waited_for_yet_is_reaped(
    cache_dir: Path, tmp_path: Path, cut_small: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The helper ends its pipe as soon as its hits are written: the match takes them and goes
    on while the helper exits (here, slowly), and reap_children (run at exit) reaps it."""
    log = big_log(tmp_path / "big.log", lead=5)
    parent, exit_now = os.getpid(), os._exit

    def slow_exit(status: int) -> None:
        if os.getpid() != parent:
            time.sleep(SLOW_EXIT_S)
        exit_now(status)

    monkeypatch.setattr(os, "_exit", slow_exit)
    helper = prescan.start(str(log), cache_file=cache_dir / CACHE_FILE)
    assert helper is not None and helper._pid is not None
    pid = helper._pid
    index = fresh_index(cache_dir)
    started = time.monotonic()
    with open(log, "rb") as fh:
        found = helper.result(fh.fileno(), index.revision, index._reader.identity)
    assert found is not None and time.monotonic() - started < SLOW_EXIT_S
    assert process_state(pid) not in ("", "Z")  # still exiting, its hits taken
    assert pid in children._exiting and helper._pid is None
    children.reap_children()
    with pytest.raises(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)
    assert children._exiting == []


def test_no_helper_for_a_small_file_a_pipe_or_a_missing_file(tmp_path: Path) -> None:
    small = tmp_path / "small.log"
    small.write_text("one line\n")
    assert prescan.start(str(small), cache_file=tmp_path / CACHE_FILE) is None
    assert prescan.start(str(tmp_path / "missing.log"), cache_file=tmp_path / CACHE_FILE) is None
    read_end, write_end = os.pipe()
    try:
        assert prescan.start(f"/dev/fd/{read_end}", cache_file=tmp_path / CACHE_FILE) is None
    finally:
        os.close(read_end)
        os.close(write_end)


def test_the_helper_started_early_is_taken_once_by_its_own_command(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    closed: list[str] = []

    class Fake:
        def __init__(self, name: str) -> None:
            self.name = name

        def close(self) -> None:
            closed.append(self.name)

    monkeypatch.setattr(prescan, "start", lambda path, database=None: Fake(path))
    assert prescan.start_early("kb.db", "big.log")
    assert prescan.take("other.db", "big.log") is None
    assert prescan.take("kb.db", "other.log") is None
    taken = prescan.take("kb.db", "big.log")
    assert isinstance(taken, Fake) and taken.name == "big.log"
    assert prescan.take("kb.db", "big.log") is None
    assert prescan.start_early(None, "left.log")
    prescan.discard()
    assert closed == ["left.log"] and prescan.take(None, "left.log") is None


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--db", "kb.db", "match", "--json", "BIG"], ("kb.db", "BIG")),
        (["--db=kb.db", "match", "BIG", "--format", "json"], ("kb.db", "BIG")),
        (["match", "--top", "5", "BIG"], (None, "BIG")),
        (["match", "SMALL"], None),
        (["match", "-"], None),
        (["match", "BIG", "BIG"], None),  # which one is the log: not guessed
        (["search", "BIG"], None),
        (["--db"], None),
        (["--version"], None),
    ],
)
def test_the_program_reads_a_big_files_match_from_its_command_line(
    args: list[str],
    expected: tuple[str | None, str] | None,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """kb.cli.program's first step: the database option and the big file of `kb match`,
    before click loads; nothing for any other command line."""
    from kb import cli

    big = tmp_path / "big.log"
    big.write_bytes(b"x\n" * 2048)
    small = tmp_path / "small.log"
    small.write_bytes(b"x\n")
    monkeypatch.setattr(bigfile, "SPLIT_MIN_BYTES", 4096)
    calls: list[tuple[str | None, str]] = []
    monkeypatch.setattr(prescan, "start_early", lambda db, path: calls.append((db, path)) or True)
    words = [str(big) if w == "BIG" else str(small) if w == "SMALL" else w for w in args]
    assert cli._start_prescan(words) is (expected is not None)
    if expected is None:
        assert calls == []
    else:
        assert calls == [(expected[0], str(big))]


@pytest.fixture(scope="module")
def sharded_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The same records' cache with their keys in many shards (a dozen keys each), as a
    million records' are in 7."""
    from kb.matcher import build

    cache = tmp_path_factory.mktemp("sharded")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(build, "SHARD_KEYS", 12)
        build_index(sources_from_records(fixture_records() + EXTRA), cache, "prescan-rev")
    return cache


def shard_sizes(cache_dir: Path) -> list[int]:
    return [len(blob) for blob in fresh_index(cache_dir)._reader.shards()]


def test_the_helper_scans_with_every_shard_or_the_first_that_fit_or_declines(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(prescan, "MAX_SHARD_BYTES", 100)
    monkeypatch.setattr(prescan, "PARTIAL_SHARD_BYTES", 50)
    monkeypatch.setattr(prescan, "PARTIAL_LOG_BYTES", 1000)
    leading = prescan.leading_shards
    assert leading([40, 30, 30], 1000) == 3  # 100 in all: every shard
    assert leading([20, 30, 51], 1000) == 2  # over 100: those that fit 50
    assert leading([50, 60], 1000) == 1
    assert leading([20, 30, 51], 2000) == 1  # a log twice as long: those that fit 25
    assert leading([20, 30, 51], 5000) == 0  # fit 10: not even the first, it declines
    assert leading([40, 30, 30], 10**6) == 3  # every shard, however long the log
    assert leading([51, 50], 10) == 0
    assert leading([], 1000) == 0  # nothing to scan with
    assert leading([1] * 300, 1000) == 50
    monkeypatch.setattr(prescan, "MAX_SHARD_BYTES", 1000)
    monkeypatch.setattr(prescan, "PARTIAL_SHARD_BYTES", 1000)
    assert leading([1] * 255, 1000) == 255  # every shard
    assert leading([1] * 300, 1000) == 255  # no more than a byte can number


def test_a_helper_scanning_with_the_first_shards_leaves_the_others_to_the_parts(
    sharded_cache: Path, tmp_path: Path, cut_small: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Over MAX_SHARD_BYTES the helper scans with the first shards that fit: the match loads
    only the others, every block's and carried stretch's hits are the helper's and the parts'
    together, in the order one scan of every shard gives, and the report is one pass's."""
    sizes = shard_sizes(sharded_cache)
    assert len(sizes) >= 4
    monkeypatch.setattr(prescan, "MAX_SHARD_BYTES", 0)
    monkeypatch.setattr(prescan, "PARTIAL_SHARD_BYTES", sum(sizes[:2]))
    monkeypatch.setattr(prescan, "PARTIAL_LOG_BYTES", 1 << 30)
    log = big_log(tmp_path / "big.log", lead=23)
    one = report_of(fresh_index(sharded_cache), log, split_it=False)
    full = fresh_index(sharded_cache)._prefilter
    full.load()

    # every block of 2 KB, its hits taken from the helper's two shards and the others' scan
    index = fresh_index(sharded_cache)
    found = scanned(index, sharded_cache, log)
    assert found.leading == 2
    prefilter = index._prefilter
    with_hits = 0
    for block in logtext.blocks(log.read_bytes(), block_bytes=2 << 10):
        assert block.data is not None
        if block.offset is None:
            continue
        for in_thread in (False, True):
            hits, pytest_lines = prefilter.taken(found, block.data, block.offset, in_thread)
            assert hits == list(full.hits_by_line(block.data))
            assert pytest_lines == pytest_locations(block.data)
        with_hits += bool(hits)
    assert with_hits >= 100
    assert prefilter._first == 2  # the helper's shards were never loaded here

    # the whole match, split in two parts
    index = fresh_index(sharded_cache)
    carried = spy_on_carried_lines(monkeypatch)
    helper = prescan.start(str(log), cache_file=sharded_cache / CACHE_FILE)
    assert helper is not None and helper.accepted() and helper.leading == 2
    report = index.match(log, split=True, prescan=helper)
    assert report.stats["parts"] == 2
    assert report_of_report(report) == one
    assert index._prefilter._first == 2  # neither process loaded the helper's shards
    assert len(carried) > 20 and all(got is not None for _, got in carried)
    for data, (hits, pytest_lines) in carried:
        assert hits == list(full.hits_by_line(data))
        assert pytest_lines == pytest_locations(data)


def test_the_helpers_shards_alone_miss_hits_the_others_find(
    sharded_cache: Path, tmp_path: Path, cut_small: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The check above is not empty: the helper's hits of its two shards are not a block's
    hits, the others' are needed."""
    sizes = shard_sizes(sharded_cache)
    monkeypatch.setattr(prescan, "MAX_SHARD_BYTES", 0)
    monkeypatch.setattr(prescan, "PARTIAL_SHARD_BYTES", sum(sizes[:2]))
    monkeypatch.setattr(prescan, "PARTIAL_LOG_BYTES", 1 << 30)
    log = big_log(tmp_path / "big.log", lead=23)
    index = fresh_index(sharded_cache)
    found = scanned(index, sharded_cache, log)
    data = log.read_bytes()
    full = fresh_index(sharded_cache)._prefilter
    full.load()
    everything = list(full.hits_by_line(data))
    theirs = hits_at(found, data, 0)[0]
    assert theirs and set(theirs) < set(everything)


def test_a_partial_helper_that_fails_leaves_every_shard_to_the_match(
    sharded_cache: Path, tmp_path: Path, cut_small: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its result left aside (the file changed after it read it): the match loads the first
    shards too, after the others it read ahead, and answers as one pass."""
    sizes = shard_sizes(sharded_cache)
    monkeypatch.setattr(prescan, "MAX_SHARD_BYTES", 0)
    monkeypatch.setattr(prescan, "PARTIAL_SHARD_BYTES", sum(sizes[:2]))
    monkeypatch.setattr(prescan, "PARTIAL_LOG_BYTES", 1 << 30)
    log = big_log(tmp_path / "big.log", lead=5)
    helper = prescan.start(str(log), cache_file=sharded_cache / CACHE_FILE)
    assert helper is not None and helper.accepted() and helper.leading == 2
    with open(log, "a", encoding="utf-8") as fh:
        fh.write("2026-03-14T08:00:09.000Z INFO  [tick] one line more\n")
    index = fresh_index(sharded_cache)
    report = index.match(log, split=True, prescan=helper)
    assert report_of_report(report) == report_of(fresh_index(sharded_cache), log, split_it=False)
    assert index._prefilter.loaded and index._prefilter._first == 0
