"""Reading one input's layers: open a file, stdin or URL and count and hash its bytes (gzip is
undone above them, kb.ingest.source), and read JSON text streamed, whatever the layout (one
value, an array, the compact index with its `errors` array), as events; the `Item`s an input
yields. kb.ingest.source puts the layers together and reads JSON Lines.
"""

from __future__ import annotations

import hashlib
import io
import json
import re
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import IO, Any, Final, Protocol

from kb.errors import InputError

READ_CHUNK: Final = 1 << 20  # bytes of text the streaming JSON reader asks for at a time
# The most JSON text one record (or one manifest, or one element of an array) may take. The
# largest of the 69,652 records in the shared corpus is 5.4 KB, so this is 1,500 times that;
# a value past it is rejected alone and read past without being held (a 1 GB string in a
# 1 MB gzip once made an import peak at 2.2 GB).
MAX_RECORD_CHARS: Final = 8 << 20
GZIP_MAGIC: Final = b"\x1f\x8b"
# A gzip that expands more than this many times is refused as a bomb once it has expanded past
# BOMB_MIN_BYTES: the shared corpus's records.jsonl.gz expands 17 times, JSON records hardly
# past 50, while a gigabyte of one repeated byte fits in a megabyte (1,000 times).
BOMB_RATIO: Final = 500
BOMB_MIN_BYTES: Final = 32 << 20

ProgressFn = Callable[[int], None]


class TextReader(Protocol):
    def read(self, size: int = -1, /) -> str: ...


@dataclass(frozen=True)
class Item:
    """One JSON value found in a source, with where it was found."""

    file: str
    line: int  # 1-based line for JSONL and single objects, the index for array elements
    value: Any
    dataset_version: str | None = None
    compact: bool = False  # a row of the compact index.json


@dataclass(frozen=True)
class Unparsable:
    """A JSONL line that is not JSON: a rejected record, not a fatal input."""

    reason: str


@dataclass(frozen=True)
class Container:
    """A top-level object that is not a record (a manifest): the caller decides what it is."""

    file: str
    value: dict[str, Any]


# --------------------------------------------------------------------------- bytes


def is_url(spec: str) -> bool:
    return spec.startswith(("http://", "https://"))


class CountingReader(io.RawIOBase):
    """Passes bytes through, hashing them and reporting how many went by."""

    def __init__(
        self,
        raw: IO[bytes],
        progress: ProgressFn | None = None,
        *,
        compressed: CountingReader | None = None,
        name: str = "",
        hashed: bool = True,
    ) -> None:
        self._raw = raw
        self.progress = progress
        self._compressed = compressed  # the gzip these bytes come out of, to spot a bomb
        self._name = name
        # Only a file's own bytes are hashed (a manifest's sha256 is of them): hashing the
        # text a gzip holds, and the gzip's bytes a second time, was never read, and took 0.5
        # s of a 150k-record import.
        self._hashed = hashed
        self.sha256 = hashlib.sha256()
        self.count = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        data = self._raw.read(len(buffer))
        n = len(data)
        buffer[:n] = data
        if n:
            if self._hashed:
                self.sha256.update(data)
            self.count += n
            if self.progress is not None:
                self.progress(n)
            packed = self._compressed
            if packed and self.count > max(BOMB_MIN_BYTES, BOMB_RATIO * packed.count):
                raise InputError(
                    f"{self._name}: expands to more than {BOMB_RATIO:,} times its gzipped size "
                    "(a gzip bomb?); not read"
                )
        return n

    def close(self) -> None:
        try:
            self._raw.close()
        finally:
            super().close()


def open_raw(spec: str) -> IO[bytes]:
    """The bytes of a file, `-` (stdin) or an http(s) URL; InputError when they cannot be had."""
    if spec == "-":
        return sys.stdin.buffer
    if is_url(spec):
        from kb.ingest.http import fetch

        return fetch(spec)
    try:
        return open(spec, "rb")
    except FileNotFoundError:
        raise InputError(f"{spec}: no such file") from None
    except IsADirectoryError:
        raise InputError(f"{spec}: is a folder") from None
    except OSError as exc:
        raise InputError(f"{spec}: cannot read: {exc.strerror}") from exc


# --------------------------------------------------------------------------- JSON streaming


@dataclass(frozen=True)
class WholeValue:
    """A top-level value, decoded whole (a record, a manifest, a compact index's header)."""

    line: int
    value: Any
    streamed_rows: bool = False  # its `errors` array went by as CompactRow events already


@dataclass(frozen=True)
class ArrayElement:
    """One element of a top-level array (a per-repository file)."""

    index: int
    value: Any


@dataclass(frozen=True)
class CompactRow:
    """One row of a compact index's `errors` array, streamed."""

    index: int
    dataset_version: str | None
    value: Any


JsonEvent = WholeValue | ArrayElement | CompactRow


class Undecodable(Exception):
    """A value JSON's grammar allows but the decoder refuses (a number of more than 4,300
    digits, nesting deeper than the interpreter's stack), or one past MAX_RECORD_CHARS: one
    bad record, skipped."""

    def __init__(self, reason: str, *, too_large: bool = False) -> None:
        super().__init__(reason)
        self.reason = reason
        self.too_large = too_large


def too_large() -> Undecodable:
    return Undecodable(
        f"larger than the {MAX_RECORD_CHARS:,}-character limit for one record", too_large=True
    )


def undecodable_reason(exc: BaseException) -> str:
    if isinstance(exc, RecursionError):
        return "not valid JSON: nested too deep to read"
    if "digits" in str(exc):
        return "not valid JSON: a number of more than 4,300 digits"
    return f"not valid JSON: {exc}"


# Where a skipped value may end, outside and inside a string.
_SKIP_OUTSIDE: Final = re.compile(r'["\[\]{},]')
_SKIP_INSIDE: Final = re.compile(r'["\\]')
# Runs read in one step, not a character at a time in Python: a gzip bomb of a gigabyte of
# spaces or of "[" otherwise took minutes.
_WHITESPACE: Final = re.compile(r"[ \t\r\n\ufeff]*")
_OPENERS: Final = re.compile(r"[\[{][\[{ \t\r\n]*")
_CLOSERS: Final = re.compile(r"[\]}][\]} \t\r\n]*")


def _brackets(buf: str, start: int, end: int) -> int:
    """How many brackets a run of brackets and whitespace holds."""
    return end - start - sum(buf.count(c, start, end) for c in " \t\r\n")


class JsonStream:
    """Incremental JSON values from text, without holding the whole file in memory."""

    def __init__(self, text: TextReader, name: str) -> None:
        self._text = text
        self._name = name
        self._buf = ""
        self._pos = 0
        self._dropped = 0  # characters already dropped from the front of the buffer
        self._eof = False
        self.line = 1  # line of the next unread character
        self._decoder = json.JSONDecoder()

    def _fill(self, size: int = READ_CHUNK) -> bool:
        if self._eof:
            return False
        chunk = self._text.read(size)
        if not chunk:
            self._eof = True
            return False
        self._dropped += self._pos
        self._buf = self._buf[self._pos :] + chunk
        self._pos = 0
        return True

    def tell(self) -> int:
        """Characters read past so far."""
        return self._dropped + self._pos

    def peek(self) -> str | None:
        """The next non-whitespace character, or None at the end."""
        while True:
            buf, pos, n = self._buf, self._pos, len(self._buf)
            spaces = _WHITESPACE.match(buf, pos)
            end = spaces.end() if spaces else pos
            if end > pos:
                self.line += buf.count("\n", pos, end)
                pos = end
            self._pos = pos
            if pos < n:
                return buf[pos]
            if not self._fill():
                return None

    def take(self, char: str) -> None:
        if self.peek() != char:
            found = self.peek()
            raise self._error(f"expected {char!r}, found {found!r}" if found else "unexpected end")
        self._pos += 1

    def value(self, limit: int | None = None) -> Any:
        """Decode the next whole value, reading more text until it is complete. Raises
        Undecodable, with the value skipped, when the decoder refuses a well-formed value or
        it is longer than `limit` characters (default MAX_RECORD_CHARS)."""
        limit = MAX_RECORD_CHARS if limit is None else limit
        self.peek()
        size = READ_CHUNK
        while True:
            try:
                value, end = self._decoder.raw_decode(self._buf, self._pos)
            except json.JSONDecodeError as exc:
                if len(self._buf) - self._pos > limit:  # incomplete, and too long already
                    self._skip_value()
                    raise too_large() from None
                if self._fill(size):
                    size = min(size * 2, max(limit, READ_CHUNK))
                    continue
                raise self._error(exc.msg) from None
            except (ValueError, RecursionError) as exc:
                self._skip_value()
                raise Undecodable(undecodable_reason(exc)) from None
            at_end = end == len(self._buf) and not isinstance(value, dict | list | str)
            if at_end and self._fill(size):  # a number or literal may continue in the next chunk
                continue
            self.line += self._buf.count("\n", self._pos, end)
            too_long = end - self._pos > limit
            self._pos = end
            if too_long:
                raise too_large()
            return value

    def _skip_value(self) -> None:
        """Move past one value without decoding it: brackets counted outside strings, escapes
        skipped inside them, the buffer trimmed as it goes (memory stays flat)."""
        depth = 0
        inside = False
        while True:
            buf, pos, n = self._buf, self._pos, len(self._buf)
            while pos < n:
                found = (_SKIP_INSIDE if inside else _SKIP_OUTSIDE).search(buf, pos)
                if found is None:
                    pos = n
                    break
                char, at = found.group(), found.start()
                if inside:
                    if char == "\\":
                        if at + 1 >= n:  # the escaped character comes with the next chunk
                            pos = at
                            break
                        pos = at + 2
                        continue
                    inside, pos = False, at + 1
                    if depth == 0:
                        return self._advance(pos)
                elif char == '"':
                    inside, pos = True, at + 1
                elif char in "[{":
                    run = _OPENERS.match(buf, at)
                    end = run.end() if run else at + 1
                    depth += _brackets(buf, at, end)
                    pos = end
                elif depth == 0:  # a comma or the enclosing bracket ends a scalar
                    return self._advance(at)
                elif char == ",":
                    pos = at + 1
                else:
                    run = _CLOSERS.match(buf, at)
                    end = run.end() if run else at + 1
                    closed = _brackets(buf, at, end)
                    if closed < depth:
                        depth, pos = depth - closed, end
                        continue
                    for pos in range(at, end):  # the closer that ends the value
                        if buf[pos] in "]}":
                            depth -= 1
                            if depth == 0:
                                return self._advance(pos + 1)
            self._advance(pos)
            if not self._fill():
                raise self._error("unexpected end")

    def _advance(self, pos: int) -> None:
        self.line += self._buf.count("\n", self._pos, pos)
        self._pos = pos

    def _error(self, message: str) -> InputError:
        return InputError(f"{self._name}:{self.line}: not valid JSON: {message}")

    def events(self) -> Iterator[JsonEvent]:
        """Top-level values; an array's elements and an object's `errors` array are streamed."""
        while (char := self.peek()) is not None:
            line = self.line
            if char == "[":
                self._pos += 1
                for index, element in enumerate(self._array_items()):
                    yield ArrayElement(index, element)
                continue
            if char != "{":
                raise self._error(f"expected an object or array, found {char!r}")
            start = self.tell()
            self._pos += 1
            obj: dict[str, Any] = {}
            streamed = False
            broken: Unparsable | None = None  # a member the decoder refused: one bad record
            oversized = False  # past MAX_RECORD_CHARS: the rest is read past, not kept
            if self.peek() == "}":
                self._pos += 1
                yield WholeValue(line, obj)
                continue
            while True:
                room = MAX_RECORD_CHARS - (self.tell() - start)
                if oversized or room <= 0:
                    if not oversized:
                        broken, oversized = Unparsable(too_large().reason), True
                        obj.clear()
                    self._skip_value()  # the key
                    self.take(":")
                    self._skip_value()
                    key = None
                else:
                    try:
                        key = self.value(limit=room)
                    except Undecodable as exc:  # a key too long to keep
                        broken, oversized = Unparsable(exc.reason), True
                        obj.clear()
                        self.take(":")
                        self._skip_value()
                        key = None
                if key is not None:
                    if not isinstance(key, str):
                        raise self._error("object keys must be strings")
                    self.take(":")
                    if key == "errors" and self.peek() == "[":
                        self._pos += 1
                        streamed = True
                        version = obj.get("datasetVersion")
                        version = version if isinstance(version, str) else None
                        before = self.tell()
                        for index, row in enumerate(self._array_items()):
                            yield CompactRow(index, version, row)
                        start += self.tell() - before  # its rows are records of their own
                    else:
                        room = MAX_RECORD_CHARS - (self.tell() - start)
                        try:
                            obj[key] = self.value(limit=room)
                        except Undecodable as exc:
                            broken = broken or Unparsable(exc.reason)
                            if exc.too_large:
                                broken, oversized = Unparsable(exc.reason), True
                                obj.clear()
                separator = self.peek()
                self._pos += 1
                if separator == "}":
                    break
                if separator != ",":
                    raise self._error(f"expected ',' or '}}', found {separator!r}")
            yield WholeValue(line, broken or obj, streamed_rows=streamed)

    def _array_items(self) -> Iterator[Any]:
        if self.peek() == "]":
            self._pos += 1
            return
        while True:
            try:
                item = self.value()
            except Undecodable as exc:
                item = Unparsable(exc.reason)
            yield item
            separator = self.peek()
            self._pos += 1
            if separator == "]":
                return
            if separator != ",":
                raise self._error(f"expected ',' or ']', found {separator!r}")
