"""The patterns tried on a line of the log, and each try verified into a hit.

A line's prefilter keys offer patterns: a key many patterns share offers only those its RE2
set finds on the line, and a line tries at most MAX_LINE_CANDIDATES, its most specific keys'
first. Each pattern is verified (kb.matcher.verify) on the line's subjects, cut out once for
all the patterns that span the same lines; an error code is checked as a whole token. Every
(pattern, row) and (code, row) is tried once, also when the next block reads the row again.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from kb.logline import level_of, strip_prefix
from kb.matcher.cache import CacheReader, Pattern
from kb.matcher.verify import SHARED_KEY_PATTERNS, Hit, Subject, Verifier, has_code, subjects
from kb.matcher.window import CARRY_LINES, Window

# At most this many patterns are tried on one line, those of its most specific keys first:
# real logs need at most 50 (the shared corpus's 150,000 records), and 1,800 records all
# keyed on "Error: " once made a 20,000-line log 36 million candidates (260 s, 7 GB).
MAX_LINE_CANDIDATES: Final = 128
# What a one-line pattern's subjects are cut out as (only its lines matter to `subjects`).
ONE_LINE: Final = Pattern(
    idx=-1,
    regex="",
    engine="re2",
    generic=False,
    literal_chars=0,
    key_line=0,
    newlines=0,
    names=(),
    records=(),
    relaxed=None,
    nested=False,
    others=(),
)

# A line's subjects as cut out for the patterns that span the same lines:
# (line, the pattern's key line, its newlines) -> subjects.
FoundSubjects = dict[tuple[int, int, int], list[Subject]]


class Trials:
    """What one match call has tried on the rows of its window, and the tries themselves."""

    def __init__(self, reader: CacheReader, verifier: Verifier, window: Window) -> None:
        self.reader = reader
        self.verifier = verifier
        self.window = window  # the scan's, advanced by it block by block
        self.tried_patterns: set[tuple[int, int]] = set()  # (pattern, row)
        self.tried_codes: set[tuple[int, int]] = set()  # (code's key id, row)
        # figures for the report
        self.candidates = 0
        self.candidates_skipped = 0  # past MAX_LINE_CANDIDATES on their line
        self.verified = 0

    def forget_above(self, floor: int) -> None:
        """Forget the tries on rows above `floor` (no later block reads them again)."""
        self.tried_patterns = {t for t in self.tried_patterns if t[1] >= floor}
        self.tried_codes = {t for t in self.tried_codes if t[1] >= floor}

    def line_candidates(
        self, line_index: int, key_ids: list[int], final: bool, found_subjects: FoundSubjects
    ) -> list[int]:
        """The patterns to try on one line, for the pattern keys found on it. A key that many
        patterns share offers those its RE2 set finds on the line; then, when they are still
        more than MAX_LINE_CANDIDATES, those of the most specific keys (the fewest patterns,
        then the longest text) are tried, MAX_LINE_CANDIDATES of them."""
        reader = self.reader
        offered: dict[int, list[int]] = {}
        for key_id in key_ids:
            patterns = reader.key_patterns(key_id)
            if len(patterns) >= SHARED_KEY_PATTERNS:
                patterns = self._shared_key_candidates(
                    key_id, patterns, line_index, final, found_subjects
                )
            offered[key_id] = patterns
        found = [p for key_id in key_ids for p in offered[key_id]]
        if len(found) <= MAX_LINE_CANDIDATES:
            return found
        self.candidates_skipped += len(found) - MAX_LINE_CANDIDATES
        kept: set[int] = set()
        by_specificity = sorted(
            key_ids,
            key=lambda k: (len(reader.key_patterns(k)), -len(reader.key_text(k)), k),
        )
        for key_id in by_specificity:
            kept.update(offered[key_id][: MAX_LINE_CANDIDATES - len(kept)])
            if len(kept) >= MAX_LINE_CANDIDATES:
                break
        return [p for p in found if p in kept]  # tried in the order they were found

    def _shared_key_candidates(
        self,
        key_id: int,
        patterns: list[int],
        line_index: int,
        final: bool,
        found_subjects: FoundSubjects,
    ) -> list[int]:
        """The patterns of a key many share that may match on the line: its RE2 set run on
        the line's subjects (as one-line patterns see it), and those the set cannot hold."""

        def load() -> list[Pattern]:
            self.reader.load_patterns(patterns)
            return [self.reader.pattern(p) for p in patterns]

        shared = self.verifier.shared_key(key_id, load)
        one_line = (line_index, 0, 0)
        cut_out = found_subjects.get(one_line)
        if cut_out is None:
            cut_out = found_subjects[one_line] = subjects(
                self.window.lines, line_index, ONE_LINE, final
            )
        return shared.candidates([s.text for s in cut_out])

    def verify(
        self, pattern: Pattern, line_index: int, final: bool, found_subjects: FoundSubjects
    ) -> Hit | None:
        """The hit of `pattern` on the lines around `line_index`, or None (also when this
        pattern was tried at this row before)."""
        self.candidates += 1
        window = self.window
        start = line_index - pattern.key_line
        tried = (pattern.idx, window.first_row + max(start, 0))
        if tried in self.tried_patterns:
            return None
        # the subjects depend on the pattern only by the lines it spans
        cut_out = (line_index, pattern.key_line, pattern.newlines)
        found = found_subjects.get(cut_out)
        if found is None:
            found = subjects(window.lines, line_index, pattern, final)
            found_subjects[cut_out] = found
        if not found:
            return None
        if line_index >= len(window.lines) - CARRY_LINES:
            # the next block scans this line again, with its carried lines: tried once
            self.tried_patterns.add(tried)
        verified = self.verifier.verify(pattern, found)
        if verified is None:
            return None
        self.verified += 1
        return Hit(
            first=window.first_row + verified.first,
            last=window.first_row + verified.last,
            line=window.line_nos[verified.first],
            end_line=window.end_nos[verified.last],
            method="pattern",
            pattern=pattern,
            records=pattern.records,
            subject=verified.text,
            captures=verified.captures,
            whole=verified.whole,
            level=level_of(window.lines[verified.first]),
        )

    def verify_code(self, key_id: int, line_index: int) -> Hit | None:
        """The hit of an error code found on a line, when it stands there as a whole token
        (once per code and row)."""
        code = self.reader.key_text(key_id)
        line = self.window.lines[line_index]
        if not has_code(line, code):
            return None
        row = self.window.first_row + line_index
        if (key_id, row) in self.tried_codes:
            return None
        self.tried_codes.add((key_id, row))
        records = self.reader.code_records(code)
        return self.line_hit(line_index, "code", None, records, code=code, level=level_of(line))

    def line_hit(
        self,
        line_index: int,
        method: str,
        pattern: Pattern | None,
        records: Sequence[int],
        *,
        code: str | None = None,
        level: str | None = None,
    ) -> Hit:
        """A hit on one line of the window, its whole text (without prefix) the subject."""
        window = self.window
        return Hit(
            first=window.first_row + line_index,
            last=window.first_row + line_index,
            line=window.line_nos[line_index],
            end_line=window.end_nos[line_index],
            method=method,
            pattern=pattern,
            records=records,
            subject=strip_prefix(window.lines[line_index]),
            code=code,
            level=level,
        )
