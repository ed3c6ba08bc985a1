"""Reading a pasted log as people produce them: undecodable bytes, ANSI colours, CRLF and
progress-bar CRs, terminal wrapping, JSON log records, indented tracebacks; blocks of logical
lines out. One line's prefix, level, exception and frame are read by kb.logline.

Work is done per block of lines with C-level string operations; per-line Python work is kept for
the few lines the matcher asks about, so a 20 MB log costs little more than reading it.
"""

from __future__ import annotations

import codecs
import itertools
import json
import re
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import IO, cast

from kb.logline import EXCEPTION_RE, PREFIX_RE, strip_ansi, strip_prefix

__all__ = [
    "BLOCK_BYTES",
    "LineBlock",
    "blocks",
    "split_lines",
    "starts_record",
]

# A block is decoded and scanned at once; big enough to amortise per-call costs, small enough
# that memory does not grow with the log. Each block's bytes, text and lines are new memory, and
# every page of it a fault on this VM: 1 MB blocks against 4 made cold `kb match --json` of
# big.log at 150,000 records 0.200 s against 0.204 (ratio 0.977, 24 pairs), peak RSS 68 MB
# against 83, and even at 1M records (0.985, 16 pairs); 256-512 KB were no faster (2026-12-05).
# A line longer than 4 blocks is read in pieces (_blocks_of).
BLOCK_BYTES = 1 << 20
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
DIGITS_RE = re.compile(r"\d+")

TRACEBACK_HEADER = "Traceback (most recent call last)"
INDENTED_HEADER_RE = re.compile(r"([ \t]+)Traceback \(most recent call last\):")


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
    # Where `data` starts in the bytes the blocks were read from, when it starts a line there
    # (None without `data`, or for the rest of a line too long to wait for): the prefilter's
    # hits of a whole file, found before the block was read, are looked up by it
    # (kb.matcher.prescan).
    offset: int | None = None

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
    if _may_hold_json_records(text):
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


def _may_hold_json_records(text: str) -> bool:
    """Whether the text may hold a structured log record with an escaped newline. Python looks
    for one character with memchr but for two with a skip loop that crawls where the second is
    common (big.log, 21.9 MB: 2.5 ms against 35 for each of "\\n" and '{"'), so the one-character
    tests go first and most logs, which hold no backslash or no brace, stop there."""
    return "\\" in text and "{" in text and "\\n" in text and '{"' in text


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


def _opening(line: str) -> tuple[str, ...] | None:
    """How a line opens: its first two words, digits aside ("Not Found: /x" -> ("Not",
    "Found:")); None for a line of fewer words (a wrapped row's short tail)."""
    words = line.split(None, 2)[:2]
    return tuple(DIGITS_RE.sub("0", word) for word in words) if len(words) == 2 else None


def _unwrap(block: LineBlock, width: int) -> LineBlock:
    lines: list[str] = []
    first: list[int] = []
    last: list[int] = []
    # How the lines that surely open a record begin (those below a row shorter than the width):
    # a row of the width followed by a line that opens the same way is a whole record too
    # (Django's access line of 100 columns, then `Not Found: /favicon.ico`, which also follows
    # the shorter access lines). A terminal's wrapped row goes on mid-sentence, never so.
    openers = {
        _opening(line)
        for i, line in enumerate(block.lines)
        if i == 0 or len(block.lines[i - 1]) != width
    }
    openers.discard(None)
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
        # A row of the width in a run of rows of one kind ("Loading shard 1 of 4 ...": their
        # words after any log prefix open alike) is a whole record, and so is one that the next
        # line starts the same way.
        previous = block.lines[i - 1] if i and not joining else ""
        joining = (
            len(line) == width
            and bool(following)
            and not starts_record(following)
            and not _same_start(line, following)
            and _opening(following) not in openers
            and not (
                len(previous) == width and _same_start(strip_prefix(previous), strip_prefix(line))
            )
        )
    return LineBlock(lines, block.base, first, last)


def blocks(
    source: IO[bytes] | IO[str] | bytes | str,
    block_bytes: int | None = None,
    first_line: int = 1,
) -> Iterator[LineBlock]:
    """Stream a log as blocks of logical lines, cutting only at line ends (blocks of about
    BLOCK_BYTES by default). Bytes are UTF-8 (bad bytes replaced) unless a UTF-16 byte-order
    mark says otherwise (PowerShell's `>`). `first_line` is the number of the source's first
    line (a part of a log that starts further down, kb.matcher.split)."""
    block_bytes = block_bytes or BLOCK_BYTES
    if isinstance(source, bytes):
        if source.startswith(UTF16_BOMS):
            source = source.decode("utf-16", "replace")
        yield from _blocks_of(_pieces(source, block_bytes), block_bytes, first_line)
    elif isinstance(source, str):
        yield from _blocks_of(_pieces(source, block_bytes), block_bytes, first_line)
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
        yield from _blocks_of(chunks, block_bytes, first_line)


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
    """`data` in pieces of at most `size`, each cut after its last line end where it has one:
    _blocks_of then takes each piece as it is, not copied twice more (joined to the line
    before it, then cut at its last line end)."""
    newline: str | bytes = "\n" if isinstance(data, str) else b"\n"
    start, end = 0, len(data)
    while start < end:
        stop = start + size
        if stop < end:
            cut = data.rfind(newline, start, stop)  # type: ignore[arg-type]
            stop = stop if cut < 0 else cut + 1
        yield data[start:stop]
        start = stop


def _blocks_of(
    chunks: Iterable[str | bytes], block_bytes: int, base: int = 1
) -> Iterator[LineBlock]:
    pending_b = b""
    pending_s = ""
    at = 0  # where pending_b starts in the bytes read
    line_start = True  # ... and whether a line starts there
    for chunk in chunks:
        if isinstance(chunk, bytes):
            data = pending_b + chunk
            cut = data.rfind(b"\n")
            if cut < 0 and len(data) < 4 * block_bytes:
                pending_b = data
                continue
            cut = len(data) - 1 if cut < 0 else cut
            pending_b = data[cut + 1 :]
            own = data[: cut + 1]
            raw: bytes | None = own
            text = own.decode("utf-8", "replace")
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
        if raw is not None:
            block.offset = at if block.data is not None and line_start else None
            at, line_start = at + len(raw), raw.endswith(b"\n")
        # A line too long to wait for its end (4 * block_bytes) is cut: the next block goes
        # on with the same line of the log, not the one after it.
        base += block.consumed - (0 if text.endswith(("\n", "\r")) else 1)
        yield block
    if pending_b:
        block = split_lines(pending_b.decode("utf-8", "replace"), base, pending_b)
        block.offset = at if block.data is not None and line_start else None
        yield block
    elif pending_s:
        yield split_lines(pending_s, base)
