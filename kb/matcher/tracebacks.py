"""Tracebacks: the stack frames seen in a log grouped into tracebacks, each with its exception
line, and the lines of a traceback that quote source code rather than report an error.

Works on rows (logical lines of the whole log, 0-based): `frames` and `errors` say which rows
hold a frame or an exception line, `line_at(row)` gives a row's text while it is in the scan's
window (None once it has left).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Container, Mapping, Sequence
from typing import Final, NamedTuple

from kb.logline import INNERMOST_FIRST, Frame, strip_prefix

# Most lines between two frames of one traceback (source line, ^^^^ markers; IPython: context).
FRAME_GAP: Final = 4
FRAME_GAP_JUPYTER: Final = 16
# Python traceback formats (innermost frame last), and those showing several context lines.
PYTHON_STYLES: Final = frozenset({"python", "jupyter", "rich"})
CONTEXT_STYLES: Final = frozenset({"jupyter", "rich"})
# Python prints the exception this few lines below the last frame (its source line and ^^^^
# markers between); IPython its context lines too (FRAME_GAP_JUPYTER more).
EXCEPTION_BELOW: Final = 8
# Innermost-first formats (Java, JavaScript, Go, ...) print the exception this close above.
EXCEPTION_ABOVE: Final = 6
# rich draws its traceback in a box: lines inside it are never the message.
BOX_CHARS: Final = frozenset("│╭╰┃┏┗")
# A code-looking line is quoted source only with a stack frame this close.
CODE_CONTEXT: Final = 60
# Source lines quoted in tracebacks (Python, IPython's numbered lines, JS, Rust).
SOURCE_LINE_RE: Final = re.compile(
    r"^\s*(?:-*>\s*)?(?:\d+\s+)?(?:raise|throw|panic!|assert|return|yield|await|except)\b"
)
# Inside a traceback report (pytest shows whole functions): a string literal continuing a
# statement, an assignment, pytest's "self = <...>" locals.
CODE_LINE_RE: Final = re.compile(r"^\s+(?:[rbf]|rf|fr)?[\"']|^\s*[A-Za-z_]\w* = (?:<|[rbf]?[\"'])")
# A template placeholder as written in the source: `{missing}`, `%(name)s`, `%s`.
UNFILLED_RE: Final = re.compile(r"\{[\w.\[\]()'\"!:, ]*\}|%\(\w+\)[sdr]|%[sdr]")
NUMBERED_SOURCE_RE: Final = re.compile(r"^\s*(?:-*>\s*)?\d{1,6} ")
SERVICE_RE: Final = re.compile(r"([\w.\-]{1,64}) +\| ")


class SeenFrame(NamedTuple):  # a NamedTuple: see kb.matcher.scoring.ScoringConfig
    """A stack frame found in the log: its row, its original 1-based line, the frame."""

    row: int
    line: int
    frame: Frame


class Traceback(NamedTuple):  # a NamedTuple: see kb.matcher.scoring.ScoringConfig
    """A run of stack frames and the exception line it belongs to."""

    frames: tuple[SeenFrame, ...]  # innermost first
    exception_row: int | None
    style: str
    # (path with `/` separators, line) of each frame, innermost first: made once, then held
    # against the filePath:lineNumber of every record a hit may be (hundreds, for some).
    stack: tuple[tuple[str, int], ...]
    # each frame's function name ("set_index" of "DataFrame.set_index"; None if not printed)
    functions: tuple[str | None, ...] = ()

    @classmethod
    def of(cls, frames: Sequence[SeenFrame], exception_row: int | None, style: str) -> Traceback:
        """A traceback of `frames`, innermost first."""
        stack = tuple((seen.frame.norm_path, seen.frame.line) for seen in frames)
        functions = tuple(function_name(seen.frame.func) for seen in frames)
        return cls(tuple(frames), exception_row, style, stack, functions)


def function_name(func: str | None) -> str | None:
    """The bare name of a frame's function as a record names it: "DataFrame.set_index",
    "set_index(self, keys)" and "pandas.core.frame.DataFrame.set_index" are all "set_index"."""
    if not func:
        return None
    name = func.strip().split("(", 1)[0].strip()
    name = name.rpartition(".")[2].rpartition("::")[2]
    return name or None


def service_of(line: str | None) -> str | None:
    """The docker compose service a line came from ("api-1" of "api-1  | ..."), if any."""
    m = SERVICE_RE.match(line) if line is not None else None
    return m.group(1) if m else None


def group_tracebacks(
    frames: Mapping[int, SeenFrame],
    errors: Container[int],
    line_at: Callable[[int], str | None],
) -> list[Traceback]:
    """The frames seen so far grouped into tracebacks, each with its exception line's row (if
    found): `errors` holds the rows that read as exception lines."""
    out: list[Traceback] = []
    run: list[SeenFrame] = []

    def close() -> None:
        if not run:
            return
        style = run[-1].frame.style
        if style in INNERMOST_FIRST:
            first = run[0].row
            above = range(first - 1, first - 1 - EXCEPTION_ABOVE, -1)
            out.append(Traceback.of(run, next((r for r in above if r in errors), None), style))
        else:
            below = _exception_below(run[-1].row, style, frames, errors, line_at)
            out.append(Traceback.of(run[::-1], below, style))

    previous = -(10**9)
    for row in sorted(frames):
        seen = frames[row]
        style = seen.frame.style
        # IPython shows several source lines around each frame.
        gap = FRAME_GAP_JUPYTER if style in CONTEXT_STYLES else FRAME_GAP
        if run and (
            row - previous > gap
            # an exception line between two frames ends one traceback, the next begins
            or any(r in errors for r in range(previous + 1, row))
            or (
                style != run[-1].frame.style
                and not (style in PYTHON_STYLES and run[-1].frame.style in PYTHON_STYLES)
            )
        ):
            close()
            run = []
        run.append(seen)
        previous = row
    close()
    return out


def _exception_below(
    last: int,
    style: str,
    frames: Container[int],
    errors: Container[int],
    line_at: Callable[[int], str | None],
) -> int | None:
    """The row of a Python traceback's exception line, below its innermost frame at `last`:
    Python prints it after the frames and their source lines (IPython: numbered context
    lines), unindented, whatever it looks like ("error: ...")."""
    span = FRAME_GAP_JUPYTER + EXCEPTION_BELOW if style in CONTEXT_STYLES else EXCEPTION_BELOW
    service = service_of(line_at(last))
    for row in range(last + 1, last + span):
        if row in frames:
            return None
        text = line_at(row)
        if text is None:
            return row if row in errors else None
        if service is not None and service_of(text) != service:
            continue  # another container's line, interleaved (docker compose)
        line = strip_prefix(text)
        if (
            not line.strip()
            or line[:1].isspace()
            or line[:1] in BOX_CHARS
            or NUMBERED_SOURCE_RE.match(line)
        ):
            continue
        return row
    return None


def is_quoted_source(
    line: str, row: int, captures: Sequence[str], frames: Mapping[int, SeenFrame]
) -> bool:
    """Whether a line where a pattern matched is a traceback's quoted source line
    (`raise KeyError(f"None of {missing} ...")`): it holds the message template, not an error
    that happened. `row` is the line's row, `frames` the rows of frames around it."""
    bare = strip_prefix(line)
    if SOURCE_LINE_RE.match(line) or SOURCE_LINE_RE.match(bare):
        return True
    if (CODE_LINE_RE.match(line) or CODE_LINE_RE.match(bare)) and any(
        r in frames for r in range(row - CODE_CONTEXT, row + CODE_CONTEXT)
    ):
        return True
    if any(UNFILLED_RE.fullmatch(c) for c in captures):
        return True  # a template placeholder, as written in the source: `{missing}`
    if bare.lstrip()[:1] in BOX_CHARS:
        return True
    above = frames.get(row - 1)
    if above is not None and above.frame.style == "python" and bare[:1] in (" ", "\t"):
        return True
    if NUMBERED_SOURCE_RE.match(bare):
        # IPython's numbered context lines under "File ...:N, in f(...)"
        return any(r in frames for r in range(row - 1, row - FRAME_GAP_JUPYTER - 1, -1))
    return False
