"""One match call: the loop over a log's blocks and the state it keeps between them.

Each block is scanned by the prefilter; its key hits become frames, exception lines and
candidate patterns, which are verified. Once the lines after a hit are read (LOOKAHEAD_LINES),
its hits are grouped, given their traceback, scored and ranked into matches; tracebacks whose
message matched no pattern are tried by their raise site, and unexplained exception lines as
near misses. Rows are logical lines of the whole log (0-based); the window is the lines kept
in memory (kb.matcher.window).
"""

from __future__ import annotations

import bisect
import re
import time
from collections.abc import Iterator
from itertools import pairwise
from typing import TYPE_CHECKING, Final

from kb import logline
from kb.logline import exception_of, level_of, raised_line, repr_exception, strip_prefix
from kb.logtext import LineBlock
from kb.matcher.cache import (
    CODE,
    FRAME,
    PATTERN,
    TEMPLATE_MIN_CHARS,
)
from kb.matcher.prefilter import BlockScan, pytest_locations
from kb.matcher.prescan import PYTEST_LOC
from kb.matcher.raisesite import raise_site_candidates
from kb.matcher.rank import rank, settled, to_match
from kb.matcher.scorer import Candidate
from kb.matcher.state import ScanState
from kb.matcher.tracebacks import (
    CODE_LINE_RE,
    PYTHON_STYLES,
    SOURCE_LINE_RE,
    SeenFrame,
    Traceback,
    group_tracebacks,
    is_quoted_source,
)
from kb.matcher.verify import (
    Hit,
    Subject,
)
from kb.matcher.window import CARRY_LINES

if TYPE_CHECKING:
    pass

# Lines after a hit that may still hold its stack frames (JavaScript, Java, Go print them below).
LOOKAHEAD_LINES: Final = 64
# How far above an exception line its traceback may start.
LOOKBACK_LINES: Final = 400
# A hit's traceback is the one whose exception line is the hit's line or this many above...
TRACEBACK_ABOVE: Final = 2
# ... or (innermost-first formats) whose frames start this close below it (Go: a blank line and
# "goroutine 1 [running]:" come before the frames).
FRAMES_BELOW: Final = 6
# Candidates are verified in batches of about this many (their patterns read in one query).
VERIFY_BATCH: Final = 4096
# A raising frame adds no match of its own this close to a match of the same record.
FRAME_ONLY_NEAR: Final = 80
# Pastes this short get every line tried as a near miss, not only error-looking ones, and each
# paragraph (a message hard-wrapped over lines) as one.
SHORT_PASTE_LINES: Final = 40
# A short paste's lines that line up with a specific known template at least this well
# (Alignment.gap) resemble a known message: listed as unrecognised when nothing is known.
RESEMBLES: Final = 0.7
# Levels of lines that are not errors, whatever they resemble.
CHATTER_LEVELS: Final = frozenset({"TRACE", "DEBUG", "INFO", "NOTICE", "WARN"})
# A phrase template's score next to a specific one reading the same text: just below it.
PHRASE_BELOW: Final = 0.99
# A near miss reads a line better than the phrase that matched it when this many times as
# much of its text agrees with the line.
PHRASE_MARGIN: Final = 2.0
# pytest's raise-site line ("path.py:466: InvalidVersion"; kb.matcher.prefilter finds them).
PYTEST_LOC_RE: Final = re.compile(PYTEST_LOC.decode("ascii"))


def owned_lines(block: LineBlock, first: int, end: int) -> int:
    """How many of the block's logical lines start on a line from `first` to `end` (not
    included) of the log: line numbers only grow along a block."""
    if block.first is None:
        return max(0, min(block.base + len(block.lines), end) - max(block.base, first))
    return bisect.bisect_left(block.first, end) - bisect.bisect_left(block.first, first)


class LogScan(ScanState):
    """One match call's work on a stream of blocks, on the state it keeps (ScanState)."""

    def run(self, blocks: Iterator[LineBlock]) -> None:
        # A block's prefilter scan runs while the next block is read and split, and the next
        # block's while this one is worked on (Hyperscan lets go of the GIL): one scan at a
        # time, since each shard has one scratch space for the thread.
        previous: BlockScan | None = None
        current: BlockScan | None = None
        try:
            for block in blocks:
                if previous is None:
                    previous = current = BlockScan(self.prefilter, block, self.prescanned)
                    continue
                previous.result()  # done before the next block's scan starts
                if self._out_of_time():
                    break
                current = BlockScan(self.prefilter, block, self.prescanned)
                self._block(previous, final=False)
                previous = current
            if self.stopped is not None:
                self._finalize(None)  # the blocks worked on so far, reported
            elif previous is not None:
                self._block(previous, final=True)
            else:
                self._finalize(None)
        finally:
            # An error (or Ctrl-C) mid-log must not leave a scan running on the thread's
            # scratch spaces: the next match() would find them in use.
            if current is not None:
                current.wait()

    def _out_of_time(self) -> bool:
        """Whether the deadline has passed (then the scan stops, and says so)."""
        if self.deadline is not None and time.monotonic() >= self.deadline:
            self.stopped = "timeout"
        return self.stopped is not None

    # ---- one block: key hits, frames, exception lines, verification ------------------------

    def _block(self, scanned: BlockScan, *, final: bool) -> None:
        """Work on one block, its own lines' prefilter hits found by `scanned`."""
        kept = self.window.advance(scanned.block)
        carry = len(kept)
        self.lines_total += len(scanned.block.lines)
        if self.owned is not None:
            self.owned_total += owned_lines(scanned.block, *self.owned)
        # The carried lines are scanned again: what waited for the lines after them (a message
        # running on into this block) is tried now. Keys never span a newline, so scanning
        # them apart from the block finds what scanning both together would.
        carry_data = "\n".join(kept).encode("utf-8", "replace") if kept else b""
        carried = self._carried(len(kept), carry_data)
        if self.prescanned is not None:
            self._remember(scanned.block)
        keys_by_line: dict[int, set[int]] = {}
        for line_index, key_id in (
            self.prefilter.hits_by_line(carry_data) if carried is None else carried[0]
        ):
            keys_by_line.setdefault(line_index, set()).add(key_id)
        for line_index, key_id in scanned.result():
            keys_by_line.setdefault(carry + line_index, set()).add(key_id)
        self._read_keys(keys_by_line, final)
        # pytest prints the raise site as "path.py:466: InvalidVersion"
        for line_index in [
            *(pytest_locations(carry_data) if carried is None else carried[1]),
            *(carry + i for i in scanned.pytest_lines()),
        ]:
            self._note_frame(line_index, "pytest")
        window = self.window
        self._finalize(None if final else window.first_row + len(window.lines) - LOOKAHEAD_LINES)

    def _carried(self, lines: int, data: bytes) -> tuple[list[tuple[int, int]], list[int]] | None:
        """The carried lines' hits and pytest locations (kb.matcher.prefilter.Prefilter.taken),
        taken from the whole file's hits when a helper scanned it (kb.matcher.prescan) and the
        lines are the end of the blocks before, as they were read: else None, and they are
        scanned."""
        if self.prescanned is None:
            return None
        if not data:
            return [], []
        chain: list[tuple[int, bytes]] = []  # (offset, data) of the blocks, the last first
        held = 0
        for offset, read, count in reversed(self.recent_blocks):
            if read is None or offset is None:
                return None
            chain.append((offset, read))
            held += count
            if held >= lines:
                break
        if held < lines:
            return None
        chain.reverse()
        if any(at + len(read) + 1 != after for (at, read), (after, _) in pairwise(chain)):
            return None  # not one stretch of the file
        end = chain[-1][0] + len(chain[-1][1])
        tail = chain[0][1] if len(chain) == 1 else b"\n".join(read for _, read in chain)
        if not tail.endswith(data):
            return None
        found, origin = self.prescanned
        return self.prefilter.taken(found, data, origin + end - len(data))

    def _remember(self, block: LineBlock) -> None:
        """Keep where the blocks whose lines may still be carried (CARRY_LINES of them) were
        read, their bytes and how many lines they held (not their lines)."""
        recent = self.recent_blocks
        recent.append((block.offset, block.data, len(block.lines)))
        while len(recent) > 1 and sum(count for _, _, count in recent[1:]) >= CARRY_LINES:
            del recent[0]

    def _note_frame(self, line_index: int, style: str | None = None) -> None:
        """The stack frame on a line of the window (in `style` only, if given), read once."""
        row = self.window.first_row + line_index
        if row not in self.frames:
            frame = logline.parse_frame(self.window.lines[line_index])
            if frame is not None and (style is None or frame.style == style):
                self.frames[row] = SeenFrame(row, self.window.line_nos[line_index], frame)

    def _read_keys(self, keys_by_line: dict[int, set[int]], final: bool) -> None:
        """Turn the keys found on each line of the window into frames, exception lines and
        verified hits."""
        reader = self.reader
        lines = self.window.lines
        pattern_keys: dict[int, list[int]] = {}  # line -> the pattern keys found on it
        code_hits: list[tuple[int, int]] = []
        pattern_keys_end = reader.pattern_keys_end
        reader.prefetch_keys(
            k for ids in keys_by_line.values() for k in ids if k < pattern_keys_end
        )
        for line_index, key_ids in keys_by_line.items():
            row = self.window.first_row + line_index
            for key_id in key_ids:
                kind = PATTERN if key_id < pattern_keys_end else reader.kind(key_id)
                if kind == PATTERN:
                    pattern_keys.setdefault(line_index, []).append(key_id)
                elif kind == CODE:
                    code_hits.append((key_id, line_index))
                elif kind == FRAME:
                    self._note_frame(line_index)
                elif row not in self.errors:
                    bare = strip_prefix(lines[line_index])
                    exc = exception_of(bare)
                    if (
                        exc is None
                        and not bare[:1].isspace()
                        and not SOURCE_LINE_RE.match(bare)
                        and not CODE_LINE_RE.match(bare)
                    ):
                        # an exception's repr inside the line (not source code quoted in a
                        # traceback, which is indented)
                        exc = repr_exception(bare)
                    if exc is not None:
                        self.errors[row] = exc
                    elif level_of(lines[line_index]) in self.scorer.config.error_levels:
                        self.level_rows.add(row)
                    if PYTEST_LOC_RE.search(lines[line_index]):
                        self.errors.pop(row, None)  # a pytest location line, read as a frame
        # Verified a batch at a time: what is held stays bounded however many lines hit keys.
        trials = self.trials
        pending: list[tuple[int, int]] = []
        found_subjects: dict[tuple[int, int, int], list[Subject]] = {}
        for line_index, line_keys in pattern_keys.items():
            tried = trials.line_candidates(line_index, line_keys, final, found_subjects)
            pending.extend((p, line_index) for p in tried)
            if len(pending) >= VERIFY_BATCH:
                self._verify_all(pending, final, found_subjects)
                pending = []
                found_subjects = {}
        self._verify_all(pending, final, found_subjects)
        for key_id, line_index in code_hits:
            hit = trials.verify_code(key_id, line_index)
            if hit is not None:
                self.hits.append(hit)

    def _verify_all(
        self,
        pending: list[tuple[int, int]],
        final: bool,
        found_subjects: dict[tuple[int, int, int], list[Subject]],
    ) -> None:
        """Verify candidate patterns, (pattern, line) each; a line's subjects cut out once
        for all the patterns that need the same lines."""
        if self._out_of_time():
            return  # a block of many candidates stops between batches
        reader, trials, hits = self.reader, self.trials, self.hits
        reader.load_patterns(p for p, _ in pending)
        for p, line_index in pending:
            hit = trials.verify(reader.pattern(p), line_index, final, found_subjects)
            if hit is not None:
                hits.append(hit)

    # ---- hits settled: scored, ranked, emitted ------------------------------------------------

    def _finalize(self, upto: int | None) -> None:
        """Score hits on rows before `upto` (all when None) and turn them into matches."""
        ready = [h for h in self.hits if upto is None or h.last < upto]
        if upto is not None and not ready and not self.frames and not self.errors:
            self._prune(upto)
            return
        tracebacks = group_tracebacks(self.frames, self.errors, self.window.line_at)
        by_exception = {t.exception_row: t for t in tracebacks if t.exception_row is not None}
        for row, tb in by_exception.items():
            if row not in self.errors and tb.style in PYTHON_STYLES:
                # Python ends a traceback with "Class: message", whatever the class is called
                line = self.window.line_at(row)
                raised = raised_line(strip_prefix(line)) if line is not None else None
                if raised is not None:
                    self.errors[row] = raised
        ready_ids = {id(h) for h in ready}
        self.hits = [h for h in self.hits if id(h) not in ready_ids]
        errors_seen = [h for h in ready if not self._is_quoted_source(h)]
        used = self._emit_hits(errors_seen, tracebacks, by_exception)
        unused = [tb for tb in tracebacks if id(tb) not in used and tb.frames]
        self._emit_raise_sites(unused, upto)
        self._near_miss_pass(upto, by_exception)
        self._collect_unmatched(upto, tracebacks)
        if upto is not None:
            self._prune(upto)

    def _emit_hits(
        self, ready: list[Hit], tracebacks: list[Traceback], by_exception: dict[int, Traceback]
    ) -> set[int]:
        """Hits on overlapping rows, each cluster with its traceback, scored and emitted as
        one match; returns the ids of the tracebacks used."""
        below = {
            t.frames[0].row: t
            for t in tracebacks
            if t.style in logline.INNERMOST_FIRST and t.frames
        }
        clusters: list[list[Hit]] = []
        cluster_end = -1  # the last row of the last cluster (kept, not re-measured per hit)
        for hit in sorted(ready, key=lambda h: (h.first, h.last)):
            if clusters and hit.first <= cluster_end:
                clusters[-1].append(hit)
                cluster_end = max(cluster_end, hit.last)
            else:
                clusters.append([hit])
                cluster_end = hit.last
        used: set[int] = set()
        self.reader.load_records(rec_idx for hit in ready for rec_idx in hit.records)
        for cluster in clusters:
            first = cluster[0].first
            last = max(h.last for h in cluster)
            above = range(first, first - TRACEBACK_ABOVE - 1, -1)
            tb = next((by_exception[r] for r in above if r in by_exception), None)
            if tb is None:
                after = range(last + 1, last + FRAMES_BELOW + 1)
                tb = next((below[r] for r in after if r in below), None)
            if tb is not None:
                used.add(id(tb))
                if tb.exception_row is not None:
                    self.claimed.add(tb.exception_row)
                if tb.frames:
                    # A later block still has these frames but maybe not the lines below them
                    # (no exception line found then): the innermost frame marks them as used.
                    self.claimed.add(tb.frames[0].row)
            exception = self.errors.get(first)
            candidates: list[Candidate] = []
            for hit in cluster:
                for rec_idx in hit.records:
                    cand = self.scorer.score_hit(hit, self.reader.record(rec_idx), tb, exception)
                    if cand is not None:
                        candidates.append(cand)
            if tb is not None and tb.exception_row is not None:
                candidates.extend(
                    raise_site_candidates(
                        self.reader, self.scorer, self.window, tb, self.errors.get(tb.exception_row)
                    )
                )
            if not settled(candidates, self.min_score):
                # the message matched, but not a record the traceback agrees with: a reworded
                # message of the raise site the traceback shows may be the answer
                row = tb.exception_row if tb is not None and tb.exception_row is not None else first
                if row in self.errors and row not in self.near_miss_rows:
                    self.near_miss_rows.add(row)
                    near = self.near_miss_candidates(row, self.errors[row], tb)
                    phrase = max((c.literal_chars for c in candidates if c.phrase), default=0)
                    if phrase:
                        # a phrase read it: only a template that agrees with much more of the
                        # text may read it better
                        near = [
                            c
                            for c in near
                            if not c.unsupported or c.agreeing >= PHRASE_MARGIN * phrase
                        ]
                    candidates.extend(near)
            elif self.lines_total <= SHORT_PASTE_LINES:
                from kb.matcher import nearmiss  # a short paste: what else its words may mean

                candidates.extend(nearmiss.rewordings(self, candidates, tb))
            self._emit(candidates)
        return used

    def _emit_raise_sites(self, tracebacks: list[Traceback], upto: int | None) -> None:
        """Tracebacks whose message matched no pattern: the raise site may still name the
        record."""
        for tb in tracebacks:
            inner = tb.frames[0].row
            row = tb.exception_row if tb.exception_row is not None else inner
            if upto is not None and row >= upto - LOOKAHEAD_LINES:
                continue  # wait until the hits around it are settled
            if row in self.claimed or inner in self.claimed:
                continue
            if any(h.first <= row <= h.last for h in self.hits):
                continue
            if row in self.tracebacks_tried or inner in self.tracebacks_tried:
                continue
            self.tracebacks_tried.update((row, inner))
            exception = self.errors.get(tb.exception_row) if tb.exception_row is not None else None
            candidates = raise_site_candidates(self.reader, self.scorer, self.window, tb, exception)
            if exception is not None and row not in self.near_miss_rows:
                self.near_miss_rows.add(row)
                self.aligned = None
                near = self.near_miss_candidates(row, exception, tb)
                aligned = self._last_aligned()
                if aligned is not None:
                    # the message was read, and it is not the raise site's: a frame alone
                    # is for a message cut off or missing, not for one that says otherwise
                    factor = self.scorer.config.message_disagrees
                    for cand in candidates:
                        if cand.record.idx not in aligned:
                            cand.score *= factor
                candidates.extend(near)
            if self._emit(candidates):
                self.claimed.add(row)

    def _last_aligned(self) -> set[int] | None:
        """The records the last near-miss look-up aligned (None when it made none)."""
        return self.aligned

    def _is_quoted_source(self, hit: Hit) -> bool:
        line = self.window.line_at(hit.first)
        return is_quoted_source(
            hit.subject if line is None else line, hit.first, hit.captures, self.frames
        )

    def _emit(self, candidates: list[Candidate]) -> bool:
        """Turn the best candidate for one place in the log into a Match, if it scores enough."""
        specific = [c for c in candidates if not c.phrase and c.method in ("pattern", "fuzzy")]
        best = max(specific, key=lambda c: c.score, default=None)
        if best is not None and best.score >= self.min_score:
            # a phrase never outranks a specific template reading the same text
            for c in candidates:
                if c.phrase and c.score >= best.score and c.record.id != best.record.id:
                    c.score = best.score * PHRASE_BELOW
        ranked = rank(candidates)
        if not ranked:
            return False
        best = ranked[0]
        if best.score < self.min_score:
            return False
        hit = best.hit
        if best.method == "frame" and self.matches.near(best.record.id, hit.line, FRAME_ONLY_NEAR):
            return False  # its message was matched nearby (printed before the traceback, say)
        self.claimed.update(range(hit.first, hit.last + 1))
        self.explained.update(range(hit.first, hit.last + 1))
        text = hit.subject
        if best.method == "frame" and hit.line == hit.end_line and hit.subject == "":
            text = self.window.line_at(hit.first) or ""
        self.matches.add(to_match(ranked, self.top, text, self.calibrate))
        return True

    # ---- near misses ----------------------------------------------------------------------

    def _near_miss_pass(self, upto: int | None, by_exception: dict[int, Traceback]) -> None:
        """Exception lines no record explains, read as reworded messages; in a short paste,
        then its paragraphs and its other lines too (it is about its errors: any line may be
        a message, even without a class, and a paragraph one message hard-wrapped)."""
        self._try_near_misses(self.errors, upto, by_exception)
        if upto is not None or self.lines_total > SHORT_PASTE_LINES:
            return
        from kb.matcher import nearmiss

        for first, last, text in nearmiss.paragraphs(self):
            rows = range(first, last + 1)
            if first in self.near_miss_rows or self.claimed.intersection(rows):
                continue
            if any(row in self.frames for row in rows):
                continue
            self.near_miss_rows.add(first)
            self.aligned = None
            if self._emit(self.near_miss_candidates(first, ("", text), None, last=last)):
                self.claimed.update(rows)
            elif self._last_aligned() and self.aligned_best >= RESEMBLES:
                self.resembling[first] = (text, last)  # like a known message, not enough
        lines: dict[int, tuple[str, str]] = {}
        for line_index, line in enumerate(self.window.lines):
            row = self.window.first_row + line_index
            bare = strip_prefix(line)
            if row in self.errors or len(bare) < TEMPLATE_MIN_CHARS or bare[:1].isspace():
                continue
            if not SOURCE_LINE_RE.match(bare) and row not in self.frames:
                lines[row] = ("", bare)
        self._try_near_misses(lines, upto, by_exception, remember=True)

    def _try_near_misses(
        self,
        errors: dict[int, tuple[str, str]],
        upto: int | None,
        by_exception: dict[int, Traceback],
        *,
        remember: bool = False,
    ) -> None:
        done = {m.line for m in self.matches.found}
        for row in sorted(errors):
            if upto is not None and row >= upto:
                break
            if row in self.claimed or row in self.near_miss_rows:
                continue
            self.near_miss_rows.add(row)
            line_index = row - self.window.first_row
            if not 0 <= line_index < len(self.window.lines):
                continue
            if self.window.line_nos[line_index] in done:
                continue
            self.aligned = None
            found = self.near_miss_candidates(row, errors[row], by_exception.get(row))
            resembles = self._last_aligned() and self.aligned_best >= RESEMBLES
            chatter = level_of(self.window.lines[line_index]) in CHATTER_LEVELS
            if not self._emit(found) and remember and resembles and not chatter:
                self.resembling.setdefault(row, (errors[row][1], row))

    # ---- what no record explains -------------------------------------------------------------

    def near_miss_candidates(
        self,
        row: int,
        error: tuple[str, str],
        tb: Traceback | None,
        *,
        last: int | None = None,
    ) -> list[Candidate]:
        """The records a reworded message on `row` (to `last`) may be (kb.matcher.nearmiss,
        loaded only now)."""
        from kb.matcher import nearmiss

        return nearmiss.candidates(self, row, error, tb, last=last)

    # ---- what no record explains -------------------------------------------------------------

    def _collect_unmatched(self, upto: int | None, tracebacks: list[Traceback]) -> None:
        """The settled rows' error-looking lines no match explains, into `unmatched`
        (kb.matcher.unexplained, loaded only when some row may be one)."""
        window = self.window
        bound = window.first_row + len(window.lines) if upto is None else upto - LOOKAHEAD_LINES
        first = max(self.unmatched_from, window.first_row)
        if bound <= first:
            return
        if upto is not None or self.lines_total > SHORT_PASTE_LINES or self.matches.found:
            # most logs: every error line is explained, and that is all there is to know
            settled = range(first, bound)
            rows = [r for r in (*self.errors, *self.level_rows) if r in settled]
            rows += [
                tb.exception_row if tb.exception_row is not None else tb.frames[0].row
                for tb in tracebacks
                if tb.frames
            ]
            if all(r in self.explained or r not in settled for r in rows):
                self.unmatched_from = bound
                return
        from kb.matcher import unexplained

        unexplained.collect(self, bound, upto is None, tracebacks)

    def _prune(self, upto: int) -> None:
        """Forget what no later hit can need: rows far above the oldest pending hit."""
        floor = min([h.first for h in self.hits] + [upto]) - LOOKBACK_LINES
        for row in [r for r in self.frames if r < floor]:
            del self.frames[row]
        for row in [r for r in self.errors if r < floor]:
            del self.errors[row]
        self.trials.forget_above(floor)
        self.claimed = {r for r in self.claimed if r >= floor}
        self.tracebacks_tried = {r for r in self.tracebacks_tried if r >= floor}
        self.near_miss_rows = {r for r in self.near_miss_rows if r >= floor}
        self.level_rows = {r for r in self.level_rows if r >= floor}
        self.explained = {r for r in self.explained if r >= floor}
