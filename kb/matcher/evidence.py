"""Evidence: how sure kb is that a record explains a place in the log, one rule at a time.

Each piece of evidence is a small rule on plain data (a line, a path, a frame, a level), with
its own tests on strings: the exception class on the line, a frame at the record's
filePath:lineNumber, the record's package in a path, the log level, a pattern too thin to go
on alone, a message Python itself raises, the user's own code, another library's code. The
Scorer (kb.matcher.scorer) weighs them for one record; every number is in ScoringConfig
(kb.matcher.scoring), with its reason.
"""

from __future__ import annotations

import functools
import itertools
import re
from collections.abc import Container, Iterable, Sequence
from enum import Enum
from typing import Final, NamedTuple

from kb.logline import exception_of, strip_prefix
from kb.matcher.cache import package_of_file
from kb.matcher.scoring import ScoringConfig

# --------------------------------------------------------------------------------------------
# The rules: plain data in, one answer out


# What a near miss loses in its rank for all of its template unseen (a message cut short);
# the same as ScoringConfig.fuzzy_unseen, which discounts its score.
RANK_UNSEEN: Final = 0.25


class Alignment(NamedTuple):
    """How a log line lines up with a message template (kb.matcher.fuzzy.align): similarity
    with values counted as differences (plain) and with placeholders free to hold them (gap),
    the share of the line the template explains and of the template found in the line (one
    stays high when a sentence was added or dropped), and the share of the template the line
    shows (less than 1 for a message cut short)."""

    plain: float
    gap: float
    query_covered: float
    template_covered: float
    shown: float = 1.0
    query_chars: int = 0  # the line's length, normalised
    template_chars: int = 0  # the template's literal length (the part aligned, if cut)
    margin: float = 0.0  # how much better it lines up than any other wording (rank)

    @property
    def partial(self) -> float:
        """The better of the two coverages: how well one side is found in the other."""
        return max(self.query_covered, self.template_covered)

    @property
    def rank(self) -> float:
        """What orders near misses before they are scored. A cut one loses a little for the
        template it does not show, as its score does (ScoringConfig.fuzzy_unseen): a message
        cut at half of a long template, agreeing with all it shows, reads it better than a
        short template that it covers whole with other words."""
        return max(self.gap, self.partial * 0.85) * (1.0 - RANK_UNSEEN * (1.0 - self.shown))


class Says(Enum):
    """What one piece of the log says about a record."""

    AGREES = "agrees"
    DISAGREES = "disagrees"
    NOTHING = "nothing"


class Raiser(Enum):
    """Who a traceback says raised the error, for one record."""

    NOT_SHOWN = "not-shown"  # no traceback, or nothing in it speaks for or against the record
    RECORD_FILE = "record-file"  # a frame in the record's file
    RECORD_FUNCTION = "record-function"  # a frame in the record's function, moved to another file
    RECORD_PACKAGE = "record-package"  # a frame in the record's package
    OTHER_MODULE = "other-module"  # the record's library raised it elsewhere (see other_module)
    USER_CODE = "user-code"  # the innermost frame is the user's own code
    FOREIGN_LIBRARY = "foreign-library"  # the innermost frame is in another library


class TracebackEvidence(NamedTuple):
    """What a traceback says about one record (a tuple: one is made per record of a hit)."""

    raiser: Raiser
    weight: float = 0.0  # for the noisy-OR; 0.0 unless the traceback points at the record
    label: str | None = None  # "frame:PATH:LINE" or "package:NAME" when it does
    frame: int = -1  # which frame (innermost first) it rests on, if one

    @property
    def supports(self) -> bool:
        return self.label is not None


NOT_SHOWN: Final = TracebackEvidence(Raiser.NOT_SHOWN)

# Paths of installed code: site-packages, node_modules, Go's module cache, Ruby's gems, ...
LIB_PATH_RE: Final = re.compile(
    r"[/\\](?:site-packages|dist-packages|node_modules|\.cargo[/\\]registry|go[/\\]pkg[/\\]mod"
    r"|lib[/\\]python\d[\d.]*|vendor|\.m2|gems)[/\\]|^<frozen |^<(?:string|stdin)>"
)
PACKAGE_RE: Final = re.compile(r"(?:site-packages|dist-packages|node_modules)[/\\]([\w.\-]+)")
CLASS_SEARCH_CHARS: Final = 4096  # how far into a line a dotted exception class is looked for
# A record's class named anywhere on the line agrees when the name is this long ("ValueError"
# in `exc_type=ValueError`; "Error" alone is any word).
CLASS_WORD_CHARS: Final = 8
DOTTED_CLASS_RE: Final = re.compile(r"(?:^|\s)([a-z_]\w*(?:\.\w+)*)\.[A-Z]\w*:(?: |$)")
# Messages CPython itself raises everywhere (operators, indexing, imports, calls, json, OS
# errors). A library record with the same words cannot be told from Python's own error without
# a frame in that library, so such a line is claimed only with frame evidence.
BUILTIN_MESSAGE_RE: Final = re.compile(
    r"(?:\w+(?:\.\w+)*(?:Error|Exception|Warning|Interrupt|Exit)\s*:\s*)?(?:"
    r"(?:integer |float |complex )?division(?: or modulo)? by zero"
    r"|(?:list|tuple|string|range object) index out of range"
    r"|(?:list|tuple) assignment index out of range"
    r"|'[\w.]+' object (?:has no attribute|is not (?:subscriptable|callable|iterable)"
    r"|does not support item (?:assignment|deletion)|cannot be interpreted as an integer)"
    r"|module '[\w.]+' has no attribute '\w+'"
    r"|unsupported operand type\(s\) for "
    r"|can only concatenate \w+ \(not \"\w+\"\) to \w+"
    r"|(?:bad operand type for|unhashable type:) "
    r"|No module named '?[\w.]+'?$"
    r"|cannot import name '\w+' from "
    r"|name '\w+' is not defined"
    r"|local variable '\w+' referenced before assignment"
    r"|cannot access local variable '\w+'"
    r"|invalid literal for int\(\) with base \d+: "
    r"|could not convert string to float: "
    r"|[\w.<>]+\(\) (?:"
    r"takes (?:from )?\d+ (?:to \d+ )?positional arguments? but \d+ (?:were|was) given"
    r"|got an unexpected keyword argument '\w+'"
    r"|missing \d+ required (?:positional |keyword-only )?arguments?"
    r"|got multiple values for argument '\w+')"
    r"|maximum recursion depth exceeded"
    r"|dictionary changed size during iteration"
    r"|(?:too many|not enough) values to unpack \(expected \d+"
    r"|Expecting (?:value|property name enclosed in double quotes|',' delimiter): "
    r"line \d+ column \d+"
    r"|\[Errno \d+\] "
    # ... and messages of the standard library's everyday modules (json, io, codecs, pickle)
    r"|Object of type \w+ is not JSON serializable"
    r"|(?:Extra data|Unterminated string starting at|Invalid control character at): line \d+"
    r"|I/O operation on closed file"
    r"|'[\w-]+' codec can't (?:decode|encode) "
    r"|(?:can't|cannot) pickle "
    r"|object of type '\w+' has no len\(\)"
    r"|string indices must be integers"
    r"|argument of type '\w+' is not iterable"
    r"|substring not found"
    r"|list\.(?:remove|index)\(x\): x not in list"
    r")"
)


def calibrated(raw: float, knots: Sequence[tuple[float, float]]) -> float:
    """A raw score as the share of answers right at it (linear between the knots)."""
    for (x0, y0), (x1, y1) in itertools.pairwise(knots):
        if raw <= x1:
            return y0 + (y1 - y0) * (max(raw, x0) - x0) / (x1 - x0)
    return knots[-1][1]


def uncalibrated(score: float, knots: Sequence[tuple[float, float]]) -> float:
    """The raw score whose calibrated score is `score` (the inverse of `calibrated`)."""
    for (x0, y0), (x1, y1) in itertools.pairwise(knots):
        if score <= y1:
            return x0 + (x1 - x0) * (max(score, y0) - y0) / (y1 - y0)
    return knots[-1][0]


def noisy_or(base: float, weights: Iterable[float]) -> float:
    """Independent signals combined: 1 - (1 - base) * prod(1 - w). Each signal alone could
    make the case; together they leave less room for doubt than any one."""
    doubt = 1.0
    for weight in weights:
        doubt *= 1.0 - weight
    return 1.0 - (1.0 - base) * doubt


def pattern_base(generic: bool, literal_chars: int, config: ScoringConfig) -> float:
    """What a pattern's words are worth alone: more the more literal text it has."""
    if generic:
        return config.generic_pattern_base
    specificity = min(1.0, literal_chars / config.specific_literal_chars)
    return config.pattern_base + config.specific_bonus * specificity


def code_base(code: str, config: ScoringConfig) -> float:
    """What an error code on a line is worth alone."""
    distinctive = len(code) >= config.distinctive_code_chars and any(
        c.isdigit() or c == "_" for c in code
    )
    return config.distinctive_code_base if distinctive else config.code_base


# Pure functions of the line, asked once per record of every hit (a message raised in many
# files has many records): the answers for the last lines are kept.
@functools.lru_cache(maxsize=256)
def class_on_line(subject: str, error_class: str | None) -> Says:
    """Whether the exception class printed before the message is the record's (AGREES),
    another one (DISAGREES), or the line names none (NOTHING)."""
    exc = exception_of(subject)
    if exc is None:
        if error_class and (subject.startswith(error_class + ":") or f".{error_class}:" in subject):
            return Says.AGREES
        if (
            error_class
            and len(error_class) >= CLASS_WORD_CHARS
            and error_class in subject
            and re.search(rf"(?<![\w.]){re.escape(error_class)}(?!\w)", subject)
        ):
            return Says.AGREES  # named elsewhere: `exc_type=ValueError error="..."` (logfmt)
        return Says.NOTHING
    if not error_class:
        return Says.NOTHING
    printed = exc[0].rpartition(".")[2]
    return Says.AGREES if printed == error_class or f"{error_class}:" in subject else Says.DISAGREES


@functools.lru_cache(maxsize=256)
def module_of(printed: str | None, subject: str) -> str | None:
    """The top-level package of a dotted exception class ("sqlalchemy.exc.NoResultFound") printed
    as the line's exception (`printed`) or anywhere near the start of the line."""
    if printed is None:
        exc = exception_of(subject)
        printed = exc[0] if exc else None
    if not printed or "." not in printed:
        # a class is printed where the message starts: no need to search a megabyte line
        m = DOTTED_CLASS_RE.search(subject, 0, CLASS_SEARCH_CHARS)
        printed = m.group(1) + "." if m else None
    if not printed:
        return None
    top = printed.split(".", 1)[0]
    return None if top in ("builtins", "__main__") else top


def package_on_line(module: str | None, package: str, known_packages: Container[str]) -> Says:
    """Whether the package of the line's dotted exception class (`module`) is the record's, or
    another package the knowledge base knows."""
    if not module or not package:
        return Says.NOTHING
    if module == package:
        return Says.AGREES
    return Says.DISAGREES if module in known_packages else Says.NOTHING


def distance_weight(delta: int | None, config: ScoringConfig) -> float:
    """How strongly a frame in the record's file says the record raised the error, by its
    distance in lines from the record's lineNumber (0: the raise site itself; None: the record
    has no lineNumber, so the file is all a frame can agree on)."""
    if delta is None:
        return config.frame_file
    if delta == 0:
        return config.frame_exact
    if delta <= config.frame_near_lines:
        return config.frame_near
    return config.frame_file if delta <= config.frame_file_lines else config.frame_far


def stack_evidence(
    file_path: str,
    line_number: int | None,
    stack: Sequence[tuple[str, int]],
    config: ScoringConfig,
    *,
    function: str | None = None,
    functions: Sequence[str | None] = (),
) -> TracebackEvidence | None:
    """The best frame in the record's file (by distance_weight, or frame_function when the
    frame is in the record's `function`), else a frame of the record's package in a function
    of that name (moved to another file), else a frame in the record's package (its
    filePath's top folder); None when no frame is either. `stack` holds each frame's (path
    with `/` separators, line), innermost first, `functions` their function names; a path is
    in the file when it is the filePath or ends with "/" + filePath."""
    package = package_of_file(file_path)
    tail = "/" + file_path
    folder = "/" + package + "/"
    best = 0.0
    best_line = 0
    best_frame = moved = -1
    package_seen = False
    for i, (path, line) in enumerate(stack):  # inline tests: runs for every frame and record
        same_function = function is not None and i < len(functions) and functions[i] == function
        if file_path and (path == file_path or path.endswith(tail)):
            delta = None if line_number is None else abs(line - line_number)
            weight = distance_weight(delta, config)
            if same_function:
                weight = max(weight, config.frame_function)
            if weight > best:
                best, best_line, best_frame = weight, line, i
        elif package and folder in "/" + path:
            package_seen = True
            if same_function and moved < 0:
                moved = i
    if best > 0.0:
        label = f"frame:{file_path}:{best_line}"
        return TracebackEvidence(Raiser.RECORD_FILE, best, label, best_frame)
    if moved >= 0:
        label = f"function:{package}:{function}"
        return TracebackEvidence(Raiser.RECORD_FUNCTION, config.moved_function, label, moved)
    if package_seen:
        return TracebackEvidence(Raiser.RECORD_PACKAGE, config.package, f"package:{package}")
    return None


def in_package(path: str, package: str) -> bool:
    """Whether a frame's path (with `/` separators) is inside the package's folder."""
    return bool(package) and f"/{package}/" in "/" + path


def is_user_code(path: str, known_file: bool) -> bool:
    """Whether a frame's path is the user's own code: not installed library code, not Python's
    frozen or interactive code, and no record's filePath (`known_file`)."""
    path = path.replace("\\", "/")
    return not (LIB_PATH_RE.search(path) or path.startswith("<")) and not known_file


def package_of_path(path: str) -> str | None:
    """The top-level package an installed library's path is in (the folder under
    site-packages or node_modules)."""
    m = PACKAGE_RE.search(path)
    return m.group(1).split(".", 1)[0] if m else None


def is_foreign(path: str, package: str) -> bool:
    """Whether the innermost frame's path is inside another installed library than the
    record's `package`: most likely that library's own error."""
    inner = package_of_path(path)
    return bool(package) and bool(inner) and inner != package


def innermost_evidence(path: str, package: str, known_file: bool) -> TracebackEvidence:
    """What the innermost frame alone says, when no frame is in the record's file or package:
    the user's own raise, another library's, or nothing."""
    if is_user_code(path, known_file):
        return TracebackEvidence(Raiser.USER_CODE)
    if is_foreign(path, package):
        return TracebackEvidence(Raiser.FOREIGN_LIBRARY)
    return NOT_SHOWN


def level_factor(level: str | None, config: ScoringConfig) -> float:
    """The discount for a message with nothing but its words behind it, by the line's level."""
    return config.level_factors.get(level or "", 1.0)


def is_thin(literal_chars: int, captures: Sequence[str], config: ScoringConfig) -> bool:
    """Whether a short template's words say too little of the text it matched, the rest being
    its captured values."""
    values = sum(len(value) for value in captures)
    said = literal_chars / max(1, literal_chars + values)
    return literal_chars < config.thin_literal_chars and said < config.thin_share


@functools.lru_cache(maxsize=256)
def is_builtin_message(subject: str) -> bool:
    """Whether the line is a message Python or its standard library raises everywhere."""
    return BUILTIN_MESSAGE_RE.match(strip_prefix(subject).lstrip()) is not None


# --------------------------------------------------------------------------------------------
# The scorer: the rules weighed for one record at one place in the log
