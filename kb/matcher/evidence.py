"""Evidence and scoring: how sure kb is that a record explains a place in the log.

Each piece of evidence is a small rule on plain data (a line, a path, a frame, a level), with
its own tests on strings: the exception class on the line, a frame at the record's
filePath:lineNumber, the record's package in a path, the log level, a pattern too thin to go
on alone, a message Python itself raises, the user's own code, another library's code. The
Scorer weighs them for one record: independent signals combine by noisy_or, what speaks
against a record multiplies the score down. Every number is in ScoringConfig, with its reason;
pass another one to score with other settings.
"""

from __future__ import annotations

import functools
import itertools
import re
from collections.abc import Container, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from types import MappingProxyType
from typing import Final, NamedTuple, Protocol

from kb.logtext import Frame, exception_of, strip_prefix
from kb.matcher.cache import Record, package_of_file
from kb.matcher.tracebacks import Traceback
from kb.matcher.verify import Hit


@dataclass(frozen=True)
class ScoringConfig:
    """Every weight, factor, cap and cut-off of the scoring, with the reason for each."""

    # -- what is reported
    # Reported scores are calibrated (`calibration` below): an answer is reported when it is
    # more likely right than wrong. On the development sets that is exactly where the raw
    # scores step from none right (0.40-0.50: 0 of 20) to 9 in 10 (0.50 and up): a clean log
    # (noise hitting generic patterns only) comes back empty; one specific pattern on its own
    # or a generic one with a frame clears it.
    min_score: float = 0.5
    # Scores never claim certainty: 1.0 is reserved.
    max_score: float = 0.99
    # How often an answer is right at each raw score, measured on the development sets (the
    # drift set's dev half, both real-log sets, paste.log and big.log: 608 answers, tables in
    # benchmarks/CALIBRATION.md): (raw score, share right) knots, joined by straight lines,
    # strictly increasing so the order of answers is kept. Raw below 0.5: 0 of 60 right;
    # 0.5-0.9: 225 of 249; 0.9-1.0: 296 of 299.
    calibration: tuple[tuple[float, float], ...] = (
        (0.0, 0.0),
        (0.4, 0.02),
        (0.45, 0.1),
        (0.49, 0.2),
        (0.5, 0.87),
        (0.8, 0.91),
        (0.9, 0.93),
        (0.95, 0.98),
        (0.99, 0.99),
        (1.0, 1.0),
    )

    # -- what the words alone are worth (the base score)
    # A pattern with no literal text to speak of matches noise as readily as errors...
    generic_pattern_base: float = 0.3
    # ... a specific one from this, up by specific_bonus as its literal text grows to
    # specific_literal_chars: the more of a line the words fix, the less is left to chance.
    pattern_base: float = 0.45
    specific_bonus: float = 0.35
    specific_literal_chars: int = 40
    # An error code found on a line: a long code with digits or "_" (ERR_BAD_RESPONSE, E0425)
    # is rarely anything else; a short word-like one (EPERM) more often is.
    code_base: float = 0.45
    distinctive_code_base: float = 0.6
    distinctive_code_chars: int = 5

    # -- evidence for a record, combined as independent signals (noisy_or)
    # The record's exception class printed before the message.
    class_on_line: float = 0.35
    # ... before a line with the record's error code (the code says most of it already).
    class_with_code: float = 0.2
    # A frame at the record's filePath:lineNumber: the raise site itself.
    frame_exact: float = 0.7
    # ... within frame_near_lines of it (versions move lines a little).
    frame_near: float = 0.55
    frame_near_lines: int = 3
    # ... in the same file, within frame_file_lines; further away, half that.
    frame_file: float = 0.3
    frame_file_lines: int = 40
    frame_far: float = 0.15
    # ... in the same file and in the record's function, however far: another version of the
    # library, whose lines moved (the function is what stays).
    frame_function: float = 0.55
    # A frame in the record's package, in a function of the record's function's name but in
    # another file: the function moved to another module between versions.
    moved_function: float = 0.35
    # The record's package in the traceback's paths, or named by a dotted exception class.
    package: float = 0.15
    # The pattern covers the whole message, not a piece of a longer one.
    whole_message: float = 0.25

    # -- what speaks against a record (factors on the score)
    # Another exception class (or another known package's class) printed before the message.
    class_conflict: float = 0.8
    # Raised inside another known library, the record's file nowhere in the traceback.
    foreign_library: float = 0.55
    # Raised inside the record's own library, its frames shown down to the raise, and none of
    # them in the record's file or function: another raise of the library said it (a
    # same-worded message of another module, or one raised from compiled code).
    other_module: float = 0.45
    # A generic pattern without a frame or package behind it stays below min_score.
    generic_cap: float = 0.45
    # A template with less literal text than this is one common phrase ("{func} not
    # implemented", "{0} is not supported", "Permission denied"): alone, without a class, a
    # frame or its package, it is capped at generic_cap; and a specific template reading the
    # same text (a near miss too) ranks above it.
    phrase_literal_chars: int = 24
    # Without a class or a frame: a message on an INFO/DEBUG (WARN) line is more likely
    # chatter quoting it than the error, and so is one inside a longer sentence...
    level_factors: Mapping[str, float] = field(
        default_factory=lambda: MappingProxyType(
            {"TRACE": 0.7, "DEBUG": 0.7, "INFO": 0.7, "NOTICE": 0.7, "WARN": 0.85}
        )
    )
    partial_message: float = 0.85
    # ... unless the line's level says an error happened.
    error_levels: frozenset[str] = frozenset({"ERROR", "CRITICAL", "FATAL", "PANIC"})
    # A pattern with fewer literal characters than thin_literal_chars, matched with no class
    # and no frame, is "thin" when its literal text is under thin_share of the text it matched
    # (the rest being captured values): "Could not find {a}.{b}" on pip's "Could not find a
    # version that satisfies ..." Thin matches are discounted below the default min_score.
    thin_literal_chars: int = 30
    thin_share: float = 0.35
    thin_factor: float = 0.7

    # -- a record found by its raise site alone (the message matched no pattern)
    # A frame exactly at its filePath:lineNumber: a little above min_score...
    raise_site_exact: float = 0.55
    # ... a few lines off, below it unless the exception class agrees.
    raise_site_near: float = 0.42
    raise_site_step: float = 0.03  # less for each line further off
    # ... and this much of itself when the exception's message was read and is nothing like
    # the record's (the drift set's variable messages: a neighbouring raise of the function
    # claimed "Your setup doesn't support bf16/gpu" at 0.565).
    message_disagrees: float = 0.6

    # -- near misses (reworded messages, found by rapidfuzz and by their words)
    # The base is this times the similarity: a near miss alone never looks certain.
    fuzzy_scale: float = 0.62
    fuzzy_class: float = 0.2  # the exception class agrees
    # A message cut short shows only part of its template: the base loses this much of itself
    # for all of the template unseen (a third seen keeps about 83 %). Little: what is shown
    # agrees, and how much agrees already weighs (the cut-offs and fuzzy_long_bonus).
    fuzzy_unseen: float = 0.25
    fuzzy_max: float = 0.9  # a reworded message is never as sure as one that matched
    # Similarity (0-100) a near miss needs: below ~86 only the class on the line lifts it
    # over min_score, so a line without a class needs that much on its own.
    fuzzy_cutoff: float = 78.0
    fuzzy_classless_cutoff: float = 86.0
    # The cut-offs come down as the text that agrees grows from fuzzy_short_chars to
    # fuzzy_long_chars: 80 characters of a specific message agreeing at 0.75 are no accident,
    # 20 at 0.8 may be. The base grows with it by up to fuzzy_long_bonus.
    fuzzy_long_cutoff: float = 72.0
    fuzzy_classless_long_cutoff: float = 78.0
    fuzzy_short_chars: int = 30
    fuzzy_long_chars: int = 90
    fuzzy_long_bonus: float = 0.1
    # A template that reads the line this much better (Alignment.rank) than any other wording
    # is distinct, not one of several near guesses: its cut-off is fuzzy_distinct_bonus lower
    # (the drift set's pairing rule asks the same of a rewording: best by a margin).
    fuzzy_distinct_margin: float = 0.08
    fuzzy_distinct_bonus: float = 6.0
    # With a frame at the record's raise site (its line, or its function, also moved), the
    # message need only resemble the template this much: the frame says where, the words which
    # of the few raises there.
    fuzzy_site_cutoff: float = 60.0
    # A template found whole in the line, or the line whole in the template (a sentence added
    # or dropped), counts as this much similarity when a frame is at the raise site, and as
    # this much when only the class agrees (then the side found whole must be
    # partial_min_chars long: a short message is inside many long templates).
    partial_with_frame: float = 0.9
    partial_with_class: float = 0.85
    partial_min_chars: int = 30
    # Templates rescored with their placeholders free (a wide shortlist by plain similarity,
    # another by bm25 over the words, then the best few kept).
    fuzzy_shortlist: int = 12
    fuzzy_shortlist_cutoff: float = 55.0
    fuzzy_word_shortlist: int = 12
    fuzzy_kept: int = 5
    # Alignments below this similarity (0-100) are not kept at all.
    fuzzy_align_cutoff: float = 60.0


DEFAULT_SCORING: Final = ScoringConfig()


# --------------------------------------------------------------------------------------------
# The rules: plain data in, one answer out


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
        """What orders near misses before they are scored (the cut ones by what they show)."""
        return max(self.gap, self.partial * 0.85) * self.shown


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


@dataclass(slots=True)
class Candidate:
    """A record that may explain a hit, with its score and the evidence behind it."""

    record: Record
    score: float
    method: str
    evidence: list[str]
    hit: Hit
    # The traceback speaks against the record (another module of its library raised): a
    # near miss naming the right raise site may yet be found.
    doubted: bool = False
    # A template of one common phrase or mostly placeholders (phrase_literal_chars): never
    # ranked above a specific template that reads the same text.
    phrase: bool = False
    # How many characters of the line agree with the template (a near miss's similarity times
    # the shorter side's length).
    agreeing: float = 0.0

    @property
    def unsupported(self) -> bool:
        """Whether nothing but the words (and the class) speaks for it: no frame, no package."""
        return not any(e.startswith(("frame:", "function:", "package:")) for e in self.evidence)

    @property
    def literal_chars(self) -> int:
        """The matched pattern's literal text (more is more specific; ranks ties)."""
        pattern = self.hit.pattern
        return pattern.literal_chars if self.hit.method == "pattern" and pattern else 0


class Lookups(Protocol):
    """What scoring asks the knowledge base (kb.matcher.cache.CacheReader answers)."""

    def file_records(self, frame: Frame) -> tuple[str, list[tuple[int | None, int]]] | None: ...

    def file_functions(self, frame: Frame) -> frozenset[str]: ...

    def known_packages(self) -> frozenset[str]: ...


class Scorer:
    """The rules weighed for one record at one place in the log, by the numbers of `config`;
    `lookups` answers what the rules need of the knowledge base."""

    def __init__(self, lookups: Lookups, config: ScoringConfig = DEFAULT_SCORING) -> None:
        self.lookups = lookups
        self.config = config

    def traceback_evidence(self, record: Record, tb: Traceback | None) -> TracebackEvidence:
        """What the traceback says of `record`: a frame at its raise site, in its function or
        file, in its package; or that the user's code, another library or another module of
        its own library raised the error."""
        if tb is None or not tb.frames:
            return NOT_SHOWN
        cfg = self.config
        found = stack_evidence(
            record.file_path,
            record.line_number,
            tb.stack,
            cfg,
            function=record.function,
            functions=tb.functions,
        )
        if found is not None and found.raiser is Raiser.RECORD_FUNCTION:
            frame = tb.frames[found.frame].frame
            if record.function in self.lookups.file_functions(frame):
                # the frame's own file still raises in a function of that name: its records
                # are the ones the frame points at, not this one of another module
                label = f"package:{record.package}"
                found = TracebackEvidence(Raiser.RECORD_PACKAGE, cfg.package, label)
        if found is not None and in_package(tb.stack[0][0], record.package):
            # The library's own frames go down to the raise: they must show the record's raise
            # site (its line, or its function) or the record is doubted: another raise of the
            # library said this (a same-worded message of another module or function).
            strong = found.raiser is Raiser.RECORD_FUNCTION or found.weight >= cfg.frame_near
            knows_functions = record.function is not None and tb.functions[0] is not None
            if found.raiser is Raiser.RECORD_PACKAGE or (not strong and knows_functions):
                return TracebackEvidence(Raiser.OTHER_MODULE)
        if found is not None:
            return found
        innermost = tb.frames[0].frame  # asked about only now: most records stop above
        known = self.lookups.file_records(innermost) is not None
        return innermost_evidence(innermost.path, record.package, known)

    def score_hit(
        self, hit: Hit, record: Record, tb: Traceback | None, exception: tuple[str, str] | None
    ) -> Candidate | None:
        """A pattern or code hit read as `record`; None when the evidence rules it out (the
        user's own raise, or Python's message without a frame)."""
        cfg = self.config
        evidence: list[str] = []
        weights: list[float] = []
        pattern = hit.pattern if hit.method == "pattern" else None
        if pattern is not None:
            base = pattern_base(pattern.generic, pattern.literal_chars, cfg)
            evidence.append("pattern")
            if hit.whole:
                weights.append(cfg.whole_message)
                evidence.append("whole-message")
        else:
            base = code_base(hit.code or "", cfg)
            evidence.append(f"code:{hit.code or ''}")
        on_line = class_on_line(hit.subject, record.error_class)
        if on_line is Says.AGREES:
            weights.append(cfg.class_on_line if pattern is not None else cfg.class_with_code)
            evidence.append("error-class")
        conflict = on_line is Says.DISAGREES
        raised = self.traceback_evidence(record, tb)
        if raised.label is not None:
            weights.append(raised.weight)
            evidence.append(raised.label)
        else:
            module = module_of(exception[0] if exception else None, hit.subject)
            if module and record.package:
                named = package_on_line(module, record.package, self.lookups.known_packages())
                if named is Says.AGREES:
                    weights.append(cfg.package)
                    evidence.append(f"package:{record.package}")
                conflict = conflict or named is Says.DISAGREES
        score = noisy_or(base, weights)
        doubted = False
        if conflict:
            score *= cfg.class_conflict
        if raised.raiser is Raiser.FOREIGN_LIBRARY:
            score *= cfg.foreign_library
        elif raised.raiser is Raiser.OTHER_MODULE:
            score *= cfg.other_module
            doubted = True
        nothing_but_words = on_line is not Says.AGREES and not raised.supports
        if nothing_but_words and hit.level not in cfg.error_levels:
            # Nothing says an exception happened here: an INFO line, or a message's words
            # inside a longer sentence, is more likely chatter than the error.
            score *= level_factor(hit.level, cfg)
            if not hit.whole:
                score *= cfg.partial_message
        if raised.raiser is Raiser.USER_CODE:
            # Raised in the user's own code (the innermost frame is theirs and no frame is in
            # the record's package): their raise, or Python's, not this library's.
            return None
        if pattern is not None and not raised.supports and is_builtin_message(hit.subject):
            return None  # Python's own message: without a frame, no library can claim it
        if pattern is not None and pattern.generic and not raised.supports:
            score = min(score, cfg.generic_cap)
        phrase = pattern is not None and pattern.literal_chars < cfg.phrase_literal_chars
        if phrase and nothing_but_words and "package:" not in evidence[-1]:
            # one common phrase ("{x} not implemented", "Connection refused") and nothing
            # beyond its words: not reported (chatter quotes such phrases all the time)
            score = min(score, cfg.generic_cap)
        if (
            pattern is not None
            and nothing_but_words
            and is_thin(pattern.literal_chars, hit.captures, cfg)
        ):
            score *= cfg.thin_factor  # nothing but the words, and they say little of the text
        return Candidate(
            record, min(score, cfg.max_score), hit.method, evidence, hit, doubted, phrase
        )

    def score_raise_site(
        self,
        record: Record,
        hit: Hit,
        frame: Frame,
        path: str,
        exception: tuple[str, str] | None,
    ) -> Candidate:
        """A record raised at (or a few lines from) the traceback's innermost frame, whose
        message matched no pattern; `path` is the record's filePath the frame's path ends
        with."""
        cfg = self.config
        # Only records with a line are raise-site candidates (the scan never offers others).
        delta = abs(frame.line - (record.line_number or 0))
        if delta == 0:
            base = cfg.raise_site_exact
        else:
            base = cfg.raise_site_near - cfg.raise_site_step * delta
        evidence = [f"frame:{path}:{frame.line}"]
        weights: list[float] = []
        if exception is not None and record.error_class:
            if exception[0].rpartition(".")[2] == record.error_class:
                weights.append(cfg.class_on_line)
                evidence.append("error-class")
            else:
                base *= cfg.class_conflict
        score = noisy_or(base, weights)
        return Candidate(record, min(score, cfg.max_score), "frame", evidence, hit)

    def score_near_miss(
        self,
        record: Record,
        hit: Hit,
        aligned: Alignment,
        printed_class: str,
        tb: Traceback | None,
        builtin: bool,
    ) -> Candidate | None:
        """A reworded message read as `record`: `aligned` says how its text lines up with the
        record's template; `printed_class` is the exception class on the line ("" if none);
        `builtin` whether the line is a message Python raises everywhere."""
        cfg = self.config
        agrees = bool(record.error_class) and printed_class.rpartition(".")[2] == record.error_class
        raised = self.traceback_evidence(record, tb)
        if raised.raiser is Raiser.USER_CODE or (builtin and not raised.supports):
            return None  # the user's own raise, or Python's message (see score_hit)
        # Placeholders count as free (gap) only where other evidence agrees: a line with
        # nothing but its words must read almost the same as the template. Partial agreement
        # (a sentence added or dropped) counts only with a frame at the raise site, or the class.
        value = aligned.gap if agrees or raised.supports else aligned.plain
        at_site = raised.raiser is Raiser.RECORD_FUNCTION or (
            raised.raiser is Raiser.RECORD_FILE and raised.weight >= cfg.frame_near
        )
        if at_site:
            value = max(value, cfg.partial_with_frame * aligned.partial)
        elif agrees:
            long_enough = [
                covered
                for covered, chars in (
                    (aligned.query_covered, aligned.query_chars),
                    (aligned.template_covered, aligned.template_chars),
                )
                if chars >= cfg.partial_min_chars
            ]
            value = max([value, *(cfg.partial_with_class * c for c in long_enough)])
        agreeing = value * min(aligned.query_chars, aligned.template_chars)
        span = max(1, cfg.fuzzy_long_chars - cfg.fuzzy_short_chars)
        length = min(1.0, max(0.0, (agreeing - cfg.fuzzy_short_chars) / span))
        if at_site:
            cutoff = cfg.fuzzy_site_cutoff
        elif printed_class or raised.supports:
            cutoff = cfg.fuzzy_cutoff - (cfg.fuzzy_cutoff - cfg.fuzzy_long_cutoff) * length
        else:
            drop = cfg.fuzzy_classless_cutoff - cfg.fuzzy_classless_long_cutoff
            cutoff = cfg.fuzzy_classless_cutoff - drop * length
        if aligned.margin >= cfg.fuzzy_distinct_margin:
            cutoff -= cfg.fuzzy_distinct_bonus  # no other wording comes close
        if value * 100 < cutoff:
            return None
        scale = cfg.fuzzy_scale + cfg.fuzzy_long_bonus * length
        base = scale * value * (1.0 - cfg.fuzzy_unseen * (1.0 - aligned.shown))
        weights: list[float] = []
        evidence = [f"fuzzy:{value:.2f}"]
        if aligned.shown < 1.0:
            evidence.append(f"cut:{aligned.shown:.2f}")
        if agrees:
            weights.append(cfg.fuzzy_class)
            evidence.append("error-class")
        if raised.label is not None:
            weights.append(raised.weight)
            evidence.append(raised.label)
        score = noisy_or(base, weights)
        if printed_class and record.error_class and not agrees and not raised.supports:
            score *= cfg.class_conflict  # another class printed: likely another error
        if raised.raiser is Raiser.OTHER_MODULE:
            score *= cfg.other_module
        elif raised.raiser is Raiser.FOREIGN_LIBRARY:
            score *= cfg.foreign_library
        phrase = aligned.template_chars < cfg.phrase_literal_chars
        return Candidate(
            record,
            min(score, cfg.fuzzy_max),
            "fuzzy",
            evidence,
            hit,
            phrase=phrase,
            agreeing=agreeing,
        )
