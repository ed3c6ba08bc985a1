"""Reading a pasted log as people produce them: undecodable bytes, ANSI colours, CRLF and
progress-bar CRs, terminal wrapping, line prefixes (timestamps, levels, docker compose, pytest),
repr-quoted KeyError messages and stack frames in the common languages.

Work is done per block of lines with C-level string operations; per-line Python work is kept for
the few lines the matcher asks about, so a 20 MB log costs little more than reading it.
"""

from __future__ import annotations

import codecs
import functools
import itertools
import json
import re
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import IO, Final, cast

from kb.text import ANSI_RE

__all__ = [
    "BLOCK_BYTES",
    "LEVELS",
    "Frame",
    "LineBlock",
    "blocks",
    "cut_message",
    "exception_of",
    "level_of",
    "parse_frame",
    "raised_line",
    "repr_exception",
    "split_lines",
    "starts_record",
    "strip_ansi",
    "strip_prefix",
    "unrepr_message",
]

# A block is decoded and scanned at once; big enough to amortise per-call costs, small enough
# that memory does not grow with the log.
BLOCK_BYTES = 4 << 20
# Widths terminals and CI consoles commonly wrap at.
TERMINAL_WIDTHS = frozenset({80, 100, 120, 132, 160, 200})
# A wrapped block has at least this many lines of exactly the wrap width when the width is
# not a common one.
WRAP_MIN_LINES = 3
WRAP_MIN_WIDTH = 40
WRAP_MAX_WIDTH = 400
# Box drawing (rich tracebacks and panels): a boxed row is full width on purpose.
BOX_DRAWING = frozenset("│┃║╭╮╰╯┏┓┗┛╔╗╚╝")
UTF16_BOMS = (codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)
# A structured log record longer than this is not unpacked.
JSON_MAX_CHARS = 1 << 20
# Rows of one length looked at to decide whether they are wrapped.
WRAP_SAMPLE = 64
DIGITS_RE: Final = re.compile(r"\d+")

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
TRACEBACK_HEADER = "Traceback (most recent call last)"
INDENTED_HEADER_RE = re.compile(r"([ \t]+)Traceback \(most recent call last\):")
GO_MODULE_VERSION_RE = re.compile(r"@v[\w.\-+]+(?=/)")
# Styles that print the innermost frame first (under the message) rather than last.
INNERMOST_FIRST = frozenset({"java", "csharp", "js", "go", "ruby", "php", "pytest"})


@dataclass(frozen=True, slots=True)
class Frame:
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


@dataclass(slots=True)
class LineBlock:
    """Logical lines of one block of the log, with the original 1-based line numbers.

    first/last are None when logical line i is simply original line base + i."""

    lines: list[str]
    base: int
    first: list[int] | None = None
    last: list[int] | None = None
    # The block's own UTF-8 bytes when the lines are exactly those bytes split at "\n" (nothing
    # stripped, joined or expanded): the matcher scans them as they are, no join and re-encode.
    data: bytes | None = None
    # How many lines of the original log the block used (where the next block's numbers start).
    consumed: int = 0

    def line_no(self, i: int) -> int:
        return self.first[i] if self.first is not None else self.base + i

    def end_line_no(self, i: int) -> int:
        return self.last[i] if self.last is not None else self.base + i


def starts_record(line: str) -> bool:
    """Whether a line opens a new log record or an indented block (so the line above was not
    wrapped into it: a terminal cuts mid-word and carries on at column 0)."""
    m = PREFIX_RE.match(line)
    return (
        bool(m and m.end())
        or line.startswith(("  ", "\t", "Traceback", "During handling", "The above", '{"'))
        or line[:1] in BOX_DRAWING
        or EXCEPTION_RE.match(line) is not None
    )


def _same_start(line: str, other: str) -> bool:
    """Whether two lines open with the same word, digits aside ("Loading shard 1 of 4",
    "Loading shard 2 of 4"; "[1/4] ...", "[2/4] ..."): records of one kind, each complete. A
    terminal carries a wrapped row on mid-sentence, seldom with the word the row opened with."""
    words, others = line.split(None, 1), other.split(None, 1)
    return bool(words and others) and (
        DIGITS_RE.sub("0", words[0]) == DIGITS_RE.sub("0", others[0])
    )


def _wrap_width(lines: list[str]) -> int | None:
    """The width a terminal or logger wrapped these lines at, or None.

    Wrapped rows all have exactly the wrap width and go on in a line that opens no record of its
    own. The width is the commonest long length; it must be a usual terminal width with two
    such rows (one if no line is longer), or any width with three, and most rows of that length
    must go on."""
    if not lines:
        return None
    lengths = list(map(len, lines))
    every = Counter(lengths)  # counted in C; the filter then runs over distinct lengths only
    common = Counter(
        {n: count for n, count in every.items() if WRAP_MIN_WIDTH <= n <= WRAP_MAX_WIDTH}
    )
    widest = max(every)
    for width, count in common.most_common(3):
        if sum(n for w, n in common.items() if w > width) > 2 * count:
            continue  # wrapping leaves few lines longer than its width
        checked = went_on = 0
        distinct: set[str] = set()
        start = 0
        while checked < WRAP_SAMPLE:
            try:
                i = lengths.index(width, start)
            except ValueError:
                break
            start = i + 1
            if i + 1 >= len(lines):
                break
            if _same_start(lines[i], lines[i + 1]):
                continue  # records of one kind: they say nothing about wrapping either way
            checked += 1
            if (
                lines[i + 1]
                and not starts_record(lines[i + 1])
                and lines[i][-1:] not in BOX_DRAWING
            ):
                went_on += 1
                distinct.add(lines[i])
            elif checked >= 8 and went_on * 2 <= checked:
                break  # most rows of this length are whole records: no wrapping here
        if went_on * 2 <= checked:
            continue
        if len(distinct) >= WRAP_MIN_LINES:
            return width
        if width in TERMINAL_WIDTHS and (len(distinct) >= 2 or (distinct and width == widest)):
            return width
    return None


def split_lines(text: str, base: int = 1, data: bytes | None = None) -> LineBlock:
    """Normalise decoded text into logical lines (no ANSI, CRs handled, wrapping undone).
    `data`, when given, is the UTF-8 bytes the text was decoded from."""
    orig = text
    plain = strip_ansi(text)
    if plain is not text:
        text, data = plain, None
    if text.startswith("\ufeff"):
        text, data = text[1:], None
    first: list[int] | None = None
    old_mac = False
    if "\r" in text:
        data = None
        text = text.replace("\r\n", "\n")
        if "\r" in text and "\n" not in text.rstrip("\r"):
            text = text.replace("\r", "\n")  # old Mac line endings
            old_mac = True
    raw = text.split("\n")
    if text.endswith("\n"):
        raw.pop()
    lines = raw
    if "\r" in text:
        # A lone CR redraws the line (progress bars): keep every drawn segment, all on this line.
        lines, first = [], []
        for n, line in enumerate(raw):
            if "\r" in line:
                for seg in line.split("\r"):
                    if seg.strip():
                        lines.append(seg)
                        first.append(base + n)
            else:
                lines.append(line)
                first.append(base + n)
    if old_mac or text is orig or (text == orig[1:] and orig.startswith("\ufeff")):
        consumed = len(raw)  # the same as counting newlines in the original text
    else:
        consumed = orig.count("\n") + (0 if orig.endswith("\n") else 1)
    if "\\n" in text and '{"' in text:
        lines, first = _expand_json(lines, first, base)
    if _indented_header(text):
        lines = _dedent_tracebacks(lines)
    if lines is not raw:
        data = None
    elif data is not None and data.endswith(b"\n"):
        data = data[:-1]
    block = LineBlock(lines, base, first, list(first) if first is not None else None, data)
    width = _wrap_width(lines)
    if width is not None:
        block = _unwrap(block, width)
    block.consumed = consumed
    return block


def _indented_header(text: str) -> bool:
    """Whether any traceback header in the text has a space or tab right before it (the
    only way a line can match INDENTED_HEADER_RE once its prefix is stripped)."""
    pos = text.find(TRACEBACK_HEADER)
    while pos >= 0:
        if pos and text[pos - 1] in " \t":
            return True
        pos = text.find(TRACEBACK_HEADER, pos + 1)
    return False


def _dedent_tracebacks(lines: list[str]) -> list[str]:
    """A traceback pasted indented (in an email, a markdown list, a ticket) is read as if it
    were not: from an indented "Traceback ..." header on, while lines keep that indent (after
    their log or quote prefix), the indent is taken off."""
    out: list[str] | None = None
    headers = [i for i, line in enumerate(lines) if "Traceback (most recent call last)" in line]
    for start in headers:
        bare = strip_prefix(lines[start])
        m = INDENTED_HEADER_RE.match(bare)
        if not m:
            continue
        indent = m.group(1)
        out = out if out is not None else list(lines)
        for i in range(start, len(lines)):
            bare = strip_prefix(lines[i])
            if not bare.strip():
                continue
            if not bare.startswith(indent):
                break
            out[i] = lines[i][: len(lines[i]) - len(bare)] + bare[len(indent) :]
    return out if out is not None else lines


def _expand_json(
    lines: list[str], first: list[int] | None, base: int
) -> tuple[list[str], list[int] | None]:
    """Structured (JSON) log records carry tracebacks as escaped strings: give each string
    value with newlines its own lines after the record, all on the record's line number."""
    out: list[str] = []
    numbers: list[int] = []
    changed = False
    for i, line in enumerate(lines):
        n = first[i] if first is not None else base + i
        out.append(line)
        numbers.append(n)
        if "\\n" not in line or not line.lstrip().startswith("{") or len(line) > JSON_MAX_CHARS:
            continue
        try:
            record = json.loads(line)
        except (ValueError, RecursionError):  # not JSON, or nested deeper than the parser goes
            continue
        for value in _json_strings(record):
            if "\n" in value:
                parts = [p.replace("\r", "") for p in value.split("\n")]
                out.extend(parts)
                numbers.extend([n] * len(parts))
                changed = True
    if not changed:
        return lines, first
    return out, numbers


def _json_strings(value: object, depth: int = 0) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif depth < 4 and isinstance(value, dict):
        for item in value.values():
            yield from _json_strings(item, depth + 1)
    elif depth < 4 and isinstance(value, list):
        for item in value:
            yield from _json_strings(item, depth + 1)


def _unwrap(block: LineBlock, width: int) -> LineBlock:
    lines: list[str] = []
    first: list[int] = []
    last: list[int] = []
    joining = False
    for i, line in enumerate(block.lines):
        if joining:
            lines[-1] += line
            last[-1] = block.end_line_no(i)
        else:
            lines.append(line)
            first.append(block.line_no(i))
            last.append(block.end_line_no(i))
        following = block.lines[i + 1] if i + 1 < len(block.lines) else ""
        # A row of the width in a run of rows of one kind ("Loading shard 1 of 4 ...") is a
        # whole record, and so is one that the next line starts the same way.
        previous = block.lines[i - 1] if i and not joining else ""
        joining = (
            len(line) == width
            and bool(following)
            and not starts_record(following)
            and not _same_start(line, following)
            and not (len(previous) == width and _same_start(previous, line))
        )
    return LineBlock(lines, block.base, first, last)


def blocks(
    source: IO[bytes] | IO[str] | bytes | str, block_bytes: int | None = None
) -> Iterator[LineBlock]:
    """Stream a log as blocks of logical lines, cutting only at line ends (blocks of about
    BLOCK_BYTES by default). Bytes are UTF-8 (bad bytes replaced) unless a UTF-16 byte-order
    mark says otherwise (PowerShell's `>`)."""
    block_bytes = block_bytes or BLOCK_BYTES
    if isinstance(source, bytes):
        if source.startswith(UTF16_BOMS):
            source = source.decode("utf-16", "replace")
        yield from _blocks_of(_pieces(source, block_bytes), block_bytes)
    elif isinstance(source, str):
        yield from _blocks_of(_pieces(source, block_bytes), block_bytes)
    else:
        first = source.read(block_bytes)
        if isinstance(first, bytes) and first.startswith(UTF16_BOMS):
            decoder = codecs.getincrementaldecoder("utf-16")("replace")
            raw = cast(IO[bytes], source)
            chunks: Iterator[str | bytes] = (
                decoder.decode(c, final=not c)
                for c in itertools.chain([first], iter(lambda: raw.read(block_bytes), b""), [b""])
            )
        elif _interactive(source):
            chunks = _until_short(source, first, block_bytes)
        else:
            rest: Iterator[str | bytes] = iter(lambda: source.read(block_bytes), source.read(0))
            chunks = itertools.chain([first], rest)
        yield from _blocks_of(chunks, block_bytes)


def _until_short(
    source: IO[bytes] | IO[str], first: str | bytes, size: int
) -> Iterator[str | bytes]:
    """A terminal's chunks. Its end of input (Ctrl-D) is not sticky: reading again would wait
    for a second one. A buffered read comes back short only at the end, so that is the end."""
    chunk = first
    while True:
        yield chunk
        if len(chunk) < size:
            return
        chunk = source.read(size)


def _interactive(source: IO[bytes] | IO[str]) -> bool:
    try:
        return bool(source.isatty())
    except (AttributeError, ValueError, OSError):
        return False


def _pieces(data: str | bytes, size: int) -> Iterator[str | bytes]:
    for start in range(0, len(data), size):
        yield data[start : start + size]


def _blocks_of(chunks: Iterable[str | bytes], block_bytes: int) -> Iterator[LineBlock]:
    base = 1
    pending_b = b""
    pending_s = ""
    for chunk in chunks:
        if isinstance(chunk, bytes):
            data = pending_b + chunk
            cut = data.rfind(b"\n")
            if cut < 0 and len(data) < 4 * block_bytes:
                pending_b = data
                continue
            cut = len(data) - 1 if cut < 0 else cut
            pending_b = data[cut + 1 :]
            raw = data[: cut + 1]
            text = raw.decode("utf-8", "replace")
        else:
            raw = None
            data_s = pending_s + chunk
            cut = data_s.rfind("\n")
            if cut < 0 and len(data_s) < 4 * block_bytes:
                pending_s = data_s
                continue
            cut = len(data_s) - 1 if cut < 0 else cut
            pending_s = data_s[cut + 1 :]
            text = data_s[: cut + 1]
        block = split_lines(text, base, raw)
        # A line too long to wait for its end (4 * block_bytes) is cut: the next block goes
        # on with the same line of the log, not the one after it.
        base += block.consumed - (0 if text.endswith(("\n", "\r")) else 1)
        yield block
    if pending_b:
        yield split_lines(pending_b.decode("utf-8", "replace"), base, pending_b)
    elif pending_s:
        yield split_lines(pending_s, base)
