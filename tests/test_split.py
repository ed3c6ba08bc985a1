"""A big log file matched in two parts at once (kb.matcher.split): the same report as one pass."""

from __future__ import annotations

import io
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any, NoReturn

import pytest

from kb.logtext import blocks
from kb.matcher import (
    MatcherIndex,
    bigfile,
    build_index,
    children,
    load_index,
    sources_from_records,
    split,
)
from kb.matcher.cache import CacheReader
from kb.matcher.rank import MatchReport
from kb.matcher.scan import LogScan
from tests.test_matcher import EXTRA, FIXTURES, NOISE, fixture_records

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux") or len(os.sched_getaffinity(0)) < 2,
    reason="kb.matcher.split forks only on Linux with two processors or more",
)

UNKNOWN = "2026-03-14T08:00:03.000Z ERROR [worker] job 77 failed: quota of widgets exceeded\n"


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> MatcherIndex:
    cache = tmp_path_factory.mktemp("cache")
    return build_index(sources_from_records(fixture_records() + EXTRA), cache, "split-rev")


def big_log(path: Path, lead: int) -> Path:
    """paste.log's errors (a traceback, an axios error, a Go panic...) again and again among
    chatter, with `lead` lines of chatter first so that the middle falls elsewhere; an error no
    record explains, repeated, so unexplained lines fold across the cut too."""
    paste = (FIXTURES / "paste.log").read_text(encoding="utf-8")
    parts = [NOISE * (lead // 4)]
    for n in range(24):
        parts.append(paste)
        parts.append(NOISE * (40 + n))
        parts.append(UNKNOWN)
    path.write_text("".join(parts), encoding="utf-8")
    return path


FILLER = "2026-03-14T08:00:00.000Z INFO  [tick] ok\n"


def cut_inside(path: Path, paste_line: int) -> tuple[Path, int]:
    """paste.log once among chatter, with more chatter in front so that the cut falls exactly
    before its line `paste_line`: inside a traceback, or between its frames and its message.
    Each error occurs once, so its one reading is what the report shows. Returns the log and
    the cut's line number."""
    paste = (FIXTURES / "paste.log").read_bytes()
    body = (NOISE * 400).encode() + paste + (NOISE * 1200 + UNKNOWN * 3).encode()
    start = body.index(paste)
    target = start + sum(len(line) for line in paste.splitlines(keepends=True)[: paste_line - 1])
    # X bytes of chatter in front move the text by X and the middle by X / 2: the middle then
    # falls on the newline that ends the line above the target, and the cut right after it
    lead = len(body) - 2 * target + 2
    assert lead > 2 * len(FILLER)
    fillers, extra = divmod(lead, len(FILLER))
    padded = FILLER[:-1] + "x" * extra + "\n"
    path.write_bytes((FILLER * (fillers - 1) + padded).encode() + body)
    return path, fillers + body[:target].count(b"\n") + 1


def report_of(index: MatcherIndex, log: Path, *, split_it: bool) -> dict[str, Any]:
    return reading(index.match(log, split=split_it))


def reading(report: MatchReport) -> dict[str, Any]:
    """A report's matches, unexplained lines and figures, but for the timing and the work done
    around the cut twice."""
    stats = dict(report.stats)
    for figure in ("elapsed_ms", "candidates", "verified"):
        stats.pop(figure)
    return {
        "matches": [m.to_dict() for m in report.matches],
        "unmatched": [u.to_dict() for u in report.unmatched],
        "stats": stats,
    }


@pytest.fixture
def small_split(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bigfile, "SPLIT_MIN_BYTES", 0)


@pytest.mark.parametrize("lead", [0, 37, 250, 411, 1203])
def test_a_log_matched_in_two_parts_reports_what_one_pass_does(
    index: MatcherIndex, tmp_path: Path, small_split: None, lead: int
) -> None:
    """Every field of every match (lines, other lines, occurrences folded across the cut,
    alternatives, scores) and of every unexplained line, and the lines read: the cut falls in
    a different place of the repeated errors for each `lead`."""
    log = big_log(tmp_path / "big.log", lead)
    one = report_of(index, log, split_it=False)
    two = report_of(index, log, split_it=True)
    assert two["stats"].pop("parts") == 2
    assert "parts" not in one["stats"]
    assert len(one["matches"]) >= 3 and max(m["occurrences"] for m in one["matches"]) >= 20
    assert one["unmatched"] and one["unmatched"][0]["occurrences"] == 24
    assert two == one


@pytest.mark.parametrize("paste_line", [5, 9, 10, 133, 136, 137, 195, 207])
def test_a_cut_inside_a_traceback_reports_what_one_pass_does(
    index: MatcherIndex, tmp_path: Path, small_split: None, paste_line: int
) -> None:
    """The cut right between a traceback's frames, or between its last frame and its message
    (paste.log's three tracebacks end on lines 9, 136 and 207): the part that owns the message
    still reads the frames above it, as one pass does."""
    log, line = cut_inside(tmp_path / "big.log", paste_line)
    with open(log, "rb") as fh:
        found = split.plan(fh)
    assert found is not None and found.cut_line == line
    one = report_of(index, log, split_it=False)
    two = report_of(index, log, split_it=True)
    assert two["stats"].pop("parts") == 2
    assert two == one


def test_the_cut_is_a_line_end_with_the_overlap_on_both_sides(tmp_path: Path) -> None:
    assert_cut_well(big_log(tmp_path / "big.log", 0))


def assert_cut_well(log: Path) -> None:
    """The plan of `log` cuts it at a line end, OVERLAP_LINES whole lines each side, with the
    line numbers the file itself gives."""
    data = log.read_bytes()
    with open(log, "rb") as fh, pytest.MonkeyPatch.context() as mp:
        mp.setattr(bigfile, "SPLIT_MIN_BYTES", 0)
        found = split.plan(fh)
    assert found is not None
    assert data[found.cut - 1 : found.cut] == b"\n"
    assert found.cut_line == data[: found.cut].count(b"\n") + 1
    assert data[found.head : found.cut].count(b"\n") == split.OVERLAP_LINES
    assert data[found.cut : found.tail].count(b"\n") == split.OVERLAP_LINES
    assert found.head_line == found.cut_line - split.OVERLAP_LINES
    assert data[found.head - 1 : found.head] == b"\n"


def test_a_parts_reads_end_at_line_ends_and_give_back_its_bytes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A part's file is read in blocks that end at their last line end (so none is copied to
    be cut there), except where the probed end holds none: a line longer than the probe
    (here 1,500 bytes against 256) ends a read mid-line, as every read did before. Read
    whole, the part is its bytes, and its lines are those of the same bytes read at once."""
    monkeypatch.setattr(split, "LINE_END_PROBE", 256)
    lines = [f"{n:05d} " + "w" * (n * 37 % 190) for n in range(1, 3001)]
    lines[1200] = "long " + "z" * 1500
    data = ("\n".join(lines) + "\n").encode()
    path = tmp_path / "part.log"
    path.write_bytes(data)
    start, end = 1234, len(data) - 777
    size = 4096
    with open(path, "rb") as fh:
        part = split._range(fh.fileno(), start, end)
        reads = list(iter(lambda: part.read(size), b""))
        whole = [
            line for b in blocks(split._range(fh.fileno(), start, end), size) for line in b.lines
        ]
    assert b"".join(reads) == data[start:end]
    assert all(len(read) <= size for read in reads)
    at = start
    for read in reads[:-1]:
        probed = data[at + size - 256 : at + size]
        assert read.endswith(b"\n") == (b"\n" in probed)
        at += len(read)
    assert any(not read.endswith(b"\n") for read in reads[:-1])  # the long line's
    assert whole == [line for b in blocks(data[start:end], size) for line in b.lines]


@pytest.mark.parametrize("width", [40, 700])
def test_the_overlap_is_found_past_the_first_read_around_the_cut(
    tmp_path: Path, width: int
) -> None:
    """Lines long enough that OVERLAP_LINES of them do not fit in the first, short read above
    and below the cut (700 bytes: 1,000 lines are 700 KB): the plan reads further."""
    log = tmp_path / "wide.log"
    lines = [f"{n:06d} " + "x" * (width - 8) for n in range(1, 4001)]
    log.write_bytes(("\n".join(lines) + "\n").encode())
    assert (width * split.OVERLAP_LINES > split.READ_SIZES[0]) == (width == 700)
    assert_cut_well(log)


def test_a_failed_child_leaves_its_part_to_the_parent(
    index: MatcherIndex, tmp_path: Path, small_split: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = big_log(tmp_path / "big.log", 37)
    one = report_of(index, log, split_it=False)

    def dies(*_args: Any) -> None:
        os._exit(1)

    monkeypatch.setattr(split, "_child", dies)
    matched: list[int] = []
    run = LogScan.run

    def counted(scan: LogScan, blocks: Any) -> None:
        matched.append(os.getpid())
        run(scan, blocks)

    monkeypatch.setattr(LogScan, "run", counted)
    two = report_of(index, log, split_it=True)
    assert two["stats"].pop("parts") == 2
    assert two == one
    assert matched[-2:] == [os.getpid(), os.getpid()]  # both parts, here


def test_a_child_that_cannot_reopen_the_cache_leaves_its_part_to_the_parent(
    index: MatcherIndex, tmp_path: Path, small_split: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The child reads the cache through a connection of its own (SQLite may seek the shared
    descriptor); a cache replaced since it was opened cannot be reopened: the parent does it."""
    log = big_log(tmp_path / "big.log", 250)
    one = report_of(index, log, split_it=False)
    monkeypatch.setattr(CacheReader, "reopened", lambda _self: False)
    two = report_of(index, log, split_it=True)
    assert two["stats"].pop("parts") == 2
    assert two == one


def test_an_error_in_the_parent_kills_and_reaps_the_child(
    index: MatcherIndex, tmp_path: Path, small_split: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = big_log(tmp_path / "big.log", 0)
    parent = os.getpid()
    run = LogScan.run
    forked: list[int] = []
    fork = os.fork

    def fails_here(scan: LogScan, blocks: Any) -> None:
        if os.getpid() == parent:
            raise RuntimeError("boom")
        run(scan, blocks)

    def recorded() -> int:
        pid = fork()
        if pid:
            forked.append(pid)
        return pid

    monkeypatch.setattr(LogScan, "run", fails_here)
    monkeypatch.setattr(os, "fork", recorded)
    with pytest.raises(RuntimeError, match="boom"):
        index.match(log, split=True)
    (child,) = forked
    with pytest.raises(ChildProcessError):
        os.waitpid(child, os.WNOHANG)  # reaped already
    assert not Path(f"/proc/{child}").exists()  # and gone, not left running


# How long each child of the test below takes to exit after writing its part.
SLOW_EXIT_S = 3.0


def test_a_childs_exit_is_not_waited_for_yet_every_child_is_reaped(
    index: MatcherIndex, tmp_path: Path, small_split: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The parent folds the parts while a child that wrote its part exits (here, slowly); the
    next split match reaps it once it is gone, and reap_children (run at exit) the rest."""
    log = big_log(tmp_path / "big.log", 0)
    parent = os.getpid()
    forked: list[int] = []
    fork, exit_now = os.fork, os._exit

    def recorded() -> int:
        pid = fork()
        if pid:
            forked.append(pid)
        return pid

    def slow_exit(status: int) -> NoReturn:
        if os.getpid() != parent:
            time.sleep(SLOW_EXIT_S)
        exit_now(status)

    monkeypatch.setattr(os, "fork", recorded)
    monkeypatch.setattr(os, "_exit", slow_exit)
    assert "parts" in index.match(log, split=True).stats
    (first,) = forked
    assert process_state(first) not in ("", "Z")  # the match is over, its child still exiting
    assert children._exiting == [first]
    deadline = time.monotonic() + 30
    while process_state(first) != "Z":  # exited, not yet reaped: a zombie only its parent can clear
        assert time.monotonic() < deadline, f"child {first} did not exit"
        time.sleep(0.01)
    index.match(log, split=True)
    with pytest.raises(ChildProcessError):
        os.waitpid(first, os.WNOHANG)  # reaped by the second match
    second = forked[1]
    assert children._exiting == [second]
    children.reap_children()
    with pytest.raises(ChildProcessError):
        os.waitpid(second, os.WNOHANG)
    assert not Path(f"/proc/{second}").exists()
    assert children._exiting == []


def process_state(pid: int) -> str:
    """A process's state letter from /proc ("Z": a zombie), "" when there is no such process."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    return stat.rsplit(")", 1)[1].split()[0]


def test_what_is_never_split(index: MatcherIndex, tmp_path: Path, small_split: None) -> None:
    """Not asked; a log given as bytes or text, or through a stream that is no file; and any
    process with another thread running (a server's threads are never forked)."""
    log = big_log(tmp_path / "big.log", 0)
    assert "parts" not in index.match(log).stats
    assert "parts" not in index.match(log.read_bytes(), split=True).stats
    assert "parts" not in index.match(io.BytesIO(log.read_bytes()), split=True).stats
    assert "parts" in index.match(log, split=True).stats
    stop = threading.Event()
    waiting = threading.Thread(target=stop.wait)
    waiting.start()
    try:
        assert "parts" not in index.match(log, split=True).stats
    finally:
        stop.set()
        waiting.join()


def test_a_small_log_file_is_read_in_one_pass(index: MatcherIndex, tmp_path: Path) -> None:
    log = big_log(tmp_path / "big.log", 0)
    assert log.stat().st_size < bigfile.SPLIT_MIN_BYTES
    assert "parts" not in index.match(log, split=True).stats


def test_no_child_to_be_had_reads_the_log_in_one_pass(
    index: MatcherIndex, tmp_path: Path, small_split: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = big_log(tmp_path / "big.log", 37)
    one = report_of(index, log, split_it=False)

    def no_fork() -> int:
        raise BlockingIOError("Resource temporarily unavailable")

    monkeypatch.setattr(os, "fork", no_fork)
    assert report_of(index, log, split_it=True) == one  # no "parts": one pass


def test_work_before_the_count_runs_once_and_only_for_a_log_that_is_cut(tmp_path: Path) -> None:
    """kb.matcher.index reads the shards' blobs while the lines above the cut are counted."""
    log = big_log(tmp_path / "big.log", 0)
    calls: list[int] = []
    with open(log, "rb") as fh, pytest.MonkeyPatch.context() as mp:
        mp.setattr(bigfile, "SPLIT_MIN_BYTES", 0)
        found = split.plan(fh, before_counting=lambda: calls.append(1))
        assert found is not None and calls == [1]
        fh.seek(0)
        assert split.plan(fh) == found  # the same plan without it
        mp.setattr(bigfile, "SPLIT_MIN_BYTES", log.stat().st_size + 1)
        fh.seek(0)
        assert split.plan(fh, before_counting=lambda: calls.append(2)) is None
    assert calls == [1]  # not called for a log read in one pass


def test_a_count_that_fails_after_the_blobs_were_asked_for_still_loads_them(
    index: MatcherIndex, tmp_path: Path, small_split: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The plan fails after its reader of the shards' blobs started (the file unreadable at
    the count): the blobs are still loaded and the reader ended, and the log is read in one
    pass."""
    log = big_log(tmp_path / "big.log", 0)
    one = report_of(index, log, split_it=False)
    cache = index._reader._path
    assert cache is not None
    fresh = load_index(cache.parent, "split-rev")  # its shards not loaded yet
    assert fresh is not None and not fresh._prefilter.loaded

    def unreadable(fd: int, start: int, end: int) -> int:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(split, "_newlines", unreadable)
    two = report_of(fresh, log, split_it=True)
    assert "parts" not in two["stats"] and two == one
    assert fresh._prefilter.loaded and not fresh._prefilter.reading
    assert not any(t.name == "kb-shards" for t in threading.enumerate())
