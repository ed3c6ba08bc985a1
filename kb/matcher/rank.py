"""Ranking and collapsing: the candidates for one place in the log become one Match, and the
same error found again is folded into the match that found it first.

A Match names its best record, lists the near-duplicates that tie with it (one message raised
from hundreds of files) and the next best up to `top` records in all; a MatchReport holds the
matches of one log, best first. Whether a reading is settled (no near miss needs looking for)
is decided here too.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Final

from kb.logline import strip_prefix
from kb.matcher.cache import normalize_template
from kb.matcher.scorer import Candidate
from kb.text import clip

# Readings of a record by its exact words, which stand over a near miss of it.
EXACT: Final = frozenset({"pattern", "code"})
# Unmatched lines get `kb search` suggestions, each search a few milliseconds to tens of them:
# the first this many only (a log with thousands of error lines runs no more searches).
MAX_SUGGESTED: Final = 5
# An unmatched line is searched by at most this many of its words.
MAX_QUERY_WORDS: Final = 16
# A message is clipped to this in Match.text (the transformers model list runs to 20 KB).
TEXT_MAX_CHARS: Final = 2000
# Scores this close are a tie: nothing in the log tells the records apart.
TIE: Final = 1e-9
# At most this many equally good near-duplicates are listed as alternatives.
MAX_TIES: Final = 20
# Match.other_lines keeps this many lines where the same error occurs again.
MAX_OTHER_LINES: Final = 100
# Match.duplicates lists every tying record (one message raised from 445 model files), capped.
MAX_DUPLICATES: Final = 1000
# A phrase's placeholders that swallowed this many words of prose may hide a specific
# template's words (then the near misses are looked up).
PROSE_WORDS: Final = 2
# "did you mean": the valid choices a capture lists, and how close the bad value must be.
SUGGEST_CUTOFF: Final = 80
MIN_CHOICES: Final = 3
MAX_CHOICE_CHARS: Final = 80
_CHOICE_SPLIT: Final = re.compile(r"\s*(?:,|\||\bor\b)\s*")
_CHOICE_TRIM: Final = " \t'\"`[](){}<>."
_ELLIPSIS_RE: Final = re.compile(r"(?:\.\.\.|…)['\"]?$")
# A repeat cut short is looked for among this many earlier matches of its record (per list
# kept): enough for any summary, and linear time when one record matches 100,000 values.
MAX_FOLD_SCAN: Final = 64


@dataclass
class Match:
    """One error found in the log, with its best record. line/end_line are 1-based lines of the
    original log; alternatives are other (id, score) that fit the same text."""

    id: str
    score: float
    method: str
    line: int
    end_line: int
    text: str
    captures: list[str] = field(default_factory=list)
    capture_names: list[str | None] = field(default_factory=list)
    evidence: list[str] = field(default_factory=list)
    alternatives: list[tuple[str, float]] = field(default_factory=list)
    suggestion: str | None = None
    occurrences: int = 1
    other_lines: list[int] = field(default_factory=list)
    duplicates: list[str] = field(default_factory=list)
    # Where the record comes from when asked for (set by the knowledge base that matched).
    source: RecordSource | None = field(default=None, repr=False, compare=False)

    @property
    def record(self) -> dict[str, Any] | None:
        """The matched record in the dataset's own keys, fetched when first asked for (with
        every other match of the same report, in one query); None for a bare index."""
        return None if self.source is None else self.source.get(self.id)

    @property
    def log_order(self) -> tuple[int, int, float]:
        """Sort key for printing in log order."""
        return (self.line, self.end_line, -self.score)

    def __lt__(self, other: Match) -> bool:
        """Matches sort in log order (`sorted(report.matches)`); the report lists them best
        first."""
        return self.log_order < other.log_order

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "score": round(self.score, 3),
            "method": self.method,
            "line": self.line,
            "end_line": self.end_line,
            "text": self.text,
            "captures": list(self.captures),
            "capture_names": list(self.capture_names),
            "evidence": list(self.evidence),
            "alternatives": [[i, round(s, 3)] for i, s in self.alternatives],
            "suggestion": self.suggestion,
            "occurrences": self.occurrences,
            "other_lines": list(self.other_lines),
            "duplicates": list(self.duplicates),
        }


class RecordSource:
    """Records by id for a report's matches: one fetch, the first time any is asked for."""

    def __init__(self, ids: Iterable[str], fetch: Callable[[list[str]], dict[str, Any]]):
        self._ids = list(dict.fromkeys(ids))
        self._fetch = fetch
        self._records: dict[str, Any] | None = None

    def get(self, record_id: str) -> dict[str, Any] | None:
        if self._records is None:
            self._records = self._fetch(self._ids)
        found = self._records.get(record_id)
        if found is None and record_id not in self._ids:  # asked for one not in the report
            found = self._fetch([record_id]).get(record_id)
        return found


@dataclass
class MatchReport:
    """Matches best first (the JSON contract); `in_log_order()` for reading. `unmatched`
    lists, in log order, the error-looking lines no record explains."""

    matches: list[Match]
    stats: dict[str, Any]
    unmatched: list[Unmatched] = field(default_factory=list)

    def in_log_order(self) -> list[Match]:
        return sorted(self.matches, key=lambda m: m.log_order)

    def add_suggestions(
        self, search: Callable[[str, int], Sequence[Mapping[str, Any]]], limit: int = 3
    ) -> None:
        """Fill in `kb search` hits for the first MAX_SUGGESTED unmatched lines: `search`
        takes words and a limit and returns results with "id", "score" and "errorMessage"."""
        for entry in self.unmatched[:MAX_SUGGESTED]:
            words = entry.query()
            if not words or entry.suggestions:
                continue
            entry.suggestions = [
                {
                    "id": r["id"],
                    "score": round(float(r["score"]), 3),
                    "errorMessage": r["errorMessage"],
                }
                for r in search(words, limit)
            ]


@dataclass
class Unmatched:
    """An error-looking line no record explains: an exception line (its class, and the
    innermost library frame of its traceback), or an ERROR / FATAL line; `suggestions` are the
    records `kb search` finds for its words. Identical lines are one entry."""

    line: int
    text: str
    error_class: str | None = None
    frame: str | None = None
    message: str = ""
    occurrences: int = 1
    suggestions: list[dict[str, Any]] = field(default_factory=list)
    words: tuple[str, ...] = ()  # its rarest words, if the scan chose them

    def query(self) -> str:
        """The words to search by: the rarest of the message's, else the message (or the
        line), at most MAX_QUERY_WORDS of it."""
        if self.words:
            return " ".join(self.words)
        words = (self.message or self.text).split()
        return " ".join(words[:MAX_QUERY_WORDS])

    def to_dict(self) -> dict[str, Any]:
        return {
            "line": self.line,
            "text": self.text,
            "error_class": self.error_class,
            "frame": self.frame,
            "occurrences": self.occurrences,
            "suggestions": list(self.suggestions),
        }


def rank(candidates: Sequence[Candidate]) -> list[Candidate]:
    """Each record once (its best reading: a pattern's over a near miss's), best first: by
    score, then the more specific pattern, then the record's place in the cache (stable
    across runs)."""
    best_by_id: dict[str, Candidate] = {}
    for cand in candidates:
        old = best_by_id.get(cand.record.id)
        # its words matched exactly: that reading of a record stands over a near miss of it
        if old is None or (cand.method in EXACT, cand.score) > (old.method in EXACT, old.score):
            best_by_id[cand.record.id] = cand
    return sorted(best_by_id.values(), key=lambda c: (-c.score, -c.literal_chars, c.record.idx))


def to_match(
    ranked: Sequence[Candidate],
    top: int,
    text: str,
    calibrate: Callable[[float], float] = lambda raw: raw,
) -> Match:
    """The match for one place in the log from its ranked candidates; `text` is the log's
    text there; scores are reported as `calibrate` gives them."""
    best = ranked[0]
    hit = best.hit
    names: list[str | None] = []
    if hit.method == "pattern" and hit.pattern is not None:
        names = list(hit.pattern.names)
        if len(names) != len(hit.captures):
            names = [None] * len(hit.captures)
    # Near-duplicates that tie with the best (same message, nothing in the log to tell them
    # apart) are all listed, then the next best up to `top` records in all.
    all_ties = [c for c in ranked[1:] if c.score >= best.score - TIE]
    ties = all_ties[:MAX_TIES]
    rest = list(ranked[1 + len(all_ties) :][: max(0, top - 1 - len(ties))])
    return Match(
        id=best.record.id,
        score=round(calibrate(best.score), 3),
        method=best.method,
        line=hit.line,
        end_line=hit.end_line,
        text=clip(strip_prefix(text), TEXT_MAX_CHARS),
        captures=list(hit.captures),
        capture_names=names,
        evidence=list(best.evidence),
        alternatives=[(c.record.id, round(calibrate(c.score), 3)) for c in ties + rest],
        suggestion=suggest(hit.captures),
        duplicates=[c.record.id for c in all_ties[:MAX_DUPLICATES]],
    )


class Matches:
    """The matches of one log so far. The same error again (a retry, pytest's short summary)
    is one match: its other lines kept, its best-evidenced reading kept.

    Repeats are found by hashing, never by comparing with every earlier match: one record
    matched with different values on each of 8,000 lines once took 53 s, pair by pair."""

    def __init__(self, *, log: bool = False) -> None:
        self.found: list[Match] = []
        # every match as it was added, before folding (`log`): a part of a log matched apart
        # (kb.matcher.split) is folded again with the other part's
        self.log: list[Match] | None = [] if log else None
        self._by_values: dict[tuple[str, tuple[str, ...]], Match] = {}
        self._by_line: dict[tuple[str, int], Match] = {}
        self._lines: dict[str, list[int]] = {}  # each record's matched lines, sorted
        # For repeats cut short: the values at each place, sorted (with the match's place in
        # `found`), under the record, the number of values and the values before that place;
        # and the matches with a value cut short, by record and number of values.
        self._sorted_values: dict[tuple[str, int, tuple[str, ...]], list[tuple[str, int]]] = {}
        self._with_cut: dict[tuple[str, int], list[int]] = {}

    def near(self, record_id: str, line: int, distance: int) -> bool:
        """Whether the record was matched within `distance` lines of `line`."""
        lines = self._lines.get(record_id, [])
        i = bisect.bisect_left(lines, line - distance)
        return i < len(lines) and lines[i] <= line + distance

    def add(self, match: Match) -> None:
        if self.log is not None:
            self.log.append(replace(match, other_lines=[]))  # as it is now, folds aside
        key = (match.id, tuple(match.captures))
        seen = (
            self._by_values.get(key)
            or self._by_line.get((match.id, match.line))
            or self._truncated_repeat(match)
        )
        if seen is None:
            self._by_values[key] = match
            self._by_line[(match.id, match.line)] = match
            self.found.append(match)
            bisect.insort(self._lines.setdefault(match.id, []), match.line)
            values = tuple(match.captures)
            place = len(self.found) - 1
            for i, value in enumerate(values):
                before = (match.id, len(values), values[:i])
                bisect.insort(self._sorted_values.setdefault(before, []), (value, place))
            if any(_is_cut(value) for value in values):
                self._with_cut.setdefault((match.id, len(values)), []).append(place)
            return
        if match.line != seen.line and match.line not in seen.other_lines:
            # (one line read twice, as a JSON record and unpacked, is one occurrence)
            seen.occurrences += 1
            if len(seen.other_lines) < MAX_OTHER_LINES:
                seen.other_lines.append(match.line)
        if match.score > seen.score:
            seen.score = match.score
            seen.method = match.method
            seen.evidence = match.evidence
            seen.alternatives = match.alternatives
            seen.duplicates = match.duplicates

    def _truncated_repeat(self, match: Match) -> Match | None:
        """The first earlier match of the same record whose values this one repeats cut
        short, or that repeats this one's cut short, as pytest's short test summary does
        ("Invalid version: '2.1.0-..."). Values equal to the end are a repeat found by
        hashing, so a pair needs a value cut short: a match with one looks among those whose
        values start the same (a range of a sorted list), and every match among those with a
        cut value of their own, up to MAX_FOLD_SCAN of each."""
        values = tuple(match.captures)
        places = list(self._with_cut.get((match.id, len(values)), [])[:MAX_FOLD_SCAN])
        first_cut = next((i for i, value in enumerate(values) if _is_cut(value)), None)
        if first_cut is not None:
            stem = _ELLIPSIS_RE.sub("", values[first_cut])
            ordered = self._sorted_values.get((match.id, len(values), values[:first_cut]), [])
            start = bisect.bisect_left(ordered, (stem,))
            for value, place in ordered[start : start + MAX_FOLD_SCAN]:
                if not value.startswith(stem):
                    break
                places.append(place)
        for place in sorted(set(places)):
            seen = self.found[place]
            if all(_same_or_cut(a, b) for a, b in zip(seen.captures, values, strict=True)):
                return seen
        return None


def _is_cut(value: str) -> bool:
    """Whether a captured value ends the way a cut-short one does ("...", "…")."""
    return _ELLIPSIS_RE.search(value) is not None


def _same_or_cut(a: str, b: str) -> bool:
    if a == b:
        return True
    for full, cut in ((a, b), (b, a)):
        stem = _ELLIPSIS_RE.sub("", cut)
        if stem != cut and full.startswith(stem):
            return True
    return False


def suggest(captures: Sequence[str]) -> str | None:
    """'did you mean' when one capture lists the valid choices and another is the bad value."""
    if len(captures) < 2:
        return None
    for i, listed in enumerate(captures):
        choices = [c.strip(_CHOICE_TRIM) for c in _CHOICE_SPLIT.split(listed)]
        choices = [c for c in choices if c and len(c) <= MAX_CHOICE_CHARS]
        if len(choices) < MIN_CHOICES:
            continue
        for j, value in enumerate(captures):
            bad = value.strip(_CHOICE_TRIM)
            if j == i or not bad or len(bad) > MAX_CHOICE_CHARS or bad in choices:
                continue
            from rapidfuzz import fuzz, process  # only for a message that lists choices

            best = process.extractOne(bad, choices, scorer=fuzz.WRatio, score_cutoff=SUGGEST_CUTOFF)
            if best is not None:
                return f"did you mean '{best[0]}'?"
    return None


def settled(candidates: list[Candidate], min_score: float) -> bool:
    """Whether a reading of a place in the log is sure enough that no near miss needs
    looking for: a pattern or code reading, not doubted by its traceback, not a phrase
    that may hide a specific template, scoring min_score (the best one, almost always)."""
    for cand in sorted(candidates, key=lambda c: -c.score):
        if cand.score < min_score:
            return False
        if cand.method != "frame" and not cand.doubted and not may_read_better(cand):
            return True
    return False


def may_read_better(cand: Candidate) -> bool:
    """Whether a specific template may read a phrase's line better: the phrase has nothing
    but its words behind it, and its placeholders swallowed prose ("MRV set computation
    for derivatives" into "{func} not implemented"), not values ("<class 'str'>", 64)."""
    if not (cand.phrase and cand.unsupported):
        return False
    swallowed = normalize_template(" ".join(cand.hit.captures))
    return len(swallowed.split()) >= PROSE_WORDS
