"""The matcher's cache file: its format, opening it for a revision, and reading its rows.

One SQLite file, `<cache_dir>/matcher.sqlite3`, written by kb.matcher.build to a temp file and
renamed over the old one:
  meta      format, revision, counts, the key-id ranges per kind, known packages
  shards    the serialised Hyperscan literal databases (kb.matcher.prefilter), every key
  lookup    the anchors' bitmap, and one more database (the rest shard) of the keys a short
            text cannot find by their anchor
  keys      Hyperscan id -> key text, the patterns whose best key it is, its anchor
            (kb.matcher.anchors)
  patterns  the prepared regex, engine, generic, literal_chars, key_line, newlines, placeholder
            names, records, relaxed form (guarded only), the other required literal pieces
  records   id, class, filePath, lineNumber, message and raising function of each record
  files     filePath -> (lineNumber, record); codes: code -> record; functions: name -> record
  fuzzy     one row: every message template for near misses (kb.matcher.templates: the text
            sorted by length, read a stretch at a time when a log needs it); fuzzy_ints their
            lists (place and byte end in length order, length and pattern by place)
  words     each word of the templates -> the templates holding it (the near misses' bm25
            shortlist; rows of common words keep their count only)
A cold match of a big log reads meta and the shards (13 MB at 150k records, 78 MB at 1M); of a
short text, the lookup row (0.5 MB of bitmap and 3.8 MB of rest shard at 1M) and the keys its
windows look up; then only the rows its candidates need, through a CacheReader, which keeps
what it read.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import re
import sqlite3
from collections.abc import Callable, Generator, Iterable, Sequence
from pathlib import Path
from typing import Any, Concatenate, Final, NamedTuple, ParamSpec, TypeVar

from kb.config import sqlite_reader_uri
from kb.errors import DatabaseError
from kb.logline import Frame
from kb.matcher.cachefile import CACHE_FILE, FORMAT_VERSION, shard_blobs
from kb.matcher.templates import (
    ROW_ITEMS,
    TEMPLATE_SEPARATOR,
    LazyInts,
    TemplateStore,
    ints_of,
)
from kb.sql import select_in

SCHEMA: Final = """
    CREATE TABLE meta (k TEXT PRIMARY KEY, v BLOB);
    CREATE TABLE shards (n INTEGER PRIMARY KEY, hsdb BLOB);
    CREATE TABLE keys (
        idx INTEGER PRIMARY KEY, key TEXT, patterns TEXT, anchor BLOB);
    CREATE TABLE lookup (bits BLOB, rest BLOB);
    CREATE TABLE patterns (
        idx INTEGER PRIMARY KEY, regex TEXT, engine TEXT, generic INTEGER,
        literal_chars INTEGER, key_line INTEGER, newlines INTEGER, names TEXT,
        records TEXT, relaxed TEXT, nested INTEGER, others TEXT);
    CREATE TABLE records (
        idx INTEGER PRIMARY KEY, id TEXT, error_class TEXT, file_path TEXT,
        line_number INTEGER, error_message TEXT, function TEXT);
    CREATE TABLE files (file_path TEXT, line_number INTEGER, rec INTEGER);
    CREATE TABLE codes (code TEXT, rec INTEGER);
    CREATE TABLE functions (name TEXT, rec INTEGER);
    CREATE TABLE fuzzy (templates BLOB, count INTEGER, chars INTEGER);
    CREATE TABLE fuzzy_ints (
        list TEXT, part INTEGER, items BLOB, PRIMARY KEY (list, part)) WITHOUT ROWID;
    CREATE TABLE words (w TEXT PRIMARY KEY, df INTEGER, rows TEXT) WITHOUT ROWID;
"""
# Covering indexes, made once the rows are in: a frame's file can have thousands of records
# (1M-record corpus), and a cold match then reads them from the index alone.
INDEXES: Final = """
    CREATE INDEX files_path ON files (file_path, line_number, rec);
    CREATE INDEX codes_code ON codes (code, rec);
    CREATE INDEX functions_name ON functions (name, rec);
    CREATE INDEX keys_anchor ON keys (anchor) WHERE anchor IS NOT NULL;
"""
# The kinds of key, in the order their ids are given: patterns' literal keys, the error codes
# the records know, then MARKERS, literal text that shows a line is a frame or an error.
PATTERN, CODE, FRAME, ERROR = "pattern", "code", "frame", "error"
MARKERS: Final[tuple[tuple[str, str], ...]] = (
    ('File "', FRAME),
    ("File ", FRAME),
    ("    at ", FRAME),
    ("\tat ", FRAME),
    (".go:", FRAME),
    (".rs:", FRAME),
    (".rb:", FRAME),
    (".php(", FRAME),
    (".cs:line", FRAME),
    ("Error", ERROR),
    ("Exception", ERROR),
    ("ERROR", ERROR),
    ("CRITICAL", ERROR),
    ("FATAL", ERROR),
    ("Fatal", ERROR),
    ("panic", ERROR),
    ("Failure", ERROR),
    ("('", ERROR),  # an exception's repr in a line: "raised NotAlgebraic('...')"
    ('("', ERROR),
    ("│ ", FRAME),
)
# Near-miss templates (and the log lines compared with them) shorter than this say too little:
# the build stores none, a match looks none up.
TEMPLATE_MIN_CHARS: Final = 16
# Path tails tried against the records' filePaths (a deep path has many).
MAX_PATH_PARTS: Final = 40
# Values in a message: quoted, bracketed, numbers (a number's sentence-ending period stays).
_VALUE_RE: Final = re.compile(
    r"'[^']*'|\"[^\"]*\"|\[[^\]]*\]|\([^)]*\)|\{[^}]*\}|<[^>]*>|\b\d(?:[\w.]*\w)?"
)
_SPACES_RE: Final = re.compile(r"\s+")
# Words as the near-miss shortlist compares them: letters and digits, `snake_case` and dotted
# names taken apart (as a full-text tokenizer does).
_WORD_RE: Final = re.compile(r"[a-z][a-z0-9]+")


def normalize_template(text: str) -> str:
    """A message reduced to its words, as the fuzzy table stores templates and as a log line is
    compared with them: values out, spaces collapsed, lower case."""
    return _SPACES_RE.sub(" ", _VALUE_RE.sub(" ", text)).strip().lower()


def words_of(text: str) -> list[str]:
    """The words of a template or a log line for the shortlist: lower case, two letters or
    more, a plural's "s" dropped ("contains" and "contain" are one word)."""
    out = []
    for word in _WORD_RE.findall(text.lower()):
        if len(word) > 3 and word[-1] == "s" and word[-2] != "s":
            word = word[:-1]
        out.append(word)
    return out


class CacheDamaged(DatabaseError):
    """The cache turned out damaged while it was read (its header, read on opening, was
    fine): the file has been removed, so the next look for it builds it again."""


def open_current(
    cache_dir: Path, revision: str, *keys: str
) -> tuple[sqlite3.Connection, dict[str, Any]] | None:
    """A read-only connection to the cache and its meta values `keys`, if the cache was
    written for `revision` by this format; else None."""
    path = Path(cache_dir) / CACHE_FILE
    if not path.is_file():
        return None
    wanted = ("format", "revision", *keys)
    try:
        con = _connected(path)
    except sqlite3.Error:
        return None
    try:
        marks = ",".join("?" * len(wanted))
        rows = dict(con.execute(f"SELECT k, v FROM meta WHERE k IN ({marks})", wanted))
    except sqlite3.Error:  # not a cache of ours (a corrupt or foreign file)
        con.close()
        return None
    if rows.get("format") != str(FORMAT_VERSION) or rows.get("revision") != revision:
        con.close()
        return None
    return con, rows


def _connected(path: Path) -> sqlite3.Connection:
    """A read-only connection to a cache file, immutable (kb.matcher.cachefile's note)."""
    return sqlite3.connect(
        sqlite_reader_uri(path, immutable=True), uri=True, check_same_thread=False
    )


def cache_is_current(cache_dir: Path, revision: str) -> bool:
    """Whether the cache in `cache_dir` was written for `revision` by this format."""
    opened = open_current(cache_dir, revision)
    if opened is None:
        return False
    opened[0].close()
    return True


class Pattern(NamedTuple):  # a NamedTuple: see kb.matcher.scoring.ScoringConfig
    """One prepared pattern, shared by every record whose messagePattern it is."""

    idx: int
    regex: str
    engine: str  # "re2", or "guarded": RE2 runs `relaxed`, a superset (lookarounds dropped)
    generic: bool  # too little literal text to tell an error by
    literal_chars: int
    key_line: int  # the line of a multi-line pattern that holds its best key
    newlines: int  # lines the pattern spans, after the first
    names: tuple[str | None, ...]  # placeholder names, one per capture group
    records: tuple[int, ...]
    relaxed: str | None
    nested: bool  # nested quantifiers: never run by the backtracking engine
    others: tuple[str, ...]  # the other required literal pieces (keys after the best)


class Record(NamedTuple):  # a NamedTuple: see kb.matcher.scoring.ScoringConfig
    """What the matcher knows of one record."""

    idx: int
    id: str
    error_class: str | None
    file_path: str
    line_number: int | None  # None: unknown, a frame anywhere in the file counts
    error_message: str
    function: str | None = None  # the raising function's name, when the record says it

    @property
    def package(self) -> str:
        return package_of_file(self.file_path)


def package_of_file(file_path: str) -> str:
    """The top-level folder of a record's filePath: its package ("" when none)."""
    return file_path.split("/", 1)[0] if "/" in file_path else ""


_PATTERN_COLUMNS: Final = (
    "idx, regex, engine, generic, literal_chars, key_line, newlines, names, records, relaxed,"
    " nested, others"
)
_RECORD_COLUMNS: Final = "idx, id, error_class, file_path, line_number, error_message, function"
# What reading a damaged cache raises: SQLite's "malformed", "not a database" or a text that
# is not UTF-8, and a JSON column that is not JSON (or NULL) any more.
DAMAGE: Final = (sqlite3.DatabaseError, ValueError, TypeError)

_P = ParamSpec("_P")
_T = TypeVar("_T")


def _reads(
    method: Callable[Concatenate[CacheReader, _P], _T],
) -> Callable[Concatenate[CacheReader, _P], _T]:
    """A CacheReader method whose failure to read the file means the file is damaged."""

    @functools.wraps(method)
    def reading(self: CacheReader, /, *args: _P.args, **kwargs: _P.kwargs) -> _T:
        try:
            return method(self, *args, **kwargs)
        except DAMAGE as exc:
            raise self.damaged(exc) from exc

    return reading


def file_identity(path: Path) -> tuple[int, int] | None:
    """(device, inode) of a file, to remove it later only if it is still the same file."""
    try:
        found = os.stat(path)
    except OSError:
        return None
    return found.st_dev, found.st_ino


class CacheReader:
    """The rows of one open cache, each read when first asked for and then kept."""

    def __init__(
        self,
        con: sqlite3.Connection,
        kinds: list[list[Any]],
        *,
        path: Path | None = None,
        identity: tuple[int, int] | None = None,
    ) -> None:
        self._con = con
        self._path = path  # the file, removed if it turns out damaged
        self._identity = identity
        self._fuzzy_row = 0  # the fuzzy row, once fuzzy_templates has found it
        self._blob: sqlite3.Blob | None = None  # its text, open once read (_templates_blob)
        self._kind_starts = [int(k[0]) for k in kinds]
        self._kind_names = [str(k[1]) for k in kinds]
        # Pattern keys come first: ids below this need no kind lookup.
        if not kinds or self._kind_names[0] != PATTERN:
            self.pattern_keys_end = 0
        else:
            self.pattern_keys_end = self._kind_starts[1] if len(kinds) > 1 else 1 << 62
        self._key_patterns: dict[int, list[int]] = {}
        self._key_text: dict[int, str] = {}
        self._patterns: dict[int, Pattern] = {}
        self._records: dict[int, Record] = {}
        self._known_files: dict[str, str | None] = {}
        self._files: dict[str, tuple[str, list[tuple[int | None, int]]] | None] = {}
        self._functions: dict[str, list[int]] = {}
        self._file_functions: dict[str, frozenset[str]] = {}
        self._packages: frozenset[str] | None = None

    def close(self) -> None:
        if self._blob is not None:
            self._blob.close()
            self._blob = None
        self._con.close()

    def reopened(self) -> bool:
        """Read through a connection of its own to the same file from now on (a forked
        process: SQLite may seek the file descriptor it would share with its parent); False,
        and nothing changed, when the file is gone or another has taken its name since."""
        if self._path is None or self._identity is None:
            return False
        try:
            con = _connected(self._path)
            con.execute("SELECT 1 FROM meta LIMIT 1").fetchall()
        except sqlite3.Error:
            return False
        # Opened first, then checked: a cache is only ever replaced by a new file, so the same
        # identity now means the connection has the file this reader opened.
        if file_identity(self._path) != self._identity:
            con.close()
            return False
        self._con = con  # the one this process was given is its parent's to close
        self._blob = None
        return True

    def damaged(self, exc: BaseException) -> CacheDamaged:
        """The error for a damaged file, which is removed first (unless another process has
        put a new cache in its place since it was opened)."""
        if self._path is not None and file_identity(self._path) == self._identity:
            with contextlib.suppress(OSError):
                self._path.unlink()
        return CacheDamaged(
            f"the matcher cache {self._path or ''} is damaged ({exc}); it was removed",
            hint="Run the command again: the matcher index is rebuilt.",
        )

    @property
    def identity(self) -> tuple[int, int] | None:
        """(device, inode) of the cache file when it was opened (None: not known)."""
        return self._identity

    def shards(self, start: int = 0, stop: int | None = None) -> Generator[bytes, None, None]:
        """The serialised Hyperscan databases, in key-id order (kb.matcher.cachefile): those
        from `start` up to `stop`."""
        return shard_blobs(self._con, start, stop)

    @_reads
    def lookup(self) -> tuple[bytes, bytes | None]:
        """The anchors' bitmap and the rest shard (None: every key has an anchor)."""
        bits, rest = self._con.execute("SELECT bits, rest FROM lookup").fetchone()
        return bytes(bits), None if rest is None else bytes(rest)

    @_reads
    def anchored_keys(self, anchors: Iterable[bytes]) -> list[tuple[int, str]]:
        """(key id, key) of every key whose anchor is one of `anchors`."""
        return [
            (int(idx), str(key))
            for idx, key in select_in(
                self._con.execute,
                "SELECT idx, key FROM keys WHERE anchor IN ({marks}) AND anchor IS NOT NULL",
                anchors,
            )
        ]

    def kind(self, key_id: int) -> str:
        kind = self._kind_names[0]
        for start, name in zip(self._kind_starts, self._kind_names, strict=True):
            if key_id >= start:
                kind = name
            else:
                break
        return kind

    @_reads
    def prefetch_keys(self, key_ids: Iterable[int]) -> None:
        """Read the patterns of many hit keys in a few queries, not one each."""
        missing = sorted(set(key_ids) - self._key_patterns.keys())
        for idx, key, patterns in select_in(
            self._con.execute, "SELECT idx, key, patterns FROM keys WHERE idx IN ({marks})", missing
        ):
            self._key_text[idx] = key
            self._key_patterns[idx] = json.loads(patterns)

    @_reads
    def key_patterns(self, key_id: int) -> list[int]:
        """The patterns whose best key this is."""
        if key_id not in self._key_patterns:
            row = self._con.execute(
                "SELECT key, patterns FROM keys WHERE idx = ?", (key_id,)
            ).fetchone()
            self._key_text[key_id] = row[0] if row else ""
            self._key_patterns[key_id] = json.loads(row[1]) if row else []
        return self._key_patterns[key_id]

    def key_text(self, key_id: int) -> str:
        if key_id not in self._key_text:
            self.key_patterns(key_id)
        return self._key_text[key_id]

    @_reads
    def load_patterns(self, idxs: Iterable[int]) -> None:
        missing = [i for i in set(idxs) if i not in self._patterns]
        for row in select_in(
            self._con.execute,
            f"SELECT {_PATTERN_COLUMNS} FROM patterns WHERE idx IN ({{marks}})",
            missing,
        ):
            self._patterns[row[0]] = Pattern(
                idx=row[0],
                regex=row[1],
                engine=row[2],
                generic=bool(row[3]),
                literal_chars=row[4],
                key_line=row[5],
                newlines=row[6],
                names=tuple(json.loads(row[7])),
                records=tuple(json.loads(row[8])),
                relaxed=row[9],
                nested=bool(row[10]),
                others=tuple(json.loads(row[11])),
            )

    def pattern(self, idx: int) -> Pattern:
        if idx not in self._patterns:
            self.load_patterns([idx])
        return self._patterns[idx]

    @_reads
    def load_records(self, idxs: Iterable[int]) -> None:
        missing = [i for i in set(idxs) if i not in self._records]
        for row in select_in(
            self._con.execute,
            f"SELECT {_RECORD_COLUMNS} FROM records WHERE idx IN ({{marks}})",
            missing,
        ):
            self._records[row[0]] = Record(*row)

    def record(self, idx: int) -> Record:
        if idx not in self._records:
            self.load_records([idx])
        return self._records[idx]

    @_reads
    def known_file(self, frame: Frame) -> str | None:
        """The longest filePath of a record that the frame's path ends with, or None. Asked
        path by path, longest first: asking for them all at once read every record of each
        (a million records: 2,867 of one file, 33,000 in all for big.log's frames, 39 ms)."""
        if frame.path not in self._known_files:
            self._known_files[frame.path] = next(
                (
                    suffix
                    for suffix in list(frame.path_suffixes())[:MAX_PATH_PARTS]
                    if self._con.execute(
                        "SELECT 1 FROM files WHERE file_path = ? LIMIT 1", (suffix,)
                    ).fetchone()
                ),
                None,
            )
        return self._known_files[frame.path]

    @_reads
    def file_records(self, frame: Frame) -> tuple[str, list[tuple[int | None, int]]] | None:
        """(filePath, [(lineNumber, record)]) for the longest known path that the frame's path
        ends with, or None."""
        if frame.path not in self._files:
            path = self.known_file(frame)
            self._files[frame.path] = (
                None
                if path is None
                else (
                    path,
                    self._con.execute(
                        "SELECT line_number, rec FROM files WHERE file_path = ? "
                        "ORDER BY line_number, rec",
                        (path,),
                    ).fetchall(),
                )
            )
        return self._files[frame.path]

    @_reads
    def records_near(
        self, frame: Frame, lines: int
    ) -> tuple[str, list[tuple[int | None, int]]] | None:
        """file_records' records raised at most `lines` from the frame's line (those with a
        line number), read alone: a raise site needs these few of a file's thousands."""
        path = self.known_file(frame)
        if path is None:
            return None
        return path, self._con.execute(
            "SELECT line_number, rec FROM files WHERE file_path = ? "
            "AND line_number BETWEEN ? AND ? ORDER BY line_number, rec",
            (path, frame.line - lines, frame.line + lines),
        ).fetchall()

    @_reads
    def file_functions(self, frame: Frame) -> frozenset[str]:
        """The functions the records of the frame's file are raised in."""
        if frame.path not in self._file_functions:
            found = self.file_records(frame)
            entries = found[1] if found is not None else []
            self.load_records(rec for _line, rec in entries)
            names = (self.record(rec).function for _line, rec in entries)
            self._file_functions[frame.path] = frozenset(name for name in names if name)
        return self._file_functions[frame.path]

    @_reads
    def function_records(self, name: str) -> list[int]:
        """The records raised in a function of this name, in any file."""
        if name not in self._functions:
            self._functions[name] = [
                r for (r,) in self._con.execute("SELECT rec FROM functions WHERE name = ?", (name,))
            ]
        return self._functions[name]

    @_reads
    def code_records(self, code: str) -> list[int]:
        return [r for (r,) in self._con.execute("SELECT rec FROM codes WHERE code = ?", (code,))]

    @_reads
    def known_packages(self) -> frozenset[str]:
        """The top-level folders of every record's filePath: the packages kb knows."""
        if self._packages is None:
            row = self._con.execute("SELECT v FROM meta WHERE k = 'packages'").fetchone()
            self._packages = frozenset(json.loads(row[0]) if row else [])
        return self._packages

    @_reads
    def fuzzy_templates(self) -> TemplateStore:
        """The message templates for near misses (kb.matcher.templates): their lengths read
        now, their places in length order, patterns and text as the store asks for them."""
        row = self._con.execute("SELECT rowid, count, chars FROM fuzzy").fetchone()
        if row is None:
            return TemplateStore(
                patterns=[], lengths=[], by_length=[], ends=[], chars=0, read=self._texts
            )
        self._fuzzy_row, count, chars = row
        ends = LazyInts(count, functools.partial(self._items, "ends", None))
        if count and ends[-1] != len(self._templates_blob()):
            raise ValueError("the fuzzy row's templates and their ends disagree")
        return TemplateStore(
            patterns=LazyInts(count, functools.partial(self._items, "patterns", None)),
            lengths=self._items("lengths", None, 0, count),
            by_length=LazyInts(count, functools.partial(self._items, "by_length", count)),
            ends=ends,
            chars=chars,
            read=self._texts,
        )

    @_reads
    def _items(self, name: str, below: int | None, start: int, stop: int) -> Sequence[int]:
        """Items [start, stop) of one of the near-miss lists of ints (each under `below`)."""
        first, last = start // ROW_ITEMS, (stop - 1) // ROW_ITEMS
        rows = self._con.execute(
            "SELECT part, items FROM fuzzy_ints WHERE list = ? AND part BETWEEN ? AND ? "
            "ORDER BY part",
            (name, first, last),
        ).fetchall()
        if [part for part, _items in rows] != list(range(first, last + 1)):
            raise ValueError(f"the near-miss {name} are cut short")
        offset = start - first * ROW_ITEMS
        items = ints_of(b"".join(items for _part, items in rows), name)[
            offset : offset + stop - start
        ]
        if len(items) != stop - start:
            raise ValueError(f"the near-miss {name} are cut short")
        if below is not None and items and max(items) >= below:
            raise ValueError(f"the near-miss {name} name a template there is not")
        return items

    @_reads
    def _texts(self, begin: int, end: int, count: int) -> list[str]:
        """The `count` templates stored in bytes [begin, end) of the fuzzy row's text."""
        blob = self._templates_blob()
        blob.seek(begin)
        texts = blob.read(end - begin).decode("utf-8").split(TEMPLATE_SEPARATOR)
        if len(texts) != count:
            raise ValueError("the fuzzy row's templates and their ends disagree")
        return texts

    def _templates_blob(self) -> sqlite3.Blob:
        """The fuzzy row's text, opened once: SQLite finds an offset in a blob by walking its
        overflow pages from the first, and only an open handle remembers the pages it walked
        (at a million records, a near miss reading 8 stretches spent 193 ms in them with a handle
        each and 143 ms with this one; the rest is decoding the text and splitting it)."""
        if self._blob is None:
            self._blob = self._con.blobopen("fuzzy", "templates", self._fuzzy_row, readonly=True)
        return self._blob

    def template_words(self, words: Iterable[str]) -> list[tuple[str, int, list[int] | None]]:
        """(word, how many templates hold it, which: their places in fuzzy_templates' lists,
        None for a word too common to be listed) for each of `words` the templates have."""
        out: list[tuple[str, int, list[int] | None]] = []
        for word, df, rows in select_in(
            self._con.execute,
            "SELECT w, df, rows FROM words WHERE w IN ({marks})",
            list(dict.fromkeys(words)),
        ):
            out.append((word, df, json.loads(rows) if rows else None))
        return out
