"""One line of a log read: its prefix and level, the exception on it (plain, repr-quoted, cut
short), and a stack frame in the common languages.

The log itself, a block at a time, is read by kb.logtext.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from typing import Final, NamedTuple

from kb.text import ANSI_RE

# Colour codes written out as text, as a JSON string or a repr carries them ("\u001b[91m"):
# a log of JSON records has its colours this way (the real ones are kb.text.ANSI_RE).
ESCAPED_ANSI_RE = re.compile(r"\\(?:u001[bB]|x1[bB]|033|e)\[[0-?]*[ -/]*[@-~]")
# Log levels as loggers print them, each with the level it stands for (syslog's ERR, Java's
# SEVERE); LEVEL_WORDS is the same vocabulary for regexes.
LEVELS: Final = {
    "TRACE": "TRACE",
    "DEBUG": "DEBUG",
    "INFO": "INFO",
    "NOTICE": "NOTICE",
    "WARN": "WARN",
    "WARNING": "WARN",
    "ERROR": "ERROR",
    "ERR": "ERROR",
    "CRITICAL": "CRITICAL",
    "FATAL": "FATAL",
    "SEVERE": "ERROR",
    "PANIC": "PANIC",
}
LEVEL_WORDS: Final = "|".join(LEVELS)
LEVEL_RE = re.compile(r"\b(" + LEVEL_WORDS + r")\b", re.I)

# One prefix at a time, repeated: "svc-1  | 2026-03-14T08:00:00Z ERROR [worker] ...".
PREFIX_RE = re.compile(
    r"(?:"
    r"[\w.\-]{1,64} +\| "  # docker compose: "api-1  | "
    r"|\[?\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z| ?[+-]\d\d:?\d\d| ?UTC)?\]?,? ?"
    r"|\[?\d\d-\d\d \d\d:\d\d:\d\d(?:[.,]\d+)?\]? ?"  # vLLM: "INFO 03-14 08:00:01 "
    r"|\[?\d\d:\d\d:\d\d(?:[.,]\d+)?\]? "
    r"|[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d [\w.\-]+ [\w.\-/]+(?:\[\d+\])?: "  # syslog
    r"|\[?(?:" + LEVEL_WORDS + r")\]?:? +"  # "ERROR ", "[WARN] ", "INFO: "
    r"|\[[\w.\-/:]{1,60}\] "  # "[http] ", "[loggers.py:123] ", "[worker-3] "
    r"|E {1,24}(?=\S)"  # pytest's failure lines, indented like the code above them
    r"|> ?"  # a quoted paste (email, markdown): "> ", "> > "
    r"|\s{0,12}\| "  # Python's exception groups: "    | ValueError: ..."
    r"|#\d+ \d+\.\d+ "  # docker build: "#12 3.456 "
    r"|##\[\w+\] ?"  # GitHub Actions annotations: "##[error]"
    r")"
)
# Names that look like an exception class: "ValueError", "sqlalchemy.exc.NoSuchModuleError".
EXCEPTION_RE = re.compile(
    r"(?:^|(?<=[\s:(\[`'\"*>|]))((?:[A-Za-z_]\w*\.)*"
    r"(?:[A-Z]\w*)?(?:Error|Exception|Warning|Exit|Interrupt|Fault|Failure|Failed|Invalid|Missing"
    r"|NotFound|Denied|Timeout|Iteration|Configured|Panic))(?::(?: |$)|$)"
)

# The line under a Python traceback's frames is its exception, whatever the class is called
# ("sympy.polys.polyerrors.NotAlgebraic: ...", "SkipTest: ..."): a name, a colon, the message.
RAISED_LINE_RE = re.compile(r"((?:[A-Za-z_]\w*\.)*[A-Z]\w*)(?::\s*|\s*$)")
# An exception shown as its repr inside a line: `raised unexpected: ValueError('...')`,
# `exc=CommandError("...")`, `errors=[NotAlgebraic('...')]` (celery, structlog, tenacity).
REPR_EXCEPTION_RE = re.compile(r"(?<![\w.])((?:[A-Za-z_]\w*\.)*[A-Z]\w*)\((['\"])")
# A repr'd message is taken for an error's only when it has this many words at least: a
# `Path('/tmp/x')` or `Timestamp('2026-03-14')` is a value, not an error.
REPR_MIN_WORDS = 3
# How a logger, a UI or a paste marks a message it cut short.
CUT_MARK_RE = re.compile(
    r"\s*(?:\.\.\.|…|\[\.\.\.\]|[\[(<](?:truncated|cut|snip)[^\])>]{0,20}[\])>])\s*$", re.I
)

_FRAME_RES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("python", re.compile(r'^\s*File "(?P<path>[^"]+)", line (?P<line>\d+)(?:, in (?P<func>.+))?')),
    (
        "jupyter",
        re.compile(r"^\s*File (?P<path>[^\s\"].*?):(?P<line>\d+)(?:, in (?P<func>.+))?\s*$"),
    ),
    # rich.traceback: "│ /path/site-packages/pandas/core/frame.py:7891 in set_index   │"
    ("rich", re.compile(r"^\s*│ (?P<path>\S+\.py):(?P<line>\d+) in (?P<func>\S+)")),
    ("java", re.compile(r"^\s*at (?P<func>[\w$.<>/]+)\((?P<path>[\w$.\-]+):(?P<line>\d+)\)")),
    (
        "csharp",
        re.compile(r"^\s*at (?P<func>.+?) in (?P<path>.+?):line (?P<line>\d+)\s*$"),
    ),
    (
        "js",
        re.compile(
            r"^\s*at (?:(?P<func>.+?) \()?(?P<path>(?:file://)?[^()\s]+?):(?P<line>\d+)(?::\d+)?\)?\s*$"
        ),
    ),
    ("go", re.compile(r"^\s+(?P<path>[^\s:]+\.go):(?P<line>\d+)(?: \+0x[0-9a-f]+)?\s*$")),
    (
        "rust",
        re.compile(
            r"(?:^\s*(?:at )?|panicked at '?.*?'?,? ?)(?P<path>[^\s:']+\.rs):(?P<line>\d+)(?::\d+)?"
        ),
    ),
    ("ruby", re.compile(r"^\s*(?:from )?(?P<path>[^\s:]+\.rb):(?P<line>\d+):in")),
    ("php", re.compile(r"^#\d+ (?P<path>[^()\s]+\.php)\((?P<line>\d+)\)")),
    # pytest's long report: "path.py:123: in test_x" for each frame, "path.py:7891: KeyError"
    # under the E lines for the raise site.
    (
        "pytest",
        re.compile(r"^(?P<path>[^\s:]+\.py):(?P<line>\d+): (?:in (?P<func>\S+)|[\w.]+)\s*$"),
    ),
)


GO_MODULE_VERSION_RE = re.compile(r"@v[\w.\-+]+(?=/)")
# Styles that print the innermost frame first (under the message) rather than last.
INNERMOST_FIRST = frozenset({"java", "csharp", "js", "go", "ruby", "php", "pytest"})


class Frame(NamedTuple):  # a NamedTuple: see kb.matcher.scoring.ScoringConfig
    """One stack frame: path as printed, line, function, and the format it came in."""

    path: str
    line: int
    func: str | None
    style: str

    @property
    def norm_path(self) -> str:
        """The path with `/` separators, no `file://`, no Go module version (`pool@v1.2.0/`);
        for Java, the package directories taken from the class name."""
        path = self.path.replace("\\", "/")
        if path.startswith("file://"):
            path = path[7:]
        if "@" in path:
            path = GO_MODULE_VERSION_RE.sub("", path)
        if self.style == "java" and self.func and "/" not in path:
            # Java prints only the file name; the package comes from the class name.
            parts = self.func.split(".")
            if len(parts) > 2:
                path = "/".join(parts[:-2]) + "/" + path
        return path

    def path_suffixes(self) -> Iterator[str]:
        """The path and each of its tails at a `/` boundary: what a record's filePath may be."""
        path = self.norm_path
        yield path
        start = 0
        while True:
            cut = path.find("/", start)
            if cut < 0:
                return
            tail = path[cut + 1 :]
            if tail:
                yield tail
            start = cut + 1


def parse_frame(line: str) -> Frame | None:
    """A stack frame on this line, in any of the known formats, or None."""
    text = strip_prefix(line)
    for style, regex in _FRAME_RES:
        m = regex.search(text)
        if m:
            func = m.groupdict().get("func")
            return Frame(m.group("path"), int(m.group("line")), func, style)
    return None


def strip_ansi(text: str) -> str:
    """The text without colour codes, real or written out; the same object if it had none."""
    # Single-character tests first: they run at memory speed on a many-megabyte block.
    if "\x1b" in text or "\x9b" in text:
        text = ANSI_RE.sub("", text)
    if "\\" in text and ESCAPED_ANSI_RE.search(text):
        text = ESCAPED_ANSI_RE.sub("", text)
    return text


# The matcher asks about the same line once per candidate pattern; on a hostile multi-megabyte
# line each regex pass is costly, so the last few answers are kept (pure functions of the text).
@functools.lru_cache(maxsize=16)
def strip_prefix(line: str) -> str:
    """The line without the log prefixes in front of its message."""
    pos = 0
    for _ in range(8):
        m = PREFIX_RE.match(line, pos)
        if not m or m.end() == pos:
            break
        pos = m.end()
    return line[pos:] if pos else line


def level_of(line: str) -> str | None:
    """The log level in a line's prefix ("2026-... WARNING [x] msg" -> "WARN"), if any."""
    bare = strip_prefix(line)
    m = LEVEL_RE.search(line, 0, len(line) - len(bare))
    return LEVELS[m.group(1).upper()] if m else None


@functools.lru_cache(maxsize=16)
def exception_of(text: str) -> tuple[str, str] | None:
    """(exception class as printed, message) for a line like "pkg.FooError: message"."""
    m = EXCEPTION_RE.search(text)
    if not m:
        return None
    return m.group(1), text[m.end() :].strip()


def raised_line(text: str) -> tuple[str, str] | None:
    """(class, message) of the line a traceback ends with, read as Python prints it (any class
    name, not only those that look like one: exception_of's rule), or None."""
    m = RAISED_LINE_RE.match(text)
    if not m:
        return exception_of(text)
    return m.group(1), text[m.end() :].strip()


def repr_exception(text: str) -> tuple[str, str] | None:
    """(class, message) of an exception printed as its repr inside a line
    ("... raised unexpected: ValueError('bad value')"), or None. A repr cut off before its
    closing quote (a clipped log line) gives the message up to the cut."""
    m = REPR_EXCEPTION_RE.search(text)
    while m is not None:
        quote = m.group(2)
        start = m.end()
        end = start
        escaped = False
        while end < len(text):
            char = text[end]
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == quote:
                break
            end += 1
        body = text[start:end]
        message = body
        if "\\" in body:
            literal = quote + body + quote
            value = None
            if end < len(text):
                import ast  # only for the rare escaped repr

                try:
                    value = ast.literal_eval(literal)
                except (ValueError, SyntaxError, MemoryError, RecursionError):
                    value = None
            message = value if isinstance(value, str) else body.replace("\\" + quote, quote)
        if len(message.split()) >= REPR_MIN_WORDS:
            if end >= len(text):
                message = message.rstrip() + "…"  # the line ends inside the repr: cut short
            return m.group(1), message.strip()
        m = REPR_EXCEPTION_RE.search(text, m.end())
    return None


def cut_message(message: str) -> tuple[str, bool]:
    """A message without the mark a logger, UI or paste left where it cut it short ("...",
    "…", "[truncated]"), and whether there was one."""
    m = CUT_MARK_RE.search(message)
    if m is None or m.start() == 0:
        return message, False
    return message[: m.start()], True


def unrepr_message(message: str) -> str | None:
    """The text of a repr-quoted message (how Python prints KeyError), or None if it is not one."""
    if len(message) < 2 or message[0] not in "'\"" or message[-1] != message[0]:
        return None
    if "\\" not in message and message[0] not in message[1:-1]:
        return message[1:-1]
    import ast  # only for the rare escaped repr

    try:
        value = ast.literal_eval(message)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None
    return value if isinstance(value, str) else None
