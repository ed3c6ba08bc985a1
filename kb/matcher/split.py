"""A big log file matched in two parts at once, the second in a forked child process.

Matching a log is Python work, one core's worth, while the prefilter's scans leave the other
core mostly idle (at 150,000 records one scan of big.log, 21.9 MB, is 31 ms of a 250 ms match).
A regular file of kb.matcher.bigfile's SPLIT_MIN_BYTES or more is cut at a line end near its
middle; this process matches the first part while a child matches the second, each reading
OVERLAP_LINES lines past the cut, so what crosses it (a traceback above a message, the lines
after a hit) is read whole by the part whose side it starts on. Each part keeps only the lines
on its own side; their matches and unexplained lines are then folded in log order, as one pass
folds them (kb.matcher.rank.Matches, kb.matcher.unexplained.note).

Only where a fork is safe and pays: Linux, two processors or more, no other thread in the
process (a server's threads are never forked), a caller that asks for it (`kb match`), and a
file read by offset (a pipe is not). A child that fails for any reason leaves its part to
this process, which then matches it itself: the answers are the same, only later.

Measured (2026-12-04, cold `kb match --json`, pairs of whole processes in turns against one
pass): big.log at 150,000 records 0.290 s against 0.322 (25 pairs), at 1M records 0.507
against 0.518 (21: the scans of 7 shards keep both cores busy already); big.log five times
over (109 MB) at 150,000 records 0.738 against 0.860.
"""

from __future__ import annotations

import io
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING, Final, NamedTuple, cast

from kb.matcher.bigfile import cuttable
from kb.matcher.children import reap_later

if TYPE_CHECKING:
    from kb.matcher.prescan import Prescanned
    from kb.matcher.rank import Match
    from kb.matcher.scan import LogScan
    from kb.matcher.state import Seen

# Lines each part reads past the cut. What a line's reading depends on lies within
# kb.matcher.scan's LOOKBACK_LINES (400) above it and LOOKAHEAD_LINES (64) below, and the
# window carries CARRY_LINES (160): 1,000 lines leave both parts the same context at the cut.
OVERLAP_LINES: Final = 1000
# ... as long as those lines are not longer than this in all; else the log is read in one pass.
OVERLAP_MAX_BYTES: Final = 4 << 20
# The cut is looked for this far past the middle at most (a log of one huge line is not cut).
CUT_MAX_BYTES: Final = 4 << 20
# Reads of the file while planning (counting lines up to the cut).
READ_BYTES: Final = 1 << 20
# Reads around the cut, the short one first: OVERLAP_LINES of a usual log fit in 256 KB (big.log:
# 1,000 lines 120 KB), and three reads of 4 MB each, into new memory, were 4-6 ms of a 13-17 ms
# plan (2026-12-05).
READ_SIZES: Final = (256 << 10, max(CUT_MAX_BYTES, OVERLAP_MAX_BYTES))
# The end of a read looked in for its last line end: longer lines than this end a read mid-line,
# as any read did before, and the reader joins them. Reads that end at a line end: cold
# `kb match --json` of big.log at 150,000 records 0.201 s against 0.205, peak RSS 84 MB against
# 92 (medians of 20 pairs, ratio 0.987; 2026-12-05).
LINE_END_PROBE: Final = 64 << 10
# Beyond any log's last line: the second part keeps every line from the cut on.
NO_END: Final = 1 << 62


class Plan(NamedTuple):  # a NamedTuple: see kb.matcher.scoring.ScoringConfig
    """Where a log file is cut. Byte offsets into the file: the log is start..end, the second
    part's own lines begin at `cut`, it reads from `head` (OVERLAP_LINES above the cut) and the
    first part reads to `tail` (OVERLAP_LINES below). Lines are the log's 1-based numbers."""

    fd: int
    start: int
    end: int
    cut: int
    head: int
    tail: int
    cut_line: int
    head_line: int


@dataclass
class Part:
    """What a part found, as the merge needs it (sent from the child pickled)."""

    matches: list[Match]  # every match as added, before folding
    unmatched: list[Seen]  # every unexplained line as found
    lines: int  # the part's own lines read
    candidates: int
    verified: int
    near_miss_queries: int
    stopped: str | None


def plan(log: object, before_counting: Callable[[], None] | None = None) -> Plan | None:
    """How to cut `log` (an open binary file) in two, or None when it is read in one pass.
    `before_counting` is called once the log is known to be cut, before the lines above the
    cut are counted (5-6 ms for big.log's 11 MB: work that lets go of the GIL may go on
    meanwhile); the plan may still fail after it (an error reading the file)."""
    try:
        if not isinstance(log, io.BufferedIOBase | io.RawIOBase) or not log.seekable():
            return None
        fd = log.fileno()
        start = log.tell()
        end = cuttable(fd, start)
        if end is None:
            return None
        return _planned(fd, start, end, before_counting)
    except (OSError, ValueError, AttributeError):  # a file that cannot be read by offset
        return None


def _planned(
    fd: int, start: int, end: int, before_counting: Callable[[], None] | None = None
) -> Plan | None:
    middle = start + (end - start) // 2
    cut = -1
    for size in READ_SIZES:
        newline = os.pread(fd, min(size, CUT_MAX_BYTES), middle).find(b"\n")
        if newline >= 0:
            cut = middle + newline + 1
            break
    if cut < 0 or cut >= end:
        return None
    head: int | None = None
    for size in READ_SIZES:
        above_from = max(start, cut - min(size, OVERLAP_MAX_BYTES))
        head, head_lines = _lines_up(os.pread(fd, cut - above_from, above_from), OVERLAP_LINES)
        if head is not None or above_from == start:
            break
    if head is None:
        if above_from > start:
            return None  # the overlap's lines are too long
        head = 0
    tail: int | None = None
    for size in READ_SIZES:
        below = os.pread(fd, min(size, OVERLAP_MAX_BYTES, end - cut), cut)
        tail = _lines_down(below, OVERLAP_LINES)
        if tail is not None or cut + len(below) == end:
            break
    if tail is None:
        if cut + len(below) < end:
            return None
        tail = len(below)
    if before_counting is not None:
        before_counting()
    cut_line = 1 + _newlines(fd, start, cut)
    return Plan(
        fd=fd,
        start=start,
        end=end,
        cut=cut,
        head=above_from + head,
        tail=cut + tail,
        cut_line=cut_line,
        head_line=cut_line - head_lines,
    )


def _lines_up(data: bytes, lines: int) -> tuple[int | None, int]:
    """Where the line `lines` lines above the end of `data` (which ends a line) starts, and
    how many lines that is (None: fewer lines than that in data)."""
    pos = len(data) - 1  # the newline that ends the last line
    for _ in range(lines):
        pos = data.rfind(b"\n", 0, pos)
        if pos < 0:
            return None, data.count(b"\n")
    return pos + 1, lines


def _lines_down(data: bytes, lines: int) -> int | None:
    """The end of the `lines`-th line of `data` (None: fewer lines than that in data)."""
    pos = -1
    for _ in range(lines):
        pos = data.find(b"\n", pos + 1)
        if pos < 0:
            return None
    return pos + 1


def _newlines(fd: int, start: int, end: int) -> int:
    """The newlines in bytes start..end of the file, read into one buffer (a new bytes object
    a read made this a third slower: half a 21.9 MB log 8.0 ms against 5.4)."""
    buffer = bytearray(READ_BYTES)
    count = 0
    for offset in range(start, end, READ_BYTES):
        got = os.preadv(fd, [buffer], offset)
        count += buffer.count(b"\n", 0, min(got, end - offset))
        if got <= 0:
            break
    return count


class _Range:
    """Bytes start..end of a file, read by offset: the child and this process share the file's
    position, so neither may move it. A read short of the end stops at the last line end
    within its size (found by reading the last LINE_END_PROBE bytes first), so the reader
    takes each block as it was read, not copied twice more (joined to the line before it, then
    cut at its last line end)."""

    def __init__(self, fd: int, start: int, end: int) -> None:
        self._fd, self._pos, self._end = fd, start, end

    def read(self, size: int = -1, /) -> bytes:
        left = self._end - self._pos
        wanted = left if size < 0 else min(size, left)
        if wanted <= 0:
            return b""
        if wanted < left and wanted > LINE_END_PROBE:
            probe_at = self._pos + wanted - LINE_END_PROBE
            newline = os.pread(self._fd, LINE_END_PROBE, probe_at).rfind(b"\n")
            if newline >= 0:
                wanted = probe_at + newline + 1 - self._pos
        data = os.pread(self._fd, wanted, self._pos)
        self._pos += len(data)
        return data

    def isatty(self) -> bool:
        return False


def _range(fd: int, start: int, end: int) -> IO[bytes]:
    return cast(IO[bytes], _Range(fd, start, end))  # what kb.logtext.blocks reads of it


def prepare() -> None:
    """What both parts of a big log import, imported once, before the fork: RE2 for the
    verification and the pass over unexplained lines (after it, both processes paid for them,
    the child on the critical path), the parts' reading, pickle and signal. Here, not at the
    top: `kb match` imports this module for every log it reads, and only a big file gets this
    far (pickle and signal: about 2 ms of a 110 ms cold paste). A match that waits for a
    helper's hits (kb.matcher.prescan) calls it first: the 4.5-6.7 ms these took at 150,000
    records then pass while the helper still scans, not between its hits and the fork
    (2026-12-06)."""
    import pickle  # noqa: F401
    import signal  # noqa: F401

    import re2  # noqa: F401

    from kb import logtext, regex  # noqa: F401
    from kb.matcher import unexplained  # noqa: F401


def run(
    found: Plan, new_scan: Callable[[], LogScan], hits: Prescanned | None = None
) -> LogScan | None:
    """Match the log of `found` in two parts at once; the first part's scan, with what both
    parts found merged into it. None when no child can be started (then read it in one pass).
    `hits`: the whole file's prefilter hits (kb.matcher.prescan), which both parts then take
    instead of scanning."""
    import pickle
    import signal

    from kb.logtext import blocks

    prepare()
    read_end, write_end = os.pipe()
    try:
        pid = os.fork()
    except OSError:  # out of processes or memory for one
        os.close(read_end)
        os.close(write_end)
        return None
    if pid == 0:  # the child: the second part, then out without running anything of ours
        os.close(read_end)
        _child(found, new_scan, write_end, hits)
    os.close(write_end)
    try:
        with os.fdopen(read_end, "rb") as pipe:
            first = _scan(new_scan(), (0, found.cut_line), hits, found.start)
            first.run(blocks(_range(found.fd, found.start, found.tail)))
            payload = pipe.read()
    except BaseException:
        os.kill(pid, signal.SIGKILL)  # Ctrl-C, or an error here: the child's work is moot
        os.waitpid(pid, 0)
        raise
    reap_later(pid)  # its exit not waited for (kb.matcher.children)
    try:
        second = pickle.loads(payload) if payload else None
    except Exception:  # a child cut short mid-write
        second = None
    if not isinstance(second, Part):
        second = _second(found, new_scan(), hits)
    return _merged(first, second, found.cut_line)


def _scan(
    scan: LogScan, owned: tuple[int, int], prescanned: Prescanned | None, origin: int
) -> LogScan:
    """`scan` made a part's: the lines it owns, and the hits of its stream (from `origin`)."""
    from kb.matcher.rank import Matches

    scan.owned = owned
    scan.prescanned = None if prescanned is None else (prescanned, origin)
    scan.matches = Matches(log=True)
    scan.unmatched_log = []
    return scan


def _part(scan: LogScan) -> Part:
    assert scan.matches.log is not None and scan.unmatched_log is not None
    return Part(
        matches=scan.matches.log,
        unmatched=scan.unmatched_log,
        lines=scan.owned_total,
        candidates=scan.trials.candidates,
        verified=scan.trials.verified,
        near_miss_queries=scan.near_miss_queries,
        stopped=scan.stopped,
    )


def _second(found: Plan, scan: LogScan, prescanned: Prescanned | None) -> Part:
    """The second part, matched by `scan` (here or in the child)."""
    from kb.logtext import blocks

    _scan(scan, (found.cut_line, NO_END), prescanned, found.head)
    scan.run(blocks(_range(found.fd, found.head, found.end), first_line=found.head_line))
    return _part(scan)


def _child(
    found: Plan,
    new_scan: Callable[[], LogScan],
    write_end: int,
    prescanned: Prescanned | None,
) -> None:
    import pickle

    status = 1
    try:
        scan = new_scan()
        if scan.reader.reopened():  # else the parent matches this part itself
            part = _second(found, scan, prescanned)
            data = pickle.dumps(part, protocol=pickle.HIGHEST_PROTOCOL)
            with os.fdopen(write_end, "wb") as pipe:
                pipe.write(data)
            status = 0
    except BaseException:  # told by the status: the parent matches this part itself
        pass
    finally:
        os._exit(status)


def _merged(first: LogScan, second: Part, cut_line: int) -> LogScan:
    """The first part's scan holding both parts' own matches and unexplained lines, folded in
    log order, and both parts' figures."""
    from kb.matcher.rank import Matches
    from kb.matcher.unexplained import note, repeats

    assert first.matches.log is not None and first.unmatched_log is not None
    matches = Matches()
    for match in first.matches.log:
        if match.line < cut_line:
            matches.add(match)
    earlier = list(matches.found)
    for match in second.matches:
        if match.line >= cut_line:
            matches.add(match)
    lines = [s for s in first.unmatched_log if s.line < cut_line]
    first.matches = matches
    first.unmatched, first.unmatched_by_key, first.unmatched_log = [], {}, None
    for seen in lines:
        note(first, seen)
    for seen in second.unmatched:
        # a line the child kept as no repeat of its own matches may repeat one of the first
        # part's, found before it in one pass
        if seen.line >= cut_line and not repeats(seen.message, earlier):
            note(first, seen)
    first.owned_total += second.lines
    first.trials.candidates += second.candidates
    first.trials.verified += second.verified
    first.near_miss_queries += second.near_miss_queries
    first.stopped = first.stopped or second.stopped
    return first
