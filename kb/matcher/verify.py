"""Verification: does a candidate pattern really match the log where its key was found?

The prefilter only says a pattern's key is on a line. Here the text the pattern should run on
is cut out (the subjects: the line, the lines a multi-line pattern spans, a repr-quoted
KeyError unquoted, a message whose value runs on over the next lines), the pattern runs in RE2
(linear time: no pattern, however hostile, can hang a match), each compiled once, and the
values it captured are read off. A pattern only a backtracking engine can run (lookarounds,
backreferences) runs as RE2's superset of it, never in Python's `re`: one such pattern hung a
match for minutes on a 60-character line.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Sequence
from typing import Any, Final, NamedTuple

from kb.logline import LEVEL_WORDS, exception_of, repr_exception, strip_prefix, unrepr_message
from kb.matcher.cache import Pattern

# A message may run on over this many lines when a value in it has newlines.
MAX_VALUE_LINES: Final = 12
# Where a message that runs on over lines surely ends: a new record, a traceback, a frame.
VALUE_STOP_RE: Final = re.compile(
    r"\S*\d\d:\d\d|\[?(?:" + LEVEL_WORDS + r")\b|Traceback|"
    r"During handling|The above exception|\s*File \"|\s+at |[\w.]+(?:Error|Exception):|E  |_ _ _"
)
_CODE_BOUNDARY: Final = re.compile(r"[\w-]")
# A key shared by this many patterns or more is checked on a line by one RE2 set of them, not
# pattern by pattern: 1,800 records keyed on "Error: " once made each line of a log 1,800
# candidates. (The shared corpus's keys have at most 18 patterns: they never get here.)
SHARED_KEY_PATTERNS: Final = 32
# A backtracking-only pattern is checked exactly on spans up to this long (see _confirm).
GUARD_MAX_CHARS: Final = 256


class Subject(NamedTuple):  # a NamedTuple: see kb.matcher.scoring.ScoringConfig
    """Text to run a pattern on: lines first..last of the scan's window, joined."""

    first: int
    last: int
    text: str
    # A value with newlines in it carries the message on over the lines below it: tried with
    # `.` matching newlines, and the match says where it ends.
    runs_on: bool = False


class Hit(
    NamedTuple
):  # a NamedTuple: see kb.matcher.scoring.ScoringConfig (give its fields by name)
    """A place in the log that may be a known error: rows first..last (logical lines of the
    whole log, 0-based), lines line..end_line of the original log (1-based)."""

    first: int
    last: int
    line: int
    end_line: int
    method: str  # pattern | code | frame | fuzzy
    pattern: Pattern | None  # what matched (pattern) or nearly did (fuzzy)
    records: Sequence[int]  # the cache's records it may be
    subject: str  # the text it was found in, without the line's prefix
    captures: Sequence[str] = ()
    whole: bool = False  # the pattern covers the whole message, not a piece of it
    code: str | None = None  # the error code found (code)
    level: str | None = None  # the log level printed in the line's prefix


class Verified(NamedTuple):  # a NamedTuple: see kb.matcher.scoring.ScoringConfig
    """A pattern verified on the lines `first`..`last`: the text it matched, its captures,
    and whether it matched the whole message."""

    first: int
    last: int
    text: str
    captures: list[str]
    whole: bool


def subjects(lines: Sequence[str], line_index: int, pattern: Pattern, final: bool) -> list[Subject]:
    """What to run `pattern` on, for its key found on lines[line_index]; empty when the lines
    it needs are not all there yet (the next block carries them back) or none fit."""
    out: list[Subject] = []
    start = line_index - pattern.key_line
    end = start + pattern.newlines
    if start >= 0 and end < len(lines):
        if pattern.newlines:
            text = "\n".join(strip_prefix(lines[k]) for k in range(start, end + 1))
        else:
            text = strip_prefix(lines[line_index])
        out.append(Subject(start, end, text))
    elif end >= len(lines) and not final:
        return []  # seen again, whole, in the next block's carried lines
    one = strip_prefix(lines[line_index])
    exc = exception_of(one)
    if exc is not None and exc[0].rpartition(".")[2].endswith("KeyError"):
        plain = unrepr_message(exc[1])
        if plain is not None:
            out.append(Subject(line_index, line_index, f"{exc[0]}: {plain}"))
    elif exc is None and ("('" in one or '("' in one):
        # an exception shown as its repr inside the line: `raised ValueError('...')`
        shown = repr_exception(one)
        if shown is not None:
            out.append(Subject(line_index, line_index, f"{shown[0]}: {shown[1]}"))
    if '\\"' in one or "\\'" in one:
        # a message quoted inside a quoted field (logfmt error="...", a JSON string kept
        # whole): its own quotes arrive escaped
        out.append(Subject(line_index, line_index, one.replace('\\"', '"').replace("\\'", "'")))
    if pattern.newlines == 0:
        # A value with newlines in it (a DataFrame, a list of errors) carries the message on
        # over the next lines: from the exception line at or above the hit, tried last.
        top = line_index
        while exc is None and top > 0 and line_index - top < MAX_VALUE_LINES:
            if not lines[top].strip() or VALUE_STOP_RE.match(lines[top]):
                break
            top -= 1
            exc = exception_of(strip_prefix(lines[top]))
        end = top
        while exc is not None and end + 1 < len(lines) and end - top < MAX_VALUE_LINES:
            following = lines[end + 1]
            if not following.strip() or VALUE_STOP_RE.match(following):
                break
            end += 1
        if exc is not None and end >= line_index and end > top:
            text = "\n".join(strip_prefix(lines[k]) for k in range(top, end + 1))
            out.append(Subject(top, end, text, runs_on=True))
    return out


class Verifier:
    """Runs patterns in RE2, each compiled once (and its `.`-matches-newline form once)."""

    def __init__(self) -> None:
        self._compiled: dict[int, Any] = {}  # None: the pattern cannot be compiled
        self._runs_on: dict[int, Any] = {}
        self._shared_keys: dict[int, SharedKey] = {}  # by key id

    def shared_key(self, key_id: int, patterns: Callable[[], Sequence[Pattern]]) -> SharedKey:
        """The RE2 set of a key many patterns share (`patterns` read only the first time)."""
        found = self._shared_keys.get(key_id)
        if found is None:
            found = self._shared_keys[key_id] = SharedKey(patterns())
        return found

    def verify(self, pattern: Pattern, candidates: Sequence[Subject]) -> Verified | None:
        """The first subject the pattern matches, with what it captured."""
        if pattern.others:
            # every literal piece must be there: a substring test rejects most candidates
            # before their regex is compiled and run
            candidates = [s for s in candidates if all(piece in s.text for piece in pattern.others)]
            if not candidates:
                return None
        compiled = self._compile(pattern)
        if compiled is None:
            return None
        for subject in candidates:
            last = subject.last
            if subject.runs_on:
                runs_on = self._compile_runs_on(pattern)
                m = runs_on.search(subject.text) if runs_on is not None else None
                if m is None:
                    continue
                last = subject.first + subject.text.count("\n", 0, m.end())
            else:
                m = compiled.search(subject.text)
            if m is None:
                continue
            if pattern.engine == "guarded" and not _confirm(pattern, subject.text, m):
                continue
            leading = pattern.regex.startswith("^(")
            return Verified(
                first=subject.first,
                last=last,
                text=subject.text,
                captures=captures(m, subject.text),
                whole=covers_message(subject.text, m.start(), m.end(), leading),
            )
        return None

    def _compile(self, pattern: Pattern) -> Any:
        if pattern.idx not in self._compiled:
            from kb.regex import compile_re2  # once a candidate survives its substring test

            try:
                if pattern.engine == "guarded":
                    source = pattern.relaxed
                    self._compiled[pattern.idx] = compile_re2(source) if source else None
                else:
                    self._compiled[pattern.idx] = compile_re2(pattern.regex)
            except Exception:
                self._compiled[pattern.idx] = None
        return self._compiled[pattern.idx]

    def _compile_runs_on(self, pattern: Pattern) -> Any:
        if pattern.engine == "guarded":
            return None
        if pattern.idx not in self._runs_on:
            from kb.regex import compile_re2

            try:
                self._runs_on[pattern.idx] = compile_re2("(?s)" + pattern.regex)
            except Exception:
                self._runs_on[pattern.idx] = None
        return self._runs_on[pattern.idx]


class SharedKey:
    """The one-line patterns of a key many patterns share, in one RE2 set: one pass over a
    line's subjects says which of them may match there (a superset: `.` matches newlines, a
    backtracking-only pattern is its RE2 superset). Patterns the set cannot hold (spanning
    lines, not compilable) are always candidates."""

    def __init__(self, patterns: Sequence[Pattern]) -> None:
        import re2

        from kb.regex import quiet_options

        self.always: set[int] = set()  # pattern idxs tried one by one
        self._place = {pattern.idx: i for i, pattern in enumerate(patterns)}
        self._members: list[int] = []  # the set's index -> pattern idx
        self._set: Any = re2.Set.SearchSet(quiet_options())
        for pattern in patterns:
            source = pattern.relaxed if pattern.engine == "guarded" else pattern.regex
            if pattern.newlines or not source:
                self.always.add(pattern.idx)
                continue
            try:
                self._set.Add("(?s)" + source)
            except re2.error:
                self.always.add(pattern.idx)
                continue
            self._members.append(pattern.idx)
        try:
            self._set.Compile()
        except re2.error:  # past RE2's memory budget: each tried alone
            self.always.update(self._members)
            self._members = []

    def candidates(self, texts: Sequence[str]) -> list[int]:
        """The idxs of the patterns that may match one of `texts`, in the key's order."""
        found = set(self.always)
        if self._members:
            for text in texts:
                found.update(self._members[i] for i in self._set.Match(text) or ())
        return sorted(found, key=self._place.__getitem__)


def _confirm(pattern: Pattern, subject: str, m: Any) -> bool:
    """A backtracking-only pattern (a backreference, a lookaround) checked exactly where RE2
    found its superset, but only where that is bounded: a short span, and a pattern that
    cannot backtrack without end (`nested`). Otherwise RE2's superset stands."""
    if pattern.nested or m.end() - m.start() > GUARD_MAX_CHARS:
        return True
    compiled = _python_regex(pattern.regex)
    return compiled is not None and compiled.search(subject[m.start() : m.end()]) is not None


@functools.lru_cache(maxsize=512)  # as many as re's own cache keeps
def _python_regex(regex: str) -> re.Pattern[str] | None:
    """A backtracking-only pattern compiled by Python once, with the warnings Python gives
    about it (`[a-z--]`) kept off the terminal; None if Python cannot compile it."""
    from kb.regex import quietly

    try:
        return quietly(lambda: re.compile(regex))
    except re.error:
        return None


def covers_message(subject: str, start: int, end: int, leading: bool = False) -> bool:
    """Whether a match spans the message from its start (after "Class: ") to the line's end.
    A pattern opening with a placeholder covers anything, unless a class marks the start."""
    exc = exception_of(subject)
    if leading and exc is None:
        return False
    msg_start = len(subject) - len(exc[1]) if exc else 0
    tail = subject[end:].strip().rstrip(".")
    return start <= msg_start + 1 and not tail


def captures(m: Any, subject: str) -> list[str]:
    """Captured values as a person reads them: the log's prefix and the exception class cut off
    a leading group, whitespace trimmed."""
    out: list[str] = []
    for i in range(1, (m.re.groups if hasattr(m, "re") else 0) + 1):
        value = m.group(i)
        if value is None:
            out.append("")
            continue
        if i == 1 and m.start(1) == 0:
            exc = exception_of(value + " ")
            if exc is not None:
                value = exc[1] if exc[1] else value
        out.append(value.strip())
    return out


def has_code(line: str, code: str) -> bool:
    """Whether `code` is on the line as a word of its own, not inside a longer one."""
    pos = line.find(code)
    while pos >= 0:
        before = line[pos - 1 : pos]
        after = line[pos + len(code) : pos + len(code) + 1]
        if not _CODE_BOUNDARY.match(before or " ") and not _CODE_BOUNDARY.match(after or " "):
            return True
        pos = line.find(code, pos + 1)
    return False
