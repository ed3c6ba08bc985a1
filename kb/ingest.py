"""Read datasets from files, folders, stdin and URLs, validate, and upsert them in batches.

Every format of DESIGN.md streams: records flow through generators, so memory stays flat in
the file's size. One import is one transaction; a bad record is reported and skipped.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import io
import json
import operator
import os
import sys
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any, Final, Protocol
from urllib.parse import urljoin

from sqlalchemy import JSON, Engine, bindparam, delete, func, insert, select, update
from sqlalchemy.engine import Connection
from sqlalchemy.exc import OperationalError, SQLAlchemyError

from kb.db import set_meta
from kb.errors import DatabaseError, InputError
from kb.models import FTS_COLUMNS, IMPORT_RUNS, RECORD_TAGS, RECORDS
from kb.patterns import never_warns
from kb.records import (
    COLUMNS,
    FieldError,
    Record,
    looks_compact,
    parse_compact,
    parse_record,
    record_id_of,
)

# SQLite's page cache during an import, flat in the file's size. 128 MB, not 64: a 1M import
# took 187 s instead of 196 s, its peak 235 MB instead of 169 MB.
IMPORT_CACHE_KIB: Final = 128 << 10
DEFAULT_BATCH_SIZE: Final = 1000  # rows a round trip: large enough to amortise, small in memory
READ_CHUNK: Final = 1 << 20  # bytes of text the streaming JSON reader asks for at a time
JSONL_PROBE_LIMIT: Final = 8 << 20  # a first line longer than this is not one JSONL record
HTTP_TIMEOUT_S: Final = 60
DATA_SUFFIXES: Final = (".json", ".jsonl", ".ndjson", ".txt")
GZIP_MAGIC: Final = b"\x1f\x8b"

# FTS5 while the importer fills it: a larger in-memory term table (fewer, larger level-0
# segments) and merges of 8 segments, not 4, so each entry is rewritten fewer times.
FTS_IMPORT_CONFIG: Final = {"hashsize": 16 << 20, "automerge": 8}
FTS_DEFAULT_CONFIG: Final = {"hashsize": 1 << 20, "automerge": 4}  # FTS5's own defaults

ID_FILTER_BITS: Final = 1 << 26  # an 8 MB bitmap of the ids an import into an empty table wrote

ProgressFn = Callable[[int], None]


class TextReader(Protocol):
    def read(self, size: int = -1, /) -> str: ...


@dataclass(frozen=True)
class Rejection:
    """A record that was not stored, and why: printed as FILE:LINE: id ID: FIELD: reason."""

    file: str
    line: int
    id: str | None
    field: str
    reason: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: id {self.id or '-'}: {self.field}: {self.reason}"

    def as_dict(self) -> dict[str, Any]:
        return {
            "file": self.file,
            "line": self.line,
            "id": self.id,
            "field": self.field,
            "reason": self.reason,
        }


@dataclass
class ImportReport:
    inserted: int = 0
    updated: int = 0
    unchanged: int = 0
    rejected: int = 0
    errors: list[Rejection] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    dataset_version: str | None = None
    import_id: int | None = None

    @property
    def stored(self) -> int:
        return self.inserted + self.updated + self.unchanged

    def as_dict(self) -> dict[str, Any]:
        return {
            "inserted": self.inserted,
            "updated": self.updated,
            "unchanged": self.unchanged,
            "rejected": self.rejected,
            "errors": [error.as_dict() for error in self.errors],
        }


@dataclass(frozen=True)
class Item:
    """One JSON value found in a source, with where it was found."""

    file: str
    line: int  # 1-based line for JSONL and single objects, the index for array elements
    value: Any
    dataset_version: str | None = None
    compact: bool = False  # a row of the compact index.json


# --------------------------------------------------------------------------- sources


class _CountingReader(io.RawIOBase):
    """Passes bytes through, hashing them and reporting how many went by."""

    def __init__(self, raw: IO[bytes], progress: ProgressFn | None = None) -> None:
        self._raw = raw
        self._progress = progress
        self.sha256 = hashlib.sha256()
        self.count = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        data = self._raw.read(len(buffer))
        n = len(data)
        buffer[:n] = data
        if n:
            self.sha256.update(data)
            self.count += n
            if self._progress is not None:
                self._progress(n)
        return n

    def close(self) -> None:
        try:
            self._raw.close()
        finally:
            super().close()


def _is_url(spec: str) -> bool:
    return spec.startswith(("http://", "https://"))


def _open_raw(spec: str) -> IO[bytes]:
    if spec == "-":
        return sys.stdin.buffer
    if _is_url(spec):
        from urllib.error import HTTPError, URLError
        from urllib.request import Request, urlopen

        try:
            response = urlopen(Request(spec, headers={"User-Agent": "kb"}), timeout=HTTP_TIMEOUT_S)
        except HTTPError as exc:
            raise InputError(f"{spec}: HTTP {exc.code} {exc.reason}") from exc
        except (URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise InputError(f"{spec}: cannot fetch: {reason}") from exc
        return response  # type: ignore[no-any-return]
    try:
        return open(spec, "rb")
    except FileNotFoundError:
        raise InputError(f"{spec}: no such file") from None
    except IsADirectoryError:
        raise InputError(f"{spec}: is a folder") from None
    except OSError as exc:
        raise InputError(f"{spec}: cannot read: {exc.strerror}") from exc


class _Source:
    """An opened input: raw bytes counted and hashed, decompressed when gzipped."""

    def __init__(self, spec: str, progress: ProgressFn | None = None) -> None:
        self.spec = spec
        self.name = "<stdin>" if spec == "-" else spec
        self.outer = _CountingReader(_open_raw(spec), progress)
        buffered = io.BufferedReader(self.outer, buffer_size=READ_CHUNK)
        self.gzipped = buffered.peek(2)[:2] == GZIP_MAGIC
        self.inner: _CountingReader | None = None
        data: IO[bytes] = buffered
        if self.gzipped:
            self.inner = _CountingReader(gzip.GzipFile(fileobj=buffered, mode="rb"))  # type: ignore[arg-type]
            data = io.BufferedReader(self.inner, buffer_size=READ_CHUNK)
        self.text = io.TextIOWrapper(data, encoding="utf-8", errors="strict", newline="")

    def drain(self) -> None:
        """Read to the end, so the checksums cover the whole file."""
        while self.text.read(READ_CHUNK):
            pass

    def close(self) -> None:
        if self.spec != "-":
            self.text.close()


# --------------------------------------------------------------------------- JSON streaming


class _JsonStream:
    """Incremental JSON values from text, without holding the whole file in memory."""

    def __init__(self, text: TextReader, name: str) -> None:
        self._text = text
        self._name = name
        self._buf = ""
        self._pos = 0
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
        self._buf = self._buf[self._pos :] + chunk
        self._pos = 0
        return True

    def peek(self) -> str | None:
        """The next non-whitespace character, or None at the end."""
        while True:
            buf, pos, n = self._buf, self._pos, len(self._buf)
            while pos < n and buf[pos] in " \t\r\n\ufeff":
                if buf[pos] == "\n":
                    self.line += 1
                pos += 1
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

    def value(self) -> Any:
        """Decode the next whole value, reading more text until it is complete."""
        self.peek()
        size = READ_CHUNK
        while True:
            try:
                value, end = self._decoder.raw_decode(self._buf, self._pos)
            except json.JSONDecodeError as exc:
                if self._fill(size):
                    size *= 2
                    continue
                raise self._error(exc.msg) from None
            at_end = end == len(self._buf) and not isinstance(value, dict | list | str)
            if at_end and self._fill(size):  # a number or literal may continue in the next chunk
                continue
            self.line += self._buf.count("\n", self._pos, end)
            self._pos = end
            return value

    def _error(self, message: str) -> InputError:
        return InputError(f"{self._name}:{self.line}: not valid JSON: {message}")

    def objects(self) -> Iterator[tuple[int, str | None, Any]]:
        """Top-level values as (line, key, value); an object's `errors` array is streamed.

        Yields (line, None, value) for a whole value, and (index, "errors", row) for each row
        of a compact index, followed by (line, "", object-without-errors) for the rest of it.
        """
        while (char := self.peek()) is not None:
            line = self.line
            if char == "[":
                self._pos += 1
                for index, element in enumerate(self._array_items()):
                    yield index, "[", element
                continue
            if char != "{":
                raise self._error(f"expected an object or array, found {char!r}")
            self._pos += 1
            obj: dict[str, Any] = {}
            streamed = False
            if self.peek() == "}":
                self._pos += 1
                yield line, None, obj
                continue
            while True:
                key = self.value()
                if not isinstance(key, str):
                    raise self._error("object keys must be strings")
                self.take(":")
                if key == "errors" and self.peek() == "[":
                    self._pos += 1
                    streamed = True
                    for index, row in enumerate(self._array_items()):
                        yield index, "errors", (obj.get("datasetVersion"), row)
                else:
                    obj[key] = self.value()
                separator = self.peek()
                self._pos += 1
                if separator == "}":
                    break
                if separator != ",":
                    raise self._error(f"expected ',' or '}}', found {separator!r}")
            yield line, ("" if streamed else None), obj

    def _array_items(self) -> Iterator[Any]:
        if self.peek() == "]":
            self._pos += 1
            return
        while True:
            yield self.value()
            separator = self.peek()
            self._pos += 1
            if separator == "]":
                return
            if separator != ",":
                raise self._error(f"expected ',' or ']', found {separator!r}")


def _read_first_line(text: IO[str]) -> str:
    return text.readline(JSONL_PROBE_LIMIT)


def _items_of_text(name: str, text: IO[str]) -> Iterator[Item | dict[str, Any]]:
    """Items of one decompressed source; a manifest object is yielded as a plain dict."""
    first = _read_first_line(text)
    stripped = first.strip().lstrip("\ufeff")
    if not stripped:
        # Blank first line: fall through to the streaming reader with what remains.
        rest = io.StringIO(first)
        yield from _items_of_stream(name, _Chain(rest, text))
        return
    if stripped[0] not in "[{":
        raise InputError(f"{name}:1: not JSON: the file starts with {stripped[:20]!r}")
    if stripped[0] == "{":
        try:
            obj = json.loads(stripped)
        except json.JSONDecodeError:
            obj = None
        if isinstance(obj, dict) and not _is_container_object(obj):
            yield from _items_of_jsonl(name, first, text)
            return
    yield from _items_of_stream(name, _Chain(io.StringIO(first), text))


def _is_container_object(obj: dict[str, Any]) -> bool:
    return "errors" in obj or "files" in obj


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


def _items_of_jsonl(name: str, first: str, text: IO[str]) -> Iterator[Item | dict[str, Any]]:
    """One JSON object a line; a line that is not JSON is a rejected record, not fatal."""
    lines = _chain_lines(first, text)
    for number, line in enumerate(lines, start=1):
        stripped = line.strip()
        if not stripped:
            continue
        try:
            value = json.loads(stripped)
        except json.JSONDecodeError as exc:
            yield Item(name, number, _Unparsable(f"not valid JSON: {exc.msg} (column {exc.colno})"))
            continue
        yield Item(name, number, value)


def _chain_lines(first: str, text: IO[str]) -> Iterator[str]:
    yield first
    yield from text


def _items_of_stream(name: str, text: TextReader) -> Iterator[Item | dict[str, Any]]:
    stream = _JsonStream(text, name)
    for where, key, value in stream.objects():
        if key == "errors":
            version, row = value
            yield Item(name, where, row, dataset_version=version, compact=True)
        elif key == "":
            continue  # the rest of a compact index: its rows were yielded already
        elif key == "[":
            yield Item(name, where, value)
        elif isinstance(value, dict) and isinstance(value.get("files"), list | dict):
            yield value  # a manifest
        else:
            yield Item(name, where, value)


@dataclass(frozen=True)
class _Unparsable:
    reason: str


# --------------------------------------------------------------------------- manifests


@dataclass(frozen=True)
class _ManifestEntry:
    path: str
    sha256: str | None
    raw_sha256: str | None


def _manifest_entries(manifest: dict[str, Any], name: str) -> list[_ManifestEntry]:
    files = manifest["files"]
    if isinstance(files, dict):
        files = [
            {"path": path, **(info if isinstance(info, dict) else {})}
            for path, info in files.items()
        ]
    entries = []
    for index, entry in enumerate(files):
        if not isinstance(entry, dict) or not isinstance(entry.get("path"), str):
            raise InputError(f"{name}: files[{index}]: each entry needs a 'path'")
        path = entry["path"]
        if path.startswith("/") or ".." in Path(path).parts:
            raise InputError(f"{name}: files[{index}]: path {path!r} leaves the manifest's folder")
        entries.append(_ManifestEntry(path, entry.get("sha256"), entry.get("rawSha256")))
    return entries


def _resolve(base: str, path: str) -> str:
    if _is_url(base):
        return urljoin(base, path)
    return str(Path(base).parent / path)


# --------------------------------------------------------------------------- walking inputs


def expand_inputs(specs: Iterable[str]) -> list[str]:
    """Files named, folders walked (a folder with a manifest.json imports by it), stdin, URLs."""
    out: list[str] = []
    for spec in specs:
        if spec == "-" or _is_url(spec):
            out.append(spec)
            continue
        path = Path(spec)
        if path.is_dir():
            manifest = path / "manifest.json"
            if manifest.is_file():
                out.append(str(manifest))
                continue
            found = sorted(
                str(p)
                for p in path.rglob("*")
                if p.is_file()
                and not any(part.startswith(".") for part in p.relative_to(path).parts)
                and p.name.removesuffix(".gz").endswith(DATA_SUFFIXES)
            )
            out.extend(found)
        elif path.is_file():
            out.append(spec)
        else:
            raise InputError(f"{spec}: no such file or folder")
    return out


def total_bytes(specs: Iterable[str]) -> int | None:
    """The bytes a progress bar will count, or None when a source has no known size."""
    total = 0
    for spec in specs:
        if spec == "-" or _is_url(spec):
            return None
        total += os.path.getsize(spec)
    return total


# --------------------------------------------------------------------------- the import


class _IdFilter:
    """The ids an import has written, as a bitmap of their hashes: never a false "no", and a
    false "yes" (about 1.5% at a million ids) costs only a database look-up. A set of a
    million id strings would take about 100 MB."""

    def __init__(self) -> None:
        self._bits = bytearray(ID_FILTER_BITS >> 3)

    def __contains__(self, record_id: str) -> bool:
        h = hash(record_id) & (ID_FILTER_BITS - 1)
        return bool(self._bits[h >> 3] & (1 << (h & 7)))

    def update(self, ids: Iterable[str]) -> None:
        bits = self._bits
        for record_id in ids:
            h = hash(record_id) & (ID_FILTER_BITS - 1)
            bits[h >> 3] |= 1 << (h & 7)


class Importer:
    """Upserts records by id inside one transaction, batch by batch."""

    def __init__(
        self,
        conn: Connection,
        report: ImportReport,
        batch_size: int = DEFAULT_BATCH_SIZE,
        check_pattern: Callable[[Record], str | None] | None = None,
    ) -> None:
        """check_pattern: the warning for a record's messagePattern (kb.patterns.prepare's);
        not called for patterns of the common shape, which prepare() never warns about."""
        self.conn = conn
        self.report = report
        self.batch_size = max(1, batch_size)
        self.check_pattern = check_pattern
        self._batch: dict[str, tuple[Record, str | None, Item]] = {}
        self._next_key: int | None = None  # SQLite: the key the next new record gets
        self._began = False  # whether the first batch has looked at the table
        self._written: _IdFilter | None = None  # when the import began with no records

    def add(self, item: Item) -> None:
        report = self.report
        value = item.value
        if isinstance(value, _Unparsable):
            self._reject(item, None, "record", value.reason)
            return
        version = item.dataset_version
        if isinstance(value, dict) and "record" in value and isinstance(value["record"], dict):
            version = (
                value.get("datasetVersion")
                if isinstance(value.get("datasetVersion"), str)
                else version
            )
            value = value["record"]
        if isinstance(value, dict) and _is_repository_entry(value):
            return  # repos.json describes repositories, not errors
        try:
            if item.compact or (isinstance(value, dict) and looks_compact(value)):
                record = parse_compact(value)
            else:
                record = parse_record(value)
        except FieldError as exc:
            self._reject(item, record_id_of(value), exc.field, exc.reason)
            return
        if version:
            report.dataset_version = version
        if self.check_pattern is not None and not never_warns(
            record.values["message_pattern"] or ""
        ):
            # The common shape never warns; only the rest pays for a full prepare() here.
            warning = self.check_pattern(record)
            if warning:
                report.warnings.append(f"{item.file}:{item.line}: id {record.id}: {warning}")
        previous = self._batch.get(record.id)
        if previous is not None:
            self._flush()
        self._batch[record.id] = (record, version, item)
        if len(self._batch) >= self.batch_size:
            self._flush()

    def _reject(self, item: Item, record_id: str | None, field_name: str, reason: str) -> None:
        self.report.rejected += 1
        self.report.errors.append(Rejection(item.file, item.line, record_id, field_name, reason))

    def finish(self) -> None:
        self._flush()
        if self.conn.dialect.name == "sqlite" and (self.report.inserted or self.report.updated):
            # One pass over every row this import wrote, in key order: several times cheaper
            # than indexing batch by batch (FTS5 merges fewer, larger segments).
            _fts_config(self.conn, FTS_IMPORT_CONFIG)
            self.conn.exec_driver_sql(
                f"INSERT INTO records_fts(rowid, {_FTS_COLUMNS}) "
                f"SELECT key, {_FTS_COLUMNS} FROM records WHERE import_id = ? ORDER BY key",
                (self.report.import_id,),
            )
            _fts_config(self.conn, FTS_DEFAULT_CONFIG)

    def _flush(self) -> None:
        if not self._batch:
            return
        batch, self._batch = self._batch, {}
        table = RECORDS
        sqlite = self.conn.dialect.name == "sqlite"
        if not self._began:
            self._began = True
            top = self.conn.execute(select(func.max(table.c.key))).scalar()
            if top is None:
                self._written = _IdFilter()
            if sqlite:
                # Keys are given here, as SQLite would (the largest plus one), so the tag rows
                # can name them without reading them back.
                self._next_key = int(top or 0) + 1
        ids = list(batch)
        if self._written is not None:
            # The table was empty when this import began: only ids it wrote can be there.
            ids = [record_id for record_id in ids if record_id in self._written]
            self._written.update(batch)
        existing = self._existing(ids) if ids else {}
        inserts: list[dict[str, Any]] = []
        updates: list[dict[str, Any]] = []
        for record_id, (record, version, _item) in batch.items():
            digest = record.content_hash()
            old = existing.get(record_id)
            if old is None:
                row = self._row(record, version, digest)
                if self._next_key is not None:
                    row["key"] = self._next_key
                    self._next_key += 1
                inserts.append(row)
                self.report.inserted += 1
            elif old[0] == digest or (record.stub and not old[1]):
                self.report.unchanged += 1  # a stub never replaces a full record
            else:
                row = self._row(record, version, digest)
                row["b_id"] = row.pop("id")
                updates.append(row)
                self.report.updated += 1
        if sqlite and updates:
            # Rows written earlier in this import have no full-text entry yet (finish() adds
            # them all at once); only older rows have text to take out.
            indexed = [
                row["b_id"] for row in updates if existing[row["b_id"]][2] != self.report.import_id
            ]
            if indexed:
                _fts_update(self.conn, indexed, "delete")
        if inserts:
            _bulk_insert(self.conn, inserts)
        tags = RECORD_TAGS
        # The tags of what was written (not of unchanged records), from the rows themselves.
        tagged: list[tuple[int, list[str]]] = []
        if inserts and sqlite:
            tagged = [(row["key"], row["tags"]) for row in inserts]
        elif inserts:
            keys = dict(
                self.conn.execute(
                    select(table.c.id, table.c.key).where(
                        table.c.id.in_([row["id"] for row in inserts])
                    )
                ).tuples()
            )
            tagged = [(keys[row["id"]], row["tags"]) for row in inserts]
        if updates:
            columns = [c for c in updates[0] if c != "b_id"]
            statement = (
                update(table)
                .where(table.c.id == bindparam("b_id"))
                .values({c: bindparam(c) for c in columns})
            )
            self.conn.execute(statement, updates)
            updated = [(existing[row["b_id"]][3], row["tags"]) for row in updates]
            self.conn.execute(
                delete(tags).where(tags.c.record_key.in_([key for key, _tags in updated]))
            )
            tagged += updated
        tag_rows = [(key, tag) for key, values in tagged for tag in dict.fromkeys(values or [])]
        if tag_rows and sqlite:
            self.conn.exec_driver_sql(
                f"INSERT INTO {tags.name} (record_key, tag) VALUES (?, ?)", tag_rows
            )
        elif tag_rows:
            self.conn.execute(
                insert(tags), [{"record_key": key, "tag": tag} for key, tag in tag_rows]
            )

    def _existing(self, ids: list[str]) -> dict[str, tuple[str, bool, int | None, int]]:
        """What the upsert needs of the stored records among ids: hash, stub, import, key."""
        table = RECORDS
        query = select(
            table.c.id, table.c.content_hash, table.c.stub, table.c.import_id, table.c.key
        ).where(table.c.id.in_(ids))
        return {
            row.id: (row.content_hash, row.stub, row.import_id, row.key)
            for row in self.conn.execute(query)
        }

    def _row(self, record: Record, version: str | None, digest: str) -> dict[str, Any]:
        values = record.values
        row = (
            dict(values)
            if values.keys() == _COLUMN_SET
            else {column: values.get(column) for column in COLUMNS}
        )
        row["extra"] = record.extra
        row["stub"] = record.stub
        row["dataset_version"] = version
        row["content_hash"] = digest
        row["import_id"] = self.report.import_id
        return row


_COLUMN_SET: Final = frozenset(COLUMNS)
_JSON_COLUMNS: Final = frozenset(
    column.name for column in RECORDS.columns if isinstance(column.type, JSON)
)


def _bulk_insert(conn: Connection, rows: list[dict[str, Any]]) -> None:
    """Insert record rows. On SQLite, straight to the driver: SQLAlchemy's per-row bind
    processing was a third of the import's time, and these values are plain already."""
    table = RECORDS
    if conn.dialect.name != "sqlite":
        conn.execute(insert(table), rows)
        return
    names = list(rows[0])
    values_of = operator.itemgetter(*names)
    encoded = [i for i, name in enumerate(names) if name in _JSON_COLUMNS]
    params = []
    for row in rows:
        values = list(values_of(row))
        for i in encoded:
            values[i] = _to_json(values[i])
        params.append(tuple(values))
    sql = f"INSERT INTO {table.name} ({', '.join(names)}) VALUES ({', '.join('?' * len(names))})"
    conn.exec_driver_sql(sql, params)


_encode_string: Final = json.encoder.encode_basestring_ascii


def _to_json(value: Any) -> str:
    """json.dumps(value), character for character; a list of strings (the list columns) is
    joined directly, at a third of the cost of the general encoder."""
    if type(value) is list:
        try:
            return "[" + ", ".join(map(_encode_string, value)) + "]"
        except TypeError:  # an item that is not a string
            return json.dumps(value)
    if type(value) is dict and not value:
        return "{}"
    return json.dumps(value)


_FTS_COLUMNS: Final = ", ".join(FTS_COLUMNS)


def _fts_update(conn: Connection, ids: list[str], action: str) -> None:
    """Add the records' current text to the full-text index, or ("delete") take it out.

    An external-content FTS5 table must be told the old text to forget it, so deletes run
    before the rows change and inserts after."""
    for start in range(0, len(ids), 500):
        chunk = ids[start : start + 500]
        marks = ", ".join("?" * len(chunk))
        if action == "delete":
            sql = (
                f"INSERT INTO records_fts(records_fts, rowid, {_FTS_COLUMNS}) "
                f"SELECT 'delete', key, {_FTS_COLUMNS} FROM records WHERE id IN ({marks})"
            )
        else:
            sql = (
                f"INSERT INTO records_fts(rowid, {_FTS_COLUMNS}) "
                f"SELECT key, {_FTS_COLUMNS} FROM records WHERE id IN ({marks})"
            )
        conn.exec_driver_sql(sql, tuple(chunk))


def _fts_config(conn: Connection, settings: dict[str, int]) -> None:
    for name, value in settings.items():
        with contextlib.suppress(OperationalError):  # an older SQLite: slower, not wrong
            conn.exec_driver_sql(
                "INSERT INTO records_fts(records_fts, rank) VALUES (?, ?)", (name, value)
            )


def _is_repository_entry(value: dict[str, Any]) -> bool:
    return "errorCount" in value and "errorMessage" not in value and "msg" not in value


def import_sources(
    engine: Engine,
    specs: Iterable[str],
    *,
    batch_size: int = DEFAULT_BATCH_SIZE,
    progress: ProgressFn | None = None,
    check_pattern: Callable[[Record], str | None] | None = None,
) -> ImportReport:
    """Import every source in one transaction and say what happened.

    Raises InputError (nothing stored) when a source cannot be read at all or fails its
    manifest checksum; a bad record is only counted and reported.
    """
    inputs = expand_inputs(specs)
    report = ImportReport(files=list(inputs))
    started = datetime.now(UTC)
    try:
        with engine.begin() as conn:
            runs = IMPORT_RUNS
            run_key = conn.execute(
                insert(runs).values(
                    started_at=started,
                    sources=inputs,
                    inserted=0,
                    updated=0,
                    unchanged=0,
                    rejected=0,
                )
            ).inserted_primary_key
            report.import_id = int(run_key[0]) if run_key else None
            cache_size = None
            if conn.dialect.name == "sqlite":
                # The records' six indexes take keys in random order; with SQLite's default 2 MB
                # page cache a large import rereads index pages from disk on every batch.
                cache_size = conn.exec_driver_sql("PRAGMA cache_size").scalar()
                conn.exec_driver_sql(f"PRAGMA cache_size = -{IMPORT_CACHE_KIB}")
            importer = Importer(conn, report, batch_size, check_pattern)
            for spec in inputs:
                _import_one(importer, spec, progress, expected=None, depth=0)
            importer.finish()
            conn.execute(
                update(runs)
                .where(runs.c.id == report.import_id)
                .values(
                    finished_at=datetime.now(UTC),
                    dataset_version=report.dataset_version,
                    inserted=report.inserted,
                    updated=report.updated,
                    unchanged=report.unchanged,
                    rejected=report.rejected,
                )
            )
            if report.inserted or report.updated:
                set_meta(conn, "revision", uuid.uuid4().hex)
            if cache_size is not None:
                conn.exec_driver_sql(f"PRAGMA cache_size = {int(cache_size)}")
    except OperationalError as exc:
        raise DatabaseError(f"import failed, nothing was stored: {exc.orig}") from exc
    except SQLAlchemyError as exc:
        raise DatabaseError(f"import failed, nothing was stored: {exc}") from exc
    return report


def _import_one(
    importer: Importer,
    spec: str,
    progress: ProgressFn | None,
    expected: _ManifestEntry | None,
    depth: int,
) -> None:
    source = _Source(spec, progress)
    manifests: list[dict[str, Any]] = []
    try:
        try:
            for item in _items_of_text(source.name, source.text):
                if isinstance(item, dict):
                    manifests.append(item)
                else:
                    importer.add(item)
            if expected is not None:
                source.drain()
        except UnicodeDecodeError as exc:
            raise InputError(f"{source.name}: not UTF-8 text ({exc.reason})") from exc
        except (OSError, EOFError) as exc:
            if isinstance(exc, InputError):
                raise
            raise InputError(f"{source.name}: cannot read: {exc}") from exc
        if expected is not None:
            _verify(source, expected)
    finally:
        source.close()
    for manifest in manifests:
        if depth > 0:
            raise InputError(f"{source.name}: a manifest cannot list another manifest")
        for entry in _manifest_entries(manifest, source.name):
            _import_one(importer, _resolve(spec, entry.path), progress, entry, depth + 1)


def _verify(source: _Source, entry: _ManifestEntry) -> None:
    checks = [(entry.sha256, source.outer)]
    if entry.raw_sha256 and source.inner is not None:
        checks.append((entry.raw_sha256, source.inner))
    elif entry.raw_sha256 and not entry.sha256:
        checks = [(entry.raw_sha256, source.outer)]
    for wanted, reader in checks:
        if not wanted:
            continue
        actual = reader.sha256.hexdigest()
        if actual != wanted.lower():
            raise InputError(
                f"{source.name}: sha256 mismatch: the manifest says {wanted}, "
                f"the file has {actual}; nothing was imported",
                hint="Download the file again, or fix the manifest.",
            )
