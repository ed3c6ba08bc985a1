"""What no record explains: the error-looking lines of a log that no match covers.

Each traceback's exception (with its innermost library frame; a chain of tracebacks is one
error), other exception lines, ERROR / FATAL lines outside tracebacks (a run of them is one
record printed over lines), and in a short paste with nothing known its lines that resemble a
known message. Identical ones are one entry. Imported only when a log has such a line.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Final

from kb.logline import strip_prefix
from kb.matcher.cache import normalize_template, words_of
from kb.matcher.nearmiss import continuation
from kb.matcher.rank import MAX_SUGGESTED, Match, Unmatched
from kb.matcher.state import ScanState, Seen
from kb.matcher.tracebacks import Traceback
from kb.text import clip

# Distinct unmatched lines reported at most (the rest of a noisy log's are left out).
MAX_UNMATCHED: Final = 50
UNMATCHED_TEXT_CHARS: Final = 300
# A short paste with nothing known in it lists at most this many of its lines that resemble a
# known message.
SHORT_PASTE_UNMATCHED: Final = 3
# An unmatched line is searched by this many of its rarest words.
SUGGEST_WORDS: Final = 5
# Rows above a traceback's first frame that belong to it: its header, and the log line that
# announced it ("ERROR job failed").
TRACEBACK_HEAD_ROWS: Final = 2
# A traceback without its exception line is one error with a match this close below it.
FRAMELESS_REACH: Final = 60
# "During handling of the above exception" / "The above exception was the direct cause": the
# next traceback follows from this one (looked for this few rows under its exception).
CHAIN_ROWS: Final = 4
CHAIN_RE: Final = re.compile(r"During handling of the above exception|The above exception was")
# Where a message was cut short, anywhere in a line (a summary line joined with the next).
ELLIPSIS_RE: Final = re.compile(r"\.\.\.|…")
# Lines of a traceback's own text, never an error of their own.
TRACEBACK_TEXT_RE: Final = re.compile(
    r"(?:Traceback \(most recent call last\)|During handling of|The above exception)"
)
# A path inside installed code, and its part from the package folder on.
INSTALLED_RE: Final = re.compile(r"(?:site-packages|dist-packages|node_modules)/(.+)$")
# A message cut this short is not taken for the start of a matched one.
SHORT_STEM_CHARS: Final = 8


def collect(scan: ScanState, bound: int, final: bool, tracebacks: list[Traceback]) -> None:
    """Error-looking lines of the settled rows (those above `bound`; all of them when the log
    is `final`ly read) that no match explains: each traceback's exception (with its innermost
    library frame; a chain of tracebacks is one error), other exception lines, ERROR / FATAL
    lines outside tracebacks (a run of them is one record printed over lines). Identical ones
    are one entry, at most MAX_UNMATCHED; they go to `scan.unmatched`."""
    window = scan.window
    first = max(scan.unmatched_from, window.first_row)
    if bound <= first:
        return
    found: list[tuple[int, str | None, str, str | None]] = []
    in_traceback: set[int] = set()
    chain: list[tuple[Traceback, range]] = []
    for tb in sorted((t for t in tracebacks if t.frames), key=lambda t: t.frames[-1].row):
        rows = [seen.row for seen in tb.frames]
        top = min(rows) - TRACEBACK_HEAD_ROWS
        exception_row = tb.exception_row
        error = scan.errors.get(exception_row) if exception_row is not None else None
        if exception_row is None or not starts_with_class(scan, exception_row, error):
            error = None  # "except TypeError:" in a quoted listing, not the exception
        if error is not None and exception_row is not None:
            end = exception_row
            if end - window.first_row >= 0:
                end = continuation(scan, end - window.first_row)[1] + window.first_row
            reach = range(top, end + 1)
        else:
            end = max(rows)
            reach = range(top, end + FRAMELESS_REACH)
        in_traceback.update(range(top, end + 1))
        chain.append((tb, reach))
        if error is not None and chained_below(scan, end):
            continue  # "During handling of the above exception": one error with the next
        links, chain = chain, []
        last_row = max(r.stop for _tb, r in links)
        if last_row > bound and not final:
            # the end of the chain is not settled yet: look again from its start next time
            bound = min(bound, min(r.start for _tb, r in links))
            break
        if any(scan.explained.intersection(r) for _tb, r in links):
            continue
        for link, _reach in links:
            row = link.exception_row if link.exception_row is not None else link.frames[0].row
            if not first <= row < bound:
                continue
            error = scan.errors.get(row)
            if error is None or not starts_with_class(scan, row, error):
                row = link.frames[0].row
                text = strip_prefix(window.line_at(row) or "").strip()
                found.append((row, None, text, library_frame(scan, link)))
            else:
                found.append((row, error[0] or None, error[1], library_frame(scan, link)))
    for row, (printed_class, message) in scan.errors.items():
        settled = first <= row < bound and row not in in_traceback
        if settled and row not in scan.explained and message.strip():  # not a bare "Error:"
            found.append((row, printed_class or None, message, None))
    for run in level_runs(scan, first, bound):
        if in_traceback.intersection(run) or scan.explained.intersection(run):
            continue
        row = run[0]
        if row in scan.errors:
            continue
        text = strip_prefix(window.line_at(row) or "").strip()
        if text and not TRACEBACK_TEXT_RE.match(text):
            found.append((row, None, text, None))
    if final and not found and not scan.unmatched and not scan.matches.found:
        # A short paste with nothing known in it: its lines that resemble a known message,
        # if not enough to name one, are what it is about (a paragraph before its lines).
        taken: set[int] = set()
        for row in sorted(scan.resembling):
            text, last = scan.resembling[row]
            if row not in taken and first <= row < bound:
                found.append((row, None, text, None))
                taken.update(range(row, last + 1))
        found = found[:SHORT_PASTE_UNMATCHED]
    scan.unmatched_from = bound
    for row, named_class, message, frame in sorted(found, key=lambda f: f[0]):
        if repeats_a_match(scan, message):
            continue  # a matched error again, cut short (pytest's short summary)
        line_index = row - window.first_row
        seen = Seen(window.line_nos[line_index], named_class, message, frame, "")
        if scan.unmatched_log is not None:  # every line, for a merge (kb.matcher.split)
            seen = seen._replace(text=strip_prefix(window.lines[line_index]).strip())
            scan.unmatched_log.append(seen)
        note(scan, seen, window.lines[line_index])


def note(scan: ScanState, seen: Seen, line: str = "") -> None:
    """An unexplained line into scan.unmatched, an identical one's occurrences counted (its
    class and its message as a template); `line` is the log's line, when seen has no text."""
    key = (seen.named_class, normalize_template(seen.message) or seen.message)
    entry = scan.unmatched_by_key.get(key)
    if entry is not None:
        entry.occurrences += 1
        return
    if len(scan.unmatched) >= MAX_UNMATCHED:
        return
    entry = Unmatched(
        line=seen.line,
        text=clip(seen.text or strip_prefix(line).strip(), UNMATCHED_TEXT_CHARS),
        error_class=seen.named_class,
        frame=seen.frame,
        message=seen.message,
        words=rarest_words(scan, seen.message) if len(scan.unmatched) < MAX_SUGGESTED else (),
    )
    scan.unmatched_by_key[key] = entry
    scan.unmatched.append(entry)


def rarest_words(scan: ScanState, message: str) -> tuple[str, ...]:
    """The words of a message the fewest templates hold (values and typos, which none
    hold, left out): what its search suggestions are looked up by."""
    held = {word: df for word, df, _rows in scan.reader.template_words(words_of(message))}
    known: dict[str, int] = {}
    for word in re.findall(r"[A-Za-z]\w+", message.lower()):
        df = held.get(word) or held.get(word[:-1] if word.endswith("s") else word)
        if df:
            known[word] = df
    return tuple(sorted(known, key=lambda w: known[w])[:SUGGEST_WORDS])


def repeats_a_match(scan: ScanState, message: str) -> bool:
    """Whether a message cut short ("The node ...") is the start of a matched one."""
    return repeats(message, scan.matches.found)


def repeats(message: str, found: Sequence[Match]) -> bool:
    """Whether a message cut short is the start of the text of one of the matches `found`."""
    cut = ELLIPSIS_RE.search(message)
    stem = message[: cut.start()].strip() if cut else ""
    return len(stem) >= SHORT_STEM_CHARS and any(stem in m.text for m in found)


def starts_with_class(scan: ScanState, row: int, error: tuple[str, str] | None) -> bool:
    """Whether the row's line opens with its exception's class (Python's exception line,
    pytest's "E   ValueError: ..."), not a line that only mentions one."""
    line = scan.window.line_at(row)
    return error is not None and line is not None and strip_prefix(line).startswith(error[0])


def chained_below(scan: ScanState, row: int) -> bool:
    """Whether the rows under an exception say another traceback follows from it."""
    for below in range(row + 1, row + CHAIN_ROWS + 1):
        line = scan.window.line_at(below)
        if line is not None and CHAIN_RE.search(line):
            return True
    return False


def level_runs(scan: ScanState, first: int, bound: int) -> list[list[int]]:
    """ERROR / FATAL lines of the rows first..bound, consecutive ones together (one log
    record printed over several lines, each with its prefix)."""
    runs: list[list[int]] = []
    for row in sorted(r for r in scan.level_rows if first <= r < bound):
        if runs and all(continues(scan, r) for r in range(runs[-1][-1] + 1, row)):
            runs[-1].append(row)
        else:
            runs.append([row])
    return runs


def continues(scan: ScanState, row: int) -> bool:
    """Whether a row carries the log record above on (no prefix of its own: a wrapped or
    continued line), so a run of ERROR lines goes on past it."""
    line = scan.window.line_at(row)
    return line is not None and bool(line.strip()) and strip_prefix(line) == line


def library_frame(scan: ScanState, tb: Traceback) -> str | None:
    """The innermost frame in installed or known library code, as "package/file.py:LINE"."""
    for seen in tb.frames:
        frame = seen.frame
        m = INSTALLED_RE.search(frame.norm_path)
        if m:
            return f"{m.group(1)}:{frame.line}"
        known = scan.reader.known_file(frame)
        if known is not None:
            return f"{known}:{frame.line}"
    return None
