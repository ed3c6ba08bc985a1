"""Near misses within one match call: a line no pattern explains read as a reworded message.

What is tried comes from kb.matcher.scan (exception lines, and in a short paste its paragraphs
and lines); here each becomes a query (its class, a message continued below its line, cut
short, repr-quoted), the records its traceback points at are gathered (the frames' files and
functions, a function moved to another module), and the near misses kb.matcher.fuzzy finds
are scored. Imported only when a log has a line to try.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from kb import logline
from kb.logline import cut_message, exception_of, strip_prefix, unrepr_message
from kb.matcher.cache import TEMPLATE_MIN_CHARS, normalize_template
from kb.matcher.evidence import is_builtin_message, package_of_path, uncalibrated
from kb.matcher.scorer import Candidate
from kb.matcher.tracebacks import SOURCE_LINE_RE, Traceback, function_name
from kb.matcher.verify import VALUE_STOP_RE, Hit

if TYPE_CHECKING:
    from kb.matcher.state import ScanState

# Near misses one match call may look up (distinct messages): each searches every template.
MAX_NEAR_MISS_QUERIES: Final = 40
# A paragraph of a short paste longer than this is not one message.
PARAGRAPH_MAX_LINES: Final = 8
# A message may run on below its exception line over this many lines.
MAX_MESSAGE_LINES: Final = 12
# A message shorter than TEMPLATE_MIN_CHARS is aligned only with the records its traceback
# points at, and not at all below this.
SHORT_QUERY_CHARS: Final = 8
# Frames of a traceback (innermost first) whose files' records are aligned with its message,
# and at most how many records they bring.
FRAME_FILES: Final = 6
FRAME_RECORDS: Final = 80
# A function name raised in more places than this (`validate`, `forward`) says too little to
# follow it into other modules.
MOVED_RECORDS: Final = 40
# Rewordings of a message read exactly are listed this much below the exact reading.
REWORDING_BELOW: Final = 0.95


def paragraphs(scan: ScanState) -> list[tuple[int, int, str]]:
    """Runs of two or more non-blank lines of a short paste, each joined into one line (a
    message hard-wrapped on word boundaries), without an introduction ending in ":"."""
    out: list[tuple[int, int, str]] = []
    run: list[int] = []
    lines = scan.window.lines
    for line_index in range(len(lines) + 1):
        line = strip_prefix(lines[line_index]) if line_index < len(lines) else ""
        if line.strip() and not SOURCE_LINE_RE.match(line):
            run.append(line_index)
            continue
        while run and strip_prefix(lines[run[0]]).rstrip().endswith(":"):
            run.pop(0)  # "Copied from the report:", "Error:"
        if 2 <= len(run) <= PARAGRAPH_MAX_LINES:
            text = " ".join(strip_prefix(lines[k]).strip() for k in run)
            first = scan.window.first_row
            out.append((first + run[0], first + run[-1], text))
        run = []
    return out


def candidates(
    scan: ScanState,
    row: int,
    error: tuple[str, str],
    tb: Traceback | None,
    *,
    last: int | None = None,
) -> list[Candidate]:
    """The records a reworded message on `row` (to `last`) may be: the templates closest
    to it, and the records raised where its traceback's frames are."""
    line_index = row - scan.window.first_row
    if not 0 <= line_index < len(scan.window.lines):
        return []
    printed_class, message = error
    if printed_class.endswith("KeyError"):
        message = unrepr_message(message) or message
    if (
        last is None
        and printed_class
        and not strip_prefix(scan.window.lines[line_index])[:1].isspace()
    ):
        # a message of several lines runs on below its exception line (an indented one is
        # source code or a docstring quoted in a report)
        more, end = continuation(scan, line_index)
        if more:
            message = message + "\n" + more
            last = row + (end - line_index)
    message, cut = cut_message(message)
    query = normalize_template(message)
    named = frame_records(scan, tb)
    if len(query) < TEMPLATE_MIN_CHARS and (not named or len(query) < SHORT_QUERY_CHARS):
        return []
    key = (query, cut, tuple(named))
    if key in scan.near_miss_found:
        found = scan.near_miss_found[key]
    elif scan.near_miss_queries >= MAX_NEAR_MISS_QUERIES:
        return []
    else:
        scan.near_miss_queries += 1
        found = scan.near_misses().lookup(query, scan.scorer.config, cut=cut, records=named)
        scan.near_miss_found[key] = found
    scan.aligned = {rec for near in found for rec in near.records}
    phrase = scan.scorer.config.phrase_literal_chars
    scan.aligned_best = max(
        (n.alignment.gap for n in found if n.alignment.template_chars >= phrase), default=0.0
    )
    if not found:
        return []
    said = f"{printed_class}: {message}" if printed_class else message
    builtin = is_builtin_message(said)
    hit = scan.trials.line_hit(line_index, "fuzzy", None, ())
    if last is not None and last != row:
        last_index = last - scan.window.first_row
        hit = Hit(
            first=row,
            last=last,
            line=scan.window.line_nos[line_index],
            end_line=scan.window.end_nos[last_index],
            method="fuzzy",
            pattern=None,
            records=(),
            subject=message,
        )
    out: list[Candidate] = []
    scan.reader.load_records(rec_idx for near in found for rec_idx in near.records)
    for near in found:
        for rec_idx in near.records:
            cand = scan.scorer.score_near_miss(
                scan.reader.record(rec_idx),
                hit,
                near.alignment,
                printed_class,
                tb,
                builtin,
            )
            if cand is not None:
                out.append(cand)
    return out


def rewordings(scan: ScanState, found: list[Candidate], tb: Traceback | None) -> list[Candidate]:
    """In a short paste, a message read by its words alone (nothing in the log beyond the words
    and the class speaks for the best reading) may as well be another record's message reworded:
    the words an old release printed are often, word for word, what another raise says today.
    Its near misses are listed after the exact reading, never above it (the words do match it)."""
    best = max(found, key=lambda c: c.score, default=None)
    if best is None or best.method not in ("pattern", "code") or not best.unsupported:
        return []
    config = scan.scorer.config
    if best.score < uncalibrated(config.min_score, config.calibration):
        # below the default threshold (a --min-score lowered to see guesses) the near misses
        # are not listed under it: what kb reports there must be what it would look up anyway
        return []
    row = best.hit.first
    if row in scan.near_miss_rows:
        return []
    scan.near_miss_rows.add(row)
    error = scan.errors.get(row) or ("", best.hit.subject)
    below = best.score * REWORDING_BELOW
    out = candidates(scan, row, error, tb)
    for cand in out:
        cand.score = min(cand.score, below)
    return out


def continuation(scan: ScanState, line_index: int) -> tuple[str, int]:
    """The lines below an exception line that carry its message on (a message of several
    lines), joined, and the index of the last; ("", line_index) when none does. They have
    no log prefix of their own (or the exception line's very prefix), are not blank, and
    are no frame, exception line or new traceback."""
    lines = scan.window.lines
    line = lines[line_index]
    prefix = line[: len(line) - len(strip_prefix(line))]
    end = line_index
    more: list[str] = []
    while end + 1 < len(lines) and end - line_index < MAX_MESSAGE_LINES:
        following = lines[end + 1]
        if prefix and following.startswith(prefix):
            body = following[len(prefix) :]
        elif strip_prefix(following) != following or VALUE_STOP_RE.match(following):
            break
        else:
            body = following
        if (
            not body.strip()
            or VALUE_STOP_RE.match(body)
            or exception_of(body.strip()) is not None
            or logline.parse_frame(body) is not None
        ):
            break
        more.append(body)
        end += 1
    return "\n".join(more), end


def frame_records(scan: ScanState, tb: Traceback | None) -> list[int]:
    """Records raised where the traceback's library frames are: in the frame's file, in
    its function or near its line, or in a function of its name elsewhere in its package
    (moved between versions). Their messages are aligned with the exception's even when
    no shortlist has them."""
    if tb is None or not tb.frames:
        return []
    near = scan.scorer.config.frame_file_lines
    out: dict[int, None] = {}
    moved_tried = False
    for seen in tb.frames[:FRAME_FILES]:
        frame = seen.frame
        function = function_name(frame.func)
        found = scan.reader.file_records(frame)
        if found is not None:
            _path, entries = found
            # the function's records from its own index, not every record of the file read
            # (a file can have thousands)
            raised_in = set(scan.reader.function_records(function)) if function else set()
            for line_number, rec in entries:
                # a record without a lineNumber could be anywhere in the file
                close = line_number is None or abs(line_number - frame.line) <= near
                if close or rec in raised_in:
                    out[rec] = None
        package = package_of_path(frame.norm_path)
        if (
            not moved_tried
            and package is not None
            and package in scan.reader.known_packages()
            and function is not None
            and function.isidentifier()
            and not function.endswith("__")
        ):
            # the innermost frame of a known library: its function may have moved to
            # another module of the library since the version that printed this
            moved_tried = True
            moved = scan.reader.function_records(function)
            if len(moved) <= MOVED_RECORDS:
                scan.reader.load_records(moved)
                for rec in moved:
                    if scan.reader.record(rec).package == package:
                        out[rec] = None
        if len(out) >= FRAME_RECORDS:
            break
    return list(out)[:FRAME_RECORDS]
