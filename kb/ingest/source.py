"""One input, opened and read as `Item`s: its bytes counted and hashed, gzip undone, then JSON
Lines read line by line as bytes, and every other layout (one value, an array, a compact index,
a manifest) as text by kb.ingest.reading's streaming reader.

JSON Lines is how bulk datasets travel, and a large import reads little else, so its lines
skip the text layer: each line's UTF-8 bytes go to the decoder as they are (a 150k-record gzip
read and decoded in 2.13-2.49 s against 2.91-3.27 s through the text layer, 2026-12-04, three
rounds in turns). A line that path is not sure of is read by the text layer's rules instead, so
every line gives the item it gives as text: a line the decoder refuses (not JSON, not UTF-8, a
value only `json` reads) is decoded as text alone; a line holding a carriage return (which the
text layer takes for a line end too) or longer than MAX_RECORD_CHARS bytes hands the rest of
the input to the text layer.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import itertools
import json
import zlib
from collections.abc import Iterable, Iterator
from typing import IO, Any, Final, cast

from kb.errors import InputError
from kb.ingest.reading import (
    GZIP_MAGIC,
    MAX_RECORD_CHARS,
    READ_CHUNK,
    ArrayElement,
    CompactRow,
    Container,
    CountingReader,
    Item,
    JsonStream,
    ProgressFn,
    TextReader,
    Unparsable,
    open_raw,
    too_large,
    undecodable_reason,
)
from kb.ingest.typed import TypedLines
from kb.jsontext import REFUSED, loads, loads_utf8

__all__ = ["JSONL_PROBE_LIMIT", "Source", "is_container", "items_of_bytes", "items_of_text"]

# What the text layer reads from the bytes below it at a time. Reading a 150k-record gzip
# line by line took 1.14-1.52 s with 64 KB and 1.11-1.61 s with 1 MB, against 1.48-1.92 s
# with CPython's 8 KB (2026-12-04, six rounds in turns); the smaller of the two holds less.
TEXT_CHUNK: Final = 1 << 16
JSONL_PROBE_LIMIT: Final = 8 << 20  # a first line longer than this is not one JSONL record


class Source:
    """An opened input: raw bytes counted and hashed, decompressed when gzipped."""

    def __init__(self, spec: str, progress: ProgressFn | None = None, name: str | None = None):
        self.spec = spec
        self.name = name or ("<stdin>" if spec == "-" else spec)
        self.outer = CountingReader(open_raw(spec), progress)
        buffered = io.BufferedReader(self.outer, buffer_size=READ_CHUNK)
        self.gzipped = buffered.peek(2)[:2] == GZIP_MAGIC
        self.inner: CountingReader | None = None
        data: IO[bytes] = buffered
        if self.gzipped:
            # what the decompressor has taken so far
            consumed = CountingReader(buffered, hashed=False)
            self.inner = CountingReader(
                _gunzipped(consumed),  # type: ignore[arg-type]
                compressed=consumed,
                name=self.name,
                hashed=False,
            )
            # Undone in the thread that reads the records. A thread of its own, four 1 MB
            # chunks ahead (b5b35f0), made imports slower: it wanted the GIL each time this
            # thread let go of it (every SQLite step, every hash) and the two handed it back
            # and forth. Without it, at 150,000 records, 2026-12-05, in turns: `kb import` of
            # the corpus 12.76 s against 13.05 (6 pairs, median ratio 0.97), a re-import of it
            # (unchanged) 6.00 against 6.77 (5 pairs, 0.87; system time 0.26 s against 1.42).
            data = io.BufferedReader(self.inner, buffer_size=READ_CHUNK)
        self.data = data

    def close(self) -> None:
        if self.spec != "-":
            self.data.close()

    def items(self) -> Iterator[Item | Container]:
        """The values of this source; read errors become InputError naming the source."""
        try:
            yield from items_of_bytes(self.name, self.data)
        except UnicodeDecodeError as exc:
            raise InputError(f"{self.name}: not UTF-8 text ({exc.reason})") from exc
        except _decompression_errors() as exc:
            raise InputError(f"{self.name}: not a valid gzip file ({exc})") from exc
        except (OSError, EOFError) as exc:
            if isinstance(exc, InputError):
                raise
            raise InputError(f"{self.name}: cannot read: {exc}") from exc


def _gunzipped(compressed: Any) -> gzip.GzipFile:
    """The bytes a gzip stream holds: read by ISA-L (the `isal` package) where it is
    installed, else by the standard library: the same bytes, and the same errors for a stream
    cut short (EOFError) or not gzip (OSError); a damaged one raises one of
    _decompression_errors(). ISA-L undoes the 150,000-record corpus's 48 MB in 0.21-0.23 s
    against 0.65-0.74 s (2026-12-05), a third of a second of an import's own time."""
    try:
        from isal.igzip import IGzipFile
    except ImportError:
        return gzip.GzipFile(fileobj=compressed, mode="rb")
    reader: gzip.GzipFile = IGzipFile(fileobj=compressed, mode="rb")  # type: ignore[no-untyped-call]
    return reader


def _decompression_errors() -> tuple[type[Exception], ...]:
    """What a damaged gzip raises: its deflate stream broken, or its checksum or length wrong
    (asked for only when something was raised)."""
    try:
        from isal import isal_zlib
    except ImportError:
        return (zlib.error, gzip.BadGzipFile)
    return (zlib.error, gzip.BadGzipFile, cast("type[Exception]", isal_zlib.error))


def text_of(data: IO[bytes]) -> io.TextIOWrapper:
    """The bytes as text. Bytes that are not UTF-8 become lone surrogates (U+DC80..U+DCFF),
    which validation refuses in the record that holds them: one bad record, not a lost file."""
    text = io.TextIOWrapper(data, encoding="utf-8", errors="surrogateescape", newline="")
    # The wrapper asks the buffer below for 8 KB at a time, and a buffered reader with an
    # empty buffer hands such a read straight to the layer under it: every layer (gzip, the
    # byte counts) then ran once per 8 KB, whatever its buffer size (CPython's
    # TextIOWrapper._CHUNK_SIZE, which other Pythons may lack; see TEXT_CHUNK).
    with contextlib.suppress(AttributeError):
        text._CHUNK_SIZE = TEXT_CHUNK  # type: ignore[attr-defined]
    return text


class _Prefixed(io.RawIOBase):
    """Bytes already read, then the rest of a stream."""

    def __init__(self, head: bytes, rest: IO[bytes]) -> None:
        self._head = memoryview(head)
        self._rest = rest

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        if self._head:
            n = min(len(buffer), len(self._head))
            buffer[:n] = self._head[:n]
            self._head = self._head[n:]
            return n
        data = self._rest.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)


def _text_after(head: bytes, rest: IO[bytes]) -> io.TextIOWrapper:
    """`head` (bytes already read, ending where a line ends or at the end) and the rest."""
    return text_of(io.BufferedReader(_Prefixed(head, rest), buffer_size=READ_CHUNK))


def _plain(line: bytes) -> bool:
    """Whether the text layer reads these bytes as this one line too: no carriage return but
    in a final CRLF (it ends a line of its own there), and no more bytes than a record's
    characters may be (so no more characters either)."""
    cr = line.find(b"\r")
    return len(line) <= MAX_RECORD_CHARS and (
        cr < 0 or (cr == len(line) - 2 and line.endswith(b"\n"))
    )


def items_of_bytes(name: str, data: IO[bytes]) -> Iterator[Item | Container]:
    """Items of one decompressed source; a manifest comes out as a Container."""
    first = data.readline(JSONL_PROBE_LIMIT)
    if (
        first.endswith(b"\n")
        and _plain(first)
        and first.lstrip()[:1] == b"{"
        and _opens_jsonl(first.decode("utf-8", "surrogateescape").strip())
    ):
        yield from _items_of_jsonl_bytes(name, first, data)
        return
    # Anything else (a byte-order mark, one value over several lines, an array) as text.
    yield from items_of_text(name, _text_after(first, data))


def _items_of_jsonl_bytes(name: str, first: bytes, data: IO[bytes]) -> Iterator[Item]:
    """JSON Lines from their bytes, the first line read already; see the module's text."""
    number = 0
    line = first
    typed = TypedLines()
    while line:
        if not _plain(line):
            yield from _items_of_jsonl(name, _lines(_text_after(line, data)), number, typed)
            return
        number += 1
        stripped = line.strip()
        if stripped and (found := typed.record(stripped)) is not None:
            yield Item(name, number, *found)  # read and validated at once (kb.ingest.typed)
        elif stripped:
            try:
                value = loads_utf8(stripped)
            except REFUSED:
                item = _jsonl_item(name, number, line.decode("utf-8", "surrogateescape"))
                if item is not None:
                    yield item
            else:
                yield Item(name, number, value)
        line = data.readline(MAX_RECORD_CHARS + 1)


def is_container(obj: dict[str, Any]) -> bool:
    """A manifest (its `files`) or a compact index (its `errors`), not a record."""
    return "errors" in obj or "files" in obj


def _opens_jsonl(stripped: str) -> bool:
    """Whether a first line (stripped) is one whole object that is not a container: the
    input is JSON Lines."""
    try:
        obj = loads(stripped)
    except (ValueError, RecursionError):
        return False
    return isinstance(obj, dict) and not is_container(obj)


def items_of_text(name: str, text: IO[str]) -> Iterator[Item | Container]:
    """Items of one decompressed source read as text; a manifest comes out as a Container."""
    first = text.readline(JSONL_PROBE_LIMIT)
    stripped = first.strip().lstrip("\ufeff")
    if stripped and stripped[0] not in "[{":
        if "\udc80" <= stripped[0] <= "\udcff":  # a byte that is not UTF-8 (see text_of)
            raise InputError(f"{name}:1: not UTF-8 text (byte 0x{ord(stripped[0]) - 0xDC00:02X})")
        raise InputError(f"{name}:1: not JSON: the file starts with {stripped[:20]!r}")
    if stripped.startswith("{") and _opens_jsonl(stripped):
        yield from _items_of_jsonl(name, itertools.chain((first,), _lines(text)))
        return
    yield from _items_of_stream(name, _Chain(io.StringIO(first), text))


def _items_of_jsonl(
    name: str, lines: Iterable[str | None], before: int = 0, typed: TypedLines | None = None
) -> Iterator[Item]:
    """One JSON object a line, numbered after the `before` lines read already; a line that is
    not JSON, or longer than MAX_RECORD_CHARS (None), is a rejected record, not fatal."""
    typed = TypedLines() if typed is None else typed
    for number, line in enumerate(lines, start=before + 1):
        item = _jsonl_item(name, number, line, typed)
        if item is not None:
            yield item


def _jsonl_item(
    name: str, number: int, line: str | None, typed: TypedLines | None = None
) -> Item | None:
    """The item of one JSON Lines line read as text (None: a blank line, no item); `typed`
    tries the line as a full record first (kb.ingest.typed)."""
    if line is None or len(line) > MAX_RECORD_CHARS + 1:
        return Item(name, number, Unparsable(too_large().reason))
    stripped = line.strip()
    if not stripped:
        return None
    found = typed.record(stripped) if typed is not None else None
    if found is not None:
        return Item(name, number, *found)
    try:
        value = loads(stripped)
    except json.JSONDecodeError as exc:
        return Item(name, number, Unparsable(f"not valid JSON: {exc.msg} (column {exc.colno})"))
    except (ValueError, RecursionError) as exc:
        return Item(name, number, Unparsable(undecodable_reason(exc)))
    return Item(name, number, value)


def _lines(text: IO[str]) -> Iterator[str | None]:
    """The lines, each read up to MAX_RECORD_CHARS; None for a longer one, read past."""
    while line := text.readline(MAX_RECORD_CHARS + 1):
        if len(line) > MAX_RECORD_CHARS and not line.endswith("\n"):
            while (rest := text.readline(READ_CHUNK)) and not rest.endswith("\n"):
                pass
            yield None
        else:
            yield line


class _Chain(io.TextIOBase):
    """Read one text stream, then another."""

    def __init__(self, first: TextReader, second: TextReader) -> None:
        self._streams = [first, second]

    def read(self, size: int | None = -1, /) -> str:
        size = -1 if size is None else size
        while self._streams:
            chunk = self._streams[0].read(size)
            if chunk:
                return chunk
            self._streams.pop(0)
        return ""


def _items_of_stream(name: str, text: TextReader) -> Iterator[Item | Container]:
    for event in JsonStream(text, name).events():
        if isinstance(event, CompactRow):
            yield Item(name, event.index, event.value, event.dataset_version, compact=True)
        elif isinstance(event, ArrayElement):
            yield Item(name, event.index, event.value)
        elif event.streamed_rows:
            continue  # the rest of a compact index: its rows were yielded already
        elif isinstance(event.value, dict) and isinstance(event.value.get("files"), list | dict):
            yield Container(name, event.value)
        else:
            yield Item(name, event.line, event.value)
