"""Finding every known error in a log: the prefilter index over all patterns' literal keys,
verification in a linear-time engine, evidence from the log around a hit, ranking, fuzzy near
misses, captures and "did you mean".

The cache is one SQLite file, `<cache_dir>/matcher.sqlite3`, written to a temp file and renamed:
  meta      format, revision, counts, the key-id ranges per kind, known packages
  shards    the serialised Hyperscan literal databases, SHARD_KEYS keys or fewer each
  keys      Hyperscan id -> key text, kind (pattern | code | frame | traceback | error)
            and the patterns whose best key it is
  patterns  the prepared regex, engine, generic, literal_chars, key_line, newlines, placeholder
            names, records, relaxed form (guarded only), the other required literal pieces
  records   id, repo, class, code, filePath, lineNumber, pattern, message
  files     filePath -> (lineNumber, record), codes: code -> record
  fuzzy     message templates for near misses (read only when a log needs them)
A cold match reads meta and the shards (13 MB at 150k records, 85 MB at 1M) and then only the
rows its candidates need.
See benchmarks/ENGINES.md for the measurements behind the choice.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import hashlib
import json
import os
import re
import sqlite3
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from kb import logtext
from kb.logtext import Frame
from kb.patterns import (
    GENERIC_LITERAL_CHARS,
    MIN_KEY_CHARS,
    PreparedPattern,
    has_nested_repeat,
    prepare,
    relax,
)
from kb.text import clip

__all__ = [
    "CACHE_FILE",
    "DEFAULT_MIN_SCORE",
    "FORMAT_VERSION",
    "Match",
    "MatchReport",
    "MatcherIndex",
    "PatternSource",
    "build_index",
    "cache_is_current",
    "load_index",
    "sources_from_records",
    "write_index",
]

FORMAT_VERSION = 9
CACHE_FILE = "matcher.sqlite3"
# A temporary cache file this old is left over from a killed build.
STALE_TMP_SECONDS = 3600
# Records a build holds before writing them to the cache: bounds its memory, amortises inserts.
BUILD_CHUNK = 2_000
# Keys per Hyperscan database. Compiling takes about 2.2 KB a key (measured: 100k keys 215 MB,
# 250k keys 537 MB, the 1M-record corpus's 669k keys 1.5 GB); shards of this size keep
# `kb import` (the import, then this build, in one process) under 300 MB at a million records
# (64k: 301 MB), and each further shard costs one more pass over a log (about 25 ms on a 22 MB
# log, run in a thread beside the Python work), so shards are as few and as even as this allows.
SHARD_KEYS = 56_000
# Below this a clean log (noise hitting generic patterns only) comes back empty; one specific
# pattern on its own (0.56 and up) or a generic one with a frame clears it.
DEFAULT_MIN_SCORE = 0.5
# Scores never claim certainty: 1.0 is reserved.
MAX_SCORE = 0.99
# Most lines between two frames of one traceback (source line, ^^^^ markers; IPython: context).
FRAME_GAP = 4
FRAME_GAP_JUPYTER = 16
# Python traceback formats (innermost frame last), and those showing several context lines.
PYTHON_STYLES = frozenset({"python", "jupyter", "rich"})
CONTEXT_STYLES = frozenset({"jupyter", "rich"})
# rich draws its traceback in a box: lines inside it are never the message.
BOX_CHARS = frozenset("│╭╰┃┏┗")
# A code-looking line is quoted source only with a stack frame this close.
CODE_CONTEXT = 60
# A raising frame adds no match of its own this close to a match of the same record.
FRAME_ONLY_NEAR = 80
# Path tails tried against the records' filePaths (a deep path has many).
MAX_PATH_PARTS = 40
# Blocks this big are scanned in a thread, alongside the work on their neighbours.
THREADED_SCAN_BYTES = 1 << 20
# Lines of earlier blocks kept for context (tracebacks above a message, messages split over lines).
CARRY_LINES = 160
# Lines after a hit that may still hold its stack frames (JavaScript, Java, Go print them below).
LOOKAHEAD_LINES = 64
# How far above an exception line its traceback may start.
LOOKBACK_LINES = 400
# A message is truncated to this in Match.text (the transformers model list runs to 20 KB).
TEXT_MAX_CHARS = 2000
# Backtracking (guarded) verification only runs on spans up to this long.
GUARD_MAX_CHARS = 256
# Frames this close to a record's lineNumber count as "near" (versions move lines a little).
FRAME_NEAR_LINES = 3
FRAME_FILE_LINES = 40
# Near misses: rapidfuzz ratio cutoff, and how many distinct messages one match call may try.
FUZZY_CUTOFF = 78.0  # below ~86 only the class on the line lifts a near miss over the min score
FUZZY_CLASSLESS_CUTOFF = 86.0
FUZZY_MAX_QUERIES = 40
FUZZY_SHORTLIST = 12  # templates rescored with placeholders free (see _gap_similarity)
FUZZY_SHORTLIST_CUTOFF = 55.0  # plain similarity a template needs to be rescored at all
FUZZY_MIN_CHARS = 16
# A message may run on over this many lines when a value in it has newlines.
MAX_VALUE_LINES = 12
# Pastes this short get every line tried as a near miss, not only error-looking ones.
SHORT_PASTE_LINES = 40
# At most this many equally good near-duplicates are listed as alternatives.
MAX_TIES = 20
# Match.other_lines keeps this many lines where the same error occurs again.
MAX_OTHER_LINES = 100
# Match.duplicates lists every tying record (one message raised from 445 model files), capped.
MAX_DUPLICATES = 1000
# Words shaped like codes that name log levels, outcomes or protocols, never error codes.
NOT_CODES = frozenset(logtext.LEVELS) | {
    "OK", "FAIL", "FAILED", "FAILURE", "SUCCESS", "PASS", "PASSED", "TRUE", "FALSE", "NONE",
    "NULL", "GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS", "HTTP", "HTTPS", "UTC",
    "GMT", "JSON", "XML", "SQL", "API", "URL",
}  # fmt: skip

# Evidence weights, combined as independent signals: score = 1 - (1 - base) * prod(1 - w).
W_CLASS = 0.35  # the record's exception class printed before the message
W_FRAME_EXACT = 0.7  # a frame at the record's filePath:lineNumber
W_FRAME_NEAR = 0.55  # ... within FRAME_NEAR_LINES
W_FRAME_FILE = 0.3  # ... in the same file, further away
W_PACKAGE = 0.15  # the record's package in the traceback's paths
W_WHOLE = 0.25  # the pattern covers the whole message, not a piece of it
W_CODE_CLASS = 0.2
CLASS_CONFLICT = 0.8  # another exception class printed before the message
GENERIC_CAP = 0.45  # a generic pattern without a frame or package behind it
# Without a class or a frame: a message on an INFO/DEBUG (WARN) line, or inside a longer one.
LEVEL_FACTORS = {"TRACE": 0.7, "DEBUG": 0.7, "INFO": 0.7, "NOTICE": 0.7, "WARN": 0.85}
PARTIAL_FACTOR = 0.85
# A pattern with fewer literal characters than this, matched with no class and no frame, is
# "thin" when its literal text is under THIN_SHARE of the text it matched (the rest being
# captured values); thin matches are discounted by THIN_FACTOR, below the default min score.
THIN_LITERAL_CHARS = 30
THIN_SHARE = 0.35
THIN_FACTOR = 0.7
ERROR_LEVELS = frozenset({"ERROR", "CRITICAL", "FATAL", "PANIC"})
FOREIGN_FACTOR = 0.55  # raised inside another known library, the record's file nowhere in sight
FOREIGN = -1.0  # marker weight from _frame_evidence

_MARKERS: tuple[tuple[str, str], ...] = (
    ('File "', "frame"),
    ("File ", "frame"),
    ("    at ", "frame"),
    ("\tat ", "frame"),
    (".go:", "frame"),
    (".rs:", "frame"),
    (".rb:", "frame"),
    (".php(", "frame"),
    (".cs:line", "frame"),
    ("Traceback (most recent call last)", "traceback"),
    ("Error", "error"),
    ("Exception", "error"),
    ("FATAL", "error"),
    ("Fatal", "error"),
    ("panic", "error"),
    ("Failure", "error"),
    ("│ ", "frame"),
)
LIB_PATH_RE = re.compile(
    r"[/\\](?:site-packages|dist-packages|node_modules|\.cargo[/\\]registry|go[/\\]pkg[/\\]mod"
    r"|lib[/\\]python\d[\d.]*|vendor|\.m2|gems)[/\\]|^<frozen |^<(?:string|stdin)>"
)
PACKAGE_RE = re.compile(r"(?:site-packages|dist-packages|node_modules)[/\\]([\w.\-]+)")
# Source lines quoted in tracebacks (Python, IPython's numbered lines, JS, Rust).
# Messages CPython itself raises everywhere (operators, indexing, imports, calls, json, OS
# errors). A library record with the same words cannot be told from Python's own error without
# a frame in that library, so such a line is claimed only with frame evidence.
BUILTIN_MESSAGE_RE = re.compile(
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

SOURCE_LINE_RE = re.compile(
    r"^\s*(?:-*>\s*)?(?:\d+\s+)?(?:raise|throw|panic!|assert|return|yield|await|except)\b"
)
# Inside a traceback report (pytest shows whole functions): a string literal continuing a
# statement, an assignment, pytest's "self = <...>" locals.
CODE_LINE_RE = re.compile(r"^\s+(?:[rbf]|rf|fr)?[\"']|^\s*[A-Za-z_]\w* = (?:<|[rbf]?[\"'])")
# Where a message that runs on over lines surely ends: a new record, a traceback, a frame.
VALUE_STOP_RE = re.compile(
    r"\S*\d\d:\d\d|\[?(?:" + logtext.LEVEL_WORDS + r")\b|Traceback|"
    r"During handling|The above exception|\s*File \"|\s+at |[\w.]+(?:Error|Exception):|E  |_ _ _"
)
SERVICE_RE = re.compile(r"([\w.\-]{1,64}) +\| ")
PYTEST_LOC_RE = re.compile(r"\.py:\d+: ")  # then parse_frame reads the whole line
# The same, over a block's bytes: one regex pass, since ".py:" alone is on every line of some
# logs ("[loggers.py:123]") and a literal key for it fired once per such line.
PYTEST_LOC_BYTES_RE = re.compile(rb"\.py:\d+: ")
CLASS_SEARCH_CHARS = 4096  # how far into a line a dotted exception class is looked for
DOTTED_CLASS_RE = re.compile(r"(?:^|\s)([a-z_]\w*(?:\.\w+)*)\.[A-Z]\w*:(?: |$)")
UNFILLED_RE = re.compile(r"\{[\w.\[\]()'\"!:, ]*\}|%\(\w+\)[sdr]|%[sdr]")
NUMBERED_SOURCE_RE = re.compile(r"^\s*(?:-*>\s*)?\d{1,6} ")
# Values in a message: quoted, bracketed, numbers (a number's sentence-ending period stays).
_VALUE_RE = re.compile(
    r"'[^']*'|\"[^\"]*\"|\[[^\]]*\]|\([^)]*\)|\{[^}]*\}|<[^>]*>|\b\d(?:[\w.]*\w)?"
)
_SPACES_RE = re.compile(r"\s+")
_CODE_BOUNDARY = re.compile(r"[\w-]")
_CHOICE_SPLIT = re.compile(r"\s*(?:,|\||\bor\b)\s*")
_CHOICE_TRIM = " \t'\"`[](){}<>."


@dataclass(frozen=True)
class PatternSource:
    """One record, as the matcher needs it."""

    id: str
    repo: str
    message_pattern: str
    error_message: str
    error_class: str | None
    error_code: str | None
    file_path: str
    line_number: int
    prepared: PreparedPattern | None = None


@dataclass
class Match:
    """One error found in the log, with its best record. line/end_line are 1-based lines of the
    original log; alternatives are other (id, score) that fit the same text."""

    id: str
    score: float
    method: str
    line: int
    end_line: int
    text: str
    captures: list[str] = field(default_factory=list)
    capture_names: list[str | None] = field(default_factory=list)
    evidence: list[str] = field(default_factory=list)
    alternatives: list[tuple[str, float]] = field(default_factory=list)
    suggestion: str | None = None
    occurrences: int = 1
    other_lines: list[int] = field(default_factory=list)
    duplicates: list[str] = field(default_factory=list)

    @property
    def log_order(self) -> tuple[int, int, float]:
        """Sort key for printing in log order."""
        return (self.line, self.end_line, -self.score)

    def __lt__(self, other: Match) -> bool:
        """Matches sort in log order (`sorted(report.matches)`); the report lists them best
        first."""
        return self.log_order < other.log_order

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "score": round(self.score, 3),
            "method": self.method,
            "line": self.line,
            "end_line": self.end_line,
            "text": self.text,
            "captures": list(self.captures),
            "capture_names": list(self.capture_names),
            "evidence": list(self.evidence),
            "alternatives": [[i, round(s, 3)] for i, s in self.alternatives],
            "suggestion": self.suggestion,
            "occurrences": self.occurrences,
            "other_lines": list(self.other_lines),
            "duplicates": list(self.duplicates),
        }


@dataclass
class MatchReport:
    """Matches best first (the JSON contract); `in_log_order()` for reading."""

    matches: list[Match]
    stats: dict[str, Any]

    def in_log_order(self) -> list[Match]:
        return sorted(self.matches, key=lambda m: m.log_order)


# --------------------------------------------------------------------------------------------
# Building and loading the cache


def _norm_template(text: str) -> str:
    return _SPACES_RE.sub(" ", _VALUE_RE.sub(" ", text)).strip().lower()


def _fuzzy_template(error_message: str) -> str:
    from kb.patterns import message_pieces

    literal = " ".join(p for p in message_pieces(error_message) if p is not None)
    return _norm_template(literal)


def _schema(con: sqlite3.Connection) -> None:
    con.executescript(
        """
        CREATE TABLE meta (k TEXT PRIMARY KEY, v BLOB);
        CREATE TABLE shards (n INTEGER PRIMARY KEY, hsdb BLOB);
        CREATE TABLE keys (idx INTEGER PRIMARY KEY, key TEXT, kind TEXT, patterns TEXT);
        CREATE TABLE patterns (
            idx INTEGER PRIMARY KEY, regex TEXT, engine TEXT, generic INTEGER,
            literal_chars INTEGER, key_line INTEGER, newlines INTEGER, names TEXT,
            records TEXT, relaxed TEXT, nested INTEGER, others TEXT);
        CREATE TABLE records (
            idx INTEGER PRIMARY KEY, id TEXT, repo TEXT, error_class TEXT, error_code TEXT,
            file_path TEXT, line_number INTEGER, pattern INTEGER, error_message TEXT);
        CREATE TABLE files (file_path TEXT, line_number INTEGER, rec INTEGER);
        CREATE TABLE codes (code TEXT, rec INTEGER);
        CREATE TABLE fuzzy (t TEXT, p INTEGER);
        """
    )


def _finish_schema(con: sqlite3.Connection) -> None:
    # Covering indexes: a frame's file can have thousands of records (1M-record corpus), and a
    # cold match then reads them from the index alone instead of one table page per row.
    con.executescript(
        """
        CREATE INDEX files_path ON files (file_path, line_number, rec);
        CREATE INDEX codes_code ON codes (code, rec);
        """
    )


def build_index(sources: Iterable[PatternSource], cache_dir: Path, revision: str) -> MatcherIndex:
    """write_index, then load what it wrote."""
    write_index(sources, cache_dir, revision)
    index = load_index(cache_dir, revision)
    if index is None:  # pragma: no cover - we just wrote it
        raise RuntimeError(f"the matcher cache in {cache_dir} could not be read back")
    return index


def write_index(
    sources: Iterable[PatternSource],
    cache_dir: Path,
    revision: str,
    progress: Callable[[int], None] | None = None,
) -> None:
    """Prepare every pattern, compile the prefilter and write the cache for `revision`
    (atomically: a temp file renamed over the old one). `progress`, if given, is called with
    the number of records done since its last call (for a progress bar)."""
    gc.collect()  # what an import just before left: the compiles below need the room
    _release_memory()
    cache_dir = Path(cache_dir)
    cache_dir.mkdir(parents=True, exist_ok=True)
    for stale in cache_dir.glob(".matcher-*.tmp"):
        # left by a build that was killed; a running build's file is younger than this
        with contextlib.suppress(OSError):
            if time.time() - stale.stat().st_mtime > STALE_TMP_SECONDS:
                stale.unlink()
    started = time.perf_counter()
    fd, tmp_name = tempfile.mkstemp(prefix=".matcher-", suffix=".tmp", dir=cache_dir)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        con = sqlite3.connect(tmp)
        con.execute("PRAGMA journal_mode=OFF")
        con.execute("PRAGMA synchronous=OFF")
        _schema(con)
        # Streamed: rows go to the cache in chunks and the per-key / per-pattern lists are
        # grouped by SQLite at the end, so memory stays flat in the record count (what grows
        # in Python is the error codes and the kind of each key).
        con.executescript(
            """
            CREATE TEMP TABLE prec (p INTEGER, rec INTEGER);
            CREATE TEMP TABLE kp (key TEXT, p INTEGER);
            CREATE TEMP TABLE fz (t TEXT PRIMARY KEY, p INTEGER);
            CREATE TEMP TABLE pid (ident INTEGER PRIMARY KEY, p INTEGER);
            """
        )
        n_patterns = 0
        pattern_rows: list[tuple[Any, ...]] = []
        prec_rows: list[tuple[int, int]] = []
        kp_rows: list[tuple[str, int]] = []
        fz_rows: list[tuple[str, int]] = []
        codes: dict[str, list[int]] = {}
        packages: set[str] = set()
        record_rows: list[tuple[Any, ...]] = []
        file_rows: list[tuple[str, int, int]] = []
        pending: list[tuple[int, PatternSource, PreparedPattern, int | None]] = []
        warnings = 0
        n_records = 0

        def flush() -> None:
            con.executemany(
                "INSERT INTO patterns VALUES (?,?,?,?,?,?,?,?,'[]',?,?,?)", pattern_rows
            )
            con.executemany("INSERT INTO prec VALUES (?,?)", prec_rows)
            con.executemany("INSERT INTO kp VALUES (?,?)", kp_rows)
            con.executemany("INSERT OR IGNORE INTO fz VALUES (?,?)", fz_rows)
            con.executemany("INSERT INTO records VALUES (?,?,?,?,?,?,?,?,?)", record_rows)
            con.executemany("INSERT INTO files VALUES (?,?,?)", file_rows)
            for rows in (pattern_rows, prec_rows, kp_rows, fz_rows, record_rows, file_rows):
                rows.clear()

        def assign() -> None:
            """Number the chunk's patterns, one row per distinct (engine, regex): a pattern is
            recognised across chunks by a 64-bit digest looked up in SQLite, so no map of every
            pattern stays in Python (70 MB at 1M records)."""
            nonlocal n_patterns
            idents = list({item[3] for item in pending if item[3] is not None})
            known: dict[int, int] = {}
            for start in range(0, len(idents), 500):
                part = idents[start : start + 500]
                marks = ",".join("?" * len(part))
                known.update(
                    con.execute(f"SELECT ident, p FROM pid WHERE ident IN ({marks})", part)
                )
            new_idents: list[tuple[int, int]] = []
            for rec_idx, src, prep, ident in pending:
                p_idx = -1
                if ident is not None and prep.regex is not None:
                    p_idx = known.get(ident, -1)
                    if p_idx < 0:
                        p_idx = n_patterns
                        n_patterns += 1
                        known[ident] = p_idx
                        new_idents.append((ident, p_idx))
                        guarded = prep.engine == "guarded"
                        pattern_rows.append(
                            (
                                p_idx,
                                prep.regex,
                                prep.engine,
                                int(prep.generic),
                                prep.literal_chars,
                                prep.key_line,
                                prep.newlines,
                                json.dumps(prep.placeholder_names),
                                relax(prep.regex) if guarded else None,
                                int(has_nested_repeat(prep.regex) if guarded else 0),
                                json.dumps(prep.keys[1:]),
                            )
                        )
                        key = prep.keys[0]
                        if len(key.strip()) >= MIN_KEY_CHARS:
                            kp_rows.append((key, p_idx))
                        if prep.literal_chars >= GENERIC_LITERAL_CHARS:
                            template = _fuzzy_template(src.error_message)
                            if len(template) >= FUZZY_MIN_CHARS:
                                fz_rows.append((template, p_idx))
                    prec_rows.append((p_idx, rec_idx))
                code = src.error_code
                if code and len(code) >= 3 and code not in NOT_CODES:
                    codes.setdefault(code, []).append(rec_idx)
                path = src.file_path.replace("\\", "/").lstrip("./")
                if path:
                    file_rows.append((path, src.line_number, rec_idx))
                    if "/" in path:
                        packages.add(path.split("/", 1)[0])
                record_rows.append(
                    (
                        rec_idx,
                        src.id,
                        src.repo,
                        src.error_class,
                        code,
                        path,
                        src.line_number,
                        p_idx,
                        src.error_message,
                    )
                )
            con.executemany("INSERT INTO pid VALUES (?,?)", new_idents)
            pending.clear()
            flush()

        for rec_idx, src in enumerate(sources):
            n_records = rec_idx + 1
            prep = src.prepared or prepare(src.message_pattern, src.error_message)
            if prep.warning:
                warnings += 1
            ident = None
            if prep.regex is not None and prep.keys:
                ident = int.from_bytes(
                    hashlib.blake2b(
                        f"{prep.engine}\0{prep.regex}".encode("utf-8", "surrogatepass"),
                        digest_size=8,
                    ).digest(),
                    signed=True,  # an SQLite INTEGER
                )
            pending.append((rec_idx, src, prep, ident))
            if len(pending) >= BUILD_CHUNK:
                done = len(pending)
                assign()
                if progress is not None:
                    progress(done)
        done = len(pending)
        assign()
        if progress is not None and done:
            progress(done)
        con.executescript(
            """
            CREATE INDEX temp.prec_p ON prec (p, rec);
            UPDATE patterns SET records =
                (SELECT json_group_array(rec) FROM prec WHERE prec.p = patterns.idx);
            """
        )
        con.executemany(
            "INSERT INTO codes VALUES (?,?)", [(c, r) for c, rs in codes.items() for r in rs]
        )
        # Hyperscan ids: pattern keys (in the order they were first seen) first, then codes,
        # then the structural markers; streamed into the keys table and compiled shard by shard.
        (n_pattern_keys,) = con.execute("SELECT COUNT(DISTINCT key) FROM kp").fetchone()
        n_keys = n_pattern_keys + len(codes) + len(_MARKERS)
        n_shards = max(1, -(-n_keys // SHARD_KEYS))
        per_shard = -(-n_keys // n_shards)
        shard = _ShardWriter(con, per_shard)
        grouped = con.execute(
            """
            SELECT key, json_group_array(p), MIN(r) AS first
            FROM (SELECT key, p, rowid AS r FROM kp ORDER BY key, rowid)
            GROUP BY key ORDER BY first
            """
        )
        while chunk := grouped.fetchmany(BUILD_CHUNK):
            for key, pats, _first in chunk:
                shard.add(key, "pattern", pats)
        for code in codes:
            shard.add(code, "code", "[]")
        for marker, kind in _MARKERS:
            shard.add(marker, kind, "[]")
        shard.finish()
        meta = {
            "format": str(FORMAT_VERSION),
            "revision": revision,
            "records": str(n_records),
            "patterns": str(n_patterns),
            "warnings": str(warnings),
            "kinds": json.dumps(_kind_ranges(shard.kinds)),
            "packages": json.dumps(sorted(packages)),
            "built_s": f"{time.perf_counter() - started:.3f}",
        }
        con.executemany("INSERT INTO meta VALUES (?,?)", list(meta.items()))
        con.execute("INSERT INTO fuzzy SELECT t, p FROM fz ORDER BY rowid")
        _finish_schema(con)
        con.commit()
        con.close()
        os.replace(tmp, cache_dir / CACHE_FILE)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def cache_is_current(cache_dir: Path, revision: str) -> bool:
    """Whether the cache in `cache_dir` was written for `revision` by this format."""
    opened = _open_current(cache_dir, revision)
    if opened is None:
        return False
    opened[0].close()
    return True


def _open_current(
    cache_dir: Path, revision: str, *keys: str
) -> tuple[sqlite3.Connection, dict[str, Any]] | None:
    """A read-only connection to the cache and its meta values `keys`, if the cache was
    written for `revision` by this format; else None."""
    path = Path(cache_dir) / CACHE_FILE
    if not path.is_file():
        return None
    wanted = ("format", "revision", *keys)
    try:
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True, check_same_thread=False)
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


class _ShardWriter:
    """Numbers keys, writes them to the keys table and compiles every `size` of them into one
    Hyperscan database (a row of shards), so a build holds one shard's keys at a time."""

    def __init__(self, con: sqlite3.Connection, size: int) -> None:
        self.con = con
        self.size = size
        self.rows: list[tuple[int, str, str, str]] = []
        self.kinds: list[str] = []
        self.shards = 0

    def add(self, key: str, kind: str, patterns: str) -> None:
        self.rows.append((len(self.kinds), key, kind, patterns))
        self.kinds.append(kind)
        if len(self.rows) >= self.size:
            self.flush()

    def flush(self) -> None:
        import hyperscan

        if not self.rows:
            return
        self.con.executemany("INSERT INTO keys VALUES (?,?,?,?)", self.rows)
        db = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
        expressions = [row[1].encode("utf-8") for row in self.rows]
        db.compile(
            expressions=expressions,
            ids=[row[0] for row in self.rows],
            elements=len(expressions),
            flags=[0] * len(expressions),
            literal=True,
        )
        self.rows.clear()
        del expressions
        self.con.execute("INSERT INTO shards VALUES (?, ?)", (self.shards, hyperscan.dumpb(db)))
        self.shards += 1
        del db
        _release_memory()

    def finish(self) -> None:
        self.flush()


def _release_memory() -> None:
    """Hand the memory a shard's compile freed back to the system. glibc keeps it otherwise,
    fragmented by what is allocated in between, and each later shard's peak starts higher."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc: nothing to do
        pass


def _kind_ranges(kinds: list[str]) -> list[list[Any]]:
    """Runs of equal kinds as [first_id, kind]: keys are written grouped by kind."""
    out: list[list[Any]] = []
    for i, kind in enumerate(kinds):
        if not out or out[-1][1] != kind:
            out.append([i, kind])
    return out


def load_index(cache_dir: Path, revision: str) -> MatcherIndex | None:
    """The cached index for `revision`, or None when it is missing, stale or unreadable."""
    opened = _open_current(cache_dir, revision, "records", "kinds")
    if opened is None:
        return None
    con, rows = opened
    try:
        import hyperscan

        dbs = []
        for (blob,) in con.execute("SELECT hsdb FROM shards ORDER BY n"):
            db = hyperscan.loadb(bytes(blob), hyperscan.HS_MODE_BLOCK)
            db.scratch = hyperscan.Scratch(db)
            dbs.append(db)
        return MatcherIndex(con, dbs, int(rows["records"]), json.loads(rows["kinds"]), revision)
    except Exception:  # a corrupt file is as good as no cache
        con.close()
        return None


# --------------------------------------------------------------------------------------------
# Matching


@dataclass(slots=True)
class _Pattern:
    idx: int
    regex: str
    engine: str
    generic: bool
    literal_chars: int
    key_line: int
    newlines: int
    names: list[str | None]
    records: list[int]
    relaxed: str | None
    nested: bool
    others: list[str]  # the pattern's other required literal pieces (keys after the best)
    compiled: Any = None
    failed: bool = False
    dotall: Any = None


@dataclass(frozen=True, slots=True)
class _Record:
    idx: int
    id: str
    repo: str
    error_class: str | None
    error_code: str | None
    file_path: str
    line_number: int
    pattern: int
    error_message: str


@dataclass(slots=True)
class _Hit:
    """A verified pattern (or code) on logical lines g_start..g_end of the whole log."""

    g_start: int
    g_end: int
    line: int
    end_line: int
    method: str
    pattern: int  # -1 for codes
    records: list[int]
    subject: str
    captures: list[str]
    whole: bool
    code: str | None = None
    level: str | None = None  # the log level printed in the line's prefix


@dataclass(slots=True)
class _Tb:
    """A run of stack frames and the exception line it belongs to."""

    frames: list[tuple[int, int, Frame]]  # (g, original line, frame), innermost first
    exc_g: int | None
    style: str


@dataclass
class _Candidate:
    rec: _Record
    score: float
    method: str
    evidence: list[str]
    hit: _Hit | None


class _Scan:
    """State of one match call over a stream of blocks."""

    def __init__(self) -> None:
        self.g0 = 0  # global index of the current block's first logical line
        self.lines: list[str] = []
        self.line_nos: list[int] = []
        self.end_nos: list[int] = []
        self.frames: dict[int, tuple[int, Frame]] = {}
        self.errors: dict[int, tuple[str, str]] = {}
        self.headers: set[int] = set()
        self.hits: list[_Hit] = []
        self.attempted: set[tuple[int, int]] = set()
        self.matches: list[Match] = []
        self.candidates = 0
        self.verified = 0
        self.lines_total = 0
        self.fuzzy_queries = 0
        self.fuzzy_lines: set[int] = set()
        self.claimed: set[int] = set()
        self.tb_done: set[int] = set()
        self.by_key: dict[tuple[str, tuple[str, ...]], Match] = {}
        self.fuzzy_cache: dict[str, list[tuple[float, float, int]]] = {}
        self.by_line: dict[tuple[str, int], Match] = {}


def _lines_at(data: bytes, offsets: Iterable[int]) -> Iterator[int]:
    """The 0-based line of each offset into data (offsets in increasing order)."""
    pos = 0
    line = 0
    for offset in offsets:
        line += data.count(b"\n", pos, offset)
        pos = offset
        yield line


class _BlockScan:
    """The prefilter scan of one block's own lines: every shard over its bytes, in a thread
    for a big block (Hyperscan lets go of the GIL, so the scan overlaps the Python work on
    the blocks around it). result() gives (line in the block, key id) in line order."""

    def __init__(self, index: MatcherIndex, block: logtext.LineBlock) -> None:
        self.block = block
        self.data = (
            block.data
            if block.data is not None
            else "\n".join(block.lines).encode("utf-8", "replace")
        )
        self._dbs = index._dbs
        self._hits: list[tuple[int, int]] = []
        self._error: BaseException | None = None
        self._thread: threading.Thread | None = None
        if len(self.data) >= THREADED_SCAN_BYTES:
            # its own scratch spaces: the main thread scans carried lines meanwhile
            scratches = index._thread_scratches()
            self._thread = threading.Thread(
                target=self._scan, args=(scratches,), name="kb-scan", daemon=True
            )
            self._thread.start()
        else:
            self._scan(None)

    def _scan(self, scratches: list[Any] | None) -> None:
        try:
            self._hits = list(self.hits_by_line(self._dbs, self.data, scratches))
        except BaseException as exc:  # raised again where the result is wanted
            self._error = exc

    def wait(self) -> None:
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def result(self) -> list[tuple[int, int]]:
        self.wait()
        if self._error is not None:
            raise self._error
        return self._hits

    @staticmethod
    def hits_by_line(
        dbs: list[Any], data: bytes, scratches: list[Any] | None = None
    ) -> Iterator[tuple[int, int]]:
        if not data:
            return iter(())
        raw: list[tuple[int, int]] = []

        def on_hit(key_id: int, _from: int, to: int, _flags: int, _ctx: Any) -> None:
            raw.append((to, key_id))

        for i, db in enumerate(dbs):
            db.scan(data, match_event_handler=on_hit, scratch=scratches[i] if scratches else None)
        raw.sort()
        return zip(_lines_at(data, [to for to, _ in raw]), [key for _, key in raw], strict=True)


class MatcherIndex:
    """A loaded prefilter index. `match()` may be called many times and from several threads
    (calls are serialised: the Hyperscan scratch space and the lookup caches are shared)."""

    def __init__(
        self,
        con: sqlite3.Connection,
        dbs: list[Any],
        records: int,
        kinds: list[list[Any]],
        revision: str,
    ) -> None:
        self._con = con
        self._dbs = dbs
        self._scratches: list[Any] | None = None
        self.records = records
        self.revision = revision
        self._kind_starts = [int(k[0]) for k in kinds]
        self._kind_names = [str(k[1]) for k in kinds]
        # Pattern keys come first: ids below this need no kind lookup.
        if not kinds or self._kind_names[0] != "pattern":
            self._first_marker = 0
        else:
            self._first_marker = self._kind_starts[1] if len(kinds) > 1 else 1 << 62
        self._key_cache: dict[int, list[int]] = {}
        self._key_text: dict[int, str] = {}
        self._patterns: dict[int, _Pattern] = {}
        self._records: dict[int, _Record] = {}
        self._file_cache: dict[str, tuple[str, list[tuple[int, int]]] | None] = {}
        self._packages: frozenset[str] | None = None
        self._fuzzy: tuple[list[str], list[int]] | None = None
        self._lock = threading.Lock()

    def _thread_scratches(self) -> list[Any]:
        """A second scratch space per shard, for the scanning thread (made when first needed:
        small pastes never scan in a thread)."""
        if self._scratches is None:
            import hyperscan

            self._scratches = [hyperscan.Scratch(db) for db in self._dbs]
        return self._scratches

    # ---- lookups (lazy, cached) ----------------------------------------------------------

    def _kind(self, key_id: int) -> str:
        kind = self._kind_names[0]
        for start, name in zip(self._kind_starts, self._kind_names, strict=True):
            if key_id >= start:
                kind = name
            else:
                break
        return kind

    def _key_patterns(self, key_id: int) -> list[int]:
        pats = self._key_cache.get(key_id)
        if pats is None:
            row = self._con.execute(
                "SELECT key, patterns FROM keys WHERE idx = ?", (key_id,)
            ).fetchone()
            pats = json.loads(row[1]) if row else []
            self._key_text[key_id] = row[0] if row else ""
            self._key_cache[key_id] = pats
        return pats

    def _prefetch_keys(self, key_ids: set[int]) -> None:
        """Fetch the patterns of many hit keys in a few queries, not one each."""
        todo = sorted(key_ids)
        for start in range(0, len(todo), 500):
            part = todo[start : start + 500]
            marks = ",".join("?" * len(part))
            for idx, key, pats in self._con.execute(
                f"SELECT idx, key, patterns FROM keys WHERE idx IN ({marks})", part
            ):
                self._key_text[idx] = key
                self._key_cache[idx] = json.loads(pats)

    def _code_text(self, key_id: int) -> str:
        if key_id not in self._key_text:
            self._key_patterns(key_id)
        return self._key_text[key_id]

    def _pattern(self, idx: int) -> _Pattern:
        pat = self._patterns.get(idx)
        if pat is None:
            self._load_patterns([idx])
            pat = self._patterns[idx]
        return pat

    def _load_patterns(self, idxs: Iterable[int]) -> None:
        missing = [i for i in set(idxs) if i not in self._patterns]
        for start in range(0, len(missing), 500):
            part = missing[start : start + 500]
            marks = ",".join("?" * len(part))
            for row in self._con.execute(
                "SELECT idx, regex, engine, generic, literal_chars, key_line, newlines, names,"
                f" records, relaxed, nested, others FROM patterns WHERE idx IN ({marks})",
                part,
            ):
                self._patterns[row[0]] = _Pattern(
                    row[0],
                    row[1],
                    row[2],
                    bool(row[3]),
                    row[4],
                    row[5],
                    row[6],
                    json.loads(row[7]),
                    json.loads(row[8]),
                    row[9],
                    bool(row[10]),
                    json.loads(row[11]),
                )

    def _record(self, idx: int) -> _Record:
        rec = self._records.get(idx)
        if rec is None:
            self._load_records([idx])
            rec = self._records[idx]
        return rec

    def _load_records(self, idxs: Iterable[int]) -> None:
        missing = [i for i in set(idxs) if i not in self._records]
        for start in range(0, len(missing), 500):
            part = missing[start : start + 500]
            marks = ",".join("?" * len(part))
            for row in self._con.execute(
                "SELECT idx, id, repo, error_class, error_code, file_path, line_number, pattern,"
                f" error_message FROM records WHERE idx IN ({marks})",
                part,
            ):
                self._records[row[0]] = _Record(*row)

    def _file_records(self, frame: Frame) -> tuple[str, list[tuple[int, int]]] | None:
        """(filePath, [(lineNumber, record)]) for the longest known path that the frame's path
        ends with, or None."""
        if frame.path in self._file_cache:
            return self._file_cache[frame.path]
        suffixes = list(frame.path_suffixes())[:MAX_PATH_PARTS]
        marks = ",".join("?" * len(suffixes))
        found: dict[str, list[tuple[int, int]]] = {}
        for path, line_number, rec in self._con.execute(
            f"SELECT file_path, line_number, rec FROM files WHERE file_path IN ({marks})",
            suffixes,
        ):
            found.setdefault(path, []).append((line_number, rec))
        result = next(((p, found[p]) for p in suffixes if p in found), None)
        self._file_cache[frame.path] = result
        return result

    def _known_packages(self) -> frozenset[str]:
        if self._packages is None:
            row = self._con.execute("SELECT v FROM meta WHERE k = 'packages'").fetchone()
            self._packages = frozenset(json.loads(row[0]) if row else [])
        return self._packages

    def close(self) -> None:
        self._con.close()

    # ---- the scan ------------------------------------------------------------------------

    def match(
        self,
        text: str | bytes | IO[bytes] | IO[str] | os.PathLike[str],
        *,
        top: int = 3,
        min_score: float = DEFAULT_MIN_SCORE,
    ) -> MatchReport:
        """Every known error in `text` (a string, bytes, a binary/text stream or a path; streams
        and paths are read block by block). `top` records per error: the best plus top - 1
        alternatives."""
        started = time.perf_counter()
        scan = _Scan()
        with self._lock:
            if isinstance(text, os.PathLike):
                with open(text, "rb") as fh:
                    self._run(scan, logtext.blocks(fh), top, min_score)
            else:
                self._run(scan, logtext.blocks(text), top, min_score)
        matches = sorted(scan.matches, key=lambda m: (-m.score, m.line))
        stats = {
            "lines": scan.lines_total,
            "records": self.records,
            "candidates": scan.candidates,
            "verified": scan.verified,
            "fuzzy_queries": scan.fuzzy_queries,
            "elapsed_ms": round((time.perf_counter() - started) * 1000, 1),
        }
        return MatchReport(matches, stats)

    def _run(
        self, scan: _Scan, blocks: Iterator[logtext.LineBlock], top: int, min_s: float
    ) -> None:
        # A block's prefilter scan runs while the next block is read and split, and the next
        # block's while this one is worked on (Hyperscan lets go of the GIL): one scan at a
        # time, since each shard has one scratch space.
        prev: _BlockScan | None = None
        current: _BlockScan | None = None
        try:
            for block in blocks:
                if prev is None:
                    prev = current = _BlockScan(self, block)
                    continue
                prev.result()  # done before the next block's scan starts
                current = _BlockScan(self, block)
                self._block(scan, prev, final=False, top=top, min_score=min_s)
                prev = current
            if prev is not None:
                self._block(scan, prev, final=True, top=top, min_score=min_s)
            else:
                self._finalize(scan, None, top, min_s)
        finally:
            # An error (or Ctrl-C) mid-log must not leave a scan running on the thread's
            # scratch spaces: the next match() would find them in use.
            if current is not None:
                current.wait()

    def _block(
        self,
        scan: _Scan,
        scanned: _BlockScan,
        *,
        final: bool,
        top: int,
        min_score: float,
    ) -> None:
        """Work on one block, its own lines' prefilter hits found by `scanned`."""
        block = scanned.block
        # Keep the tail of the previous block in front of this one, for context.
        carry = min(CARRY_LINES, len(scan.lines))
        n_new = len(block.lines)
        new_nos = block.first if block.first is not None else range(block.base, block.base + n_new)
        new_ends = block.last if block.last is not None else new_nos
        scan.g0 += len(scan.lines) - carry
        kept = scan.lines[len(scan.lines) - carry :]
        scan.lines = kept + block.lines
        scan.line_nos = scan.line_nos[len(scan.line_nos) - carry :] + list(new_nos)
        scan.end_nos = scan.end_nos[len(scan.end_nos) - carry :] + list(new_ends)
        scan.lines_total += len(block.lines)
        lines = scan.lines
        # The carried lines are scanned again: what waited for the lines after them (a message
        # running on into this block) is tried now. Keys never span a newline, so scanning
        # them apart from the block finds what scanning both together would.
        carry_data = "\n".join(kept).encode("utf-8", "replace") if kept else b""
        per_line: dict[int, set[int]] = {}
        for li, key_id in _BlockScan.hits_by_line(self._dbs, carry_data):
            per_line.setdefault(li, set()).add(key_id)
        for li, key_id in scanned.result():
            per_line.setdefault(carry + li, set()).add(key_id)
        g0 = scan.g0
        pending_patterns: list[tuple[int, int]] = []
        code_hits: list[tuple[int, int]] = []
        first_marker = self._first_marker
        self._prefetch_keys(
            {k for ids in per_line.values() for k in ids if k < first_marker}
            - self._key_cache.keys()
        )
        for li, key_ids in per_line.items():
            g = g0 + li
            for key_id in key_ids:
                kind = "pattern" if key_id < first_marker else self._kind(key_id)
                if kind == "pattern":
                    for p in self._key_patterns(key_id):
                        pending_patterns.append((p, li))
                elif kind == "code":
                    code_hits.append((key_id, li))
                elif kind == "frame":
                    if g not in scan.frames:
                        frame = logtext.parse_frame(lines[li])
                        if frame is not None:
                            scan.frames[g] = (scan.line_nos[li], frame)
                elif kind == "traceback":
                    scan.headers.add(g)
                elif g not in scan.errors:
                    exc = logtext.exception_of(logtext.strip_prefix(lines[li]))
                    if exc is not None:
                        scan.errors[g] = exc
                    if PYTEST_LOC_RE.search(lines[li]):
                        scan.errors.pop(g, None)  # a pytest location line, read as a frame
        # pytest prints the raise site as "path.py:466: InvalidVersion"
        for li in [
            *_lines_at(carry_data, [m.start() for m in PYTEST_LOC_BYTES_RE.finditer(carry_data)]),
            *(
                carry + i
                for i in _lines_at(
                    scanned.data, [m.start() for m in PYTEST_LOC_BYTES_RE.finditer(scanned.data)]
                )
            ),
        ]:
            g = g0 + li
            if g not in scan.frames:
                frame = logtext.parse_frame(lines[li])
                if frame is not None and frame.style == "pytest":
                    scan.frames[g] = (scan.line_nos[li], frame)
        self._load_patterns(p for p, _ in pending_patterns)
        limit = len(lines) if final else len(lines) - LOOKAHEAD_LINES
        for p, li in pending_patterns:
            self._verify(scan, self._pattern(p), li, final)
        for key_id, li in code_hits:
            self._verify_code(scan, key_id, li)
        self._finalize(scan, None if final else g0 + limit, top, min_score)

    def _subjects(
        self, scan: _Scan, pat: _Pattern, li: int, final: bool
    ) -> list[tuple[int, int, str]]:
        """(first line, last line, text) to run a pattern on, for a key hit on line li."""
        lines = scan.lines
        out: list[tuple[int, int, str]] = []
        start = li - pat.key_line
        end = start + pat.newlines
        if start >= 0 and end < len(lines):
            if pat.newlines:
                text = "\n".join(logtext.strip_prefix(lines[k]) for k in range(start, end + 1))
            else:
                text = logtext.strip_prefix(lines[li])
            out.append((start, end, text))
        elif end >= len(lines) and not final:
            return []  # seen again, whole, in the next block's carried lines
        one = logtext.strip_prefix(lines[li])
        exc = logtext.exception_of(one)
        if exc is not None and exc[0].rpartition(".")[2].endswith("KeyError"):
            plain = logtext.unrepr_message(exc[1])
            if plain is not None:
                out.append((li, li, f"{exc[0]}: {plain}"))
        if '\\"' in one or "\\'" in one:
            # a message quoted inside a quoted field (logfmt error="...", a JSON string kept
            # whole): its own quotes arrive escaped
            out.append((li, li, one.replace('\\"', '"').replace("\\'", "'")))
        if pat.newlines == 0:
            # A value with newlines in it (a DataFrame, a list of errors) carries the message on
            # over the next lines: from the exception line at or above the hit, tried last with
            # `.` matching newlines (a negative last line marks it).
            top = li
            while exc is None and top > 0 and li - top < MAX_VALUE_LINES:
                if not lines[top].strip() or VALUE_STOP_RE.match(lines[top]):
                    break
                top -= 1
                exc = logtext.exception_of(logtext.strip_prefix(lines[top]))
            end = top
            while exc is not None and end + 1 < len(lines) and end - top < MAX_VALUE_LINES:
                nxt = lines[end + 1]
                if not nxt.strip() or VALUE_STOP_RE.match(nxt):
                    break
                end += 1
            if exc is not None and end >= li and end > top:
                text = "\n".join(logtext.strip_prefix(lines[k]) for k in range(top, end + 1))
                out.append((top, -1 - end, text))
        return out

    def _compiled(self, pat: _Pattern) -> Any:
        if pat.compiled is None and not pat.failed:
            try:
                if pat.engine == "guarded":
                    import re2

                    pat.compiled = re2.compile(pat.relaxed) if pat.relaxed else None
                    pat.failed = pat.compiled is None
                else:
                    import re2

                    pat.compiled = re2.compile(pat.regex)
            except Exception:
                pat.failed = True
        return pat.compiled

    def _compiled_dotall(self, pat: _Pattern) -> Any:
        if pat.engine == "guarded" or pat.failed:
            return None
        if pat.dotall is None:
            import re2

            try:
                pat.dotall = re2.compile("(?s)" + pat.regex)
            except Exception:
                pat.dotall = False
        return pat.dotall or None

    def _verify(self, scan: _Scan, pat: _Pattern, li: int, final: bool) -> None:
        scan.candidates += 1
        start = li - pat.key_line
        key = (pat.idx, scan.g0 + max(start, 0))
        if key in scan.attempted:
            return
        subjects = self._subjects(scan, pat, li, final)
        if not subjects:
            return
        scan.attempted.add(key)
        if pat.others:
            # every literal piece must be there: a substring test rejects most candidates
            # before their regex is compiled and run
            subjects = [s for s in subjects if all(piece in s[2] for piece in pat.others)]
            if not subjects:
                return
        compiled = self._compiled(pat)
        if compiled is None:
            return
        for first, last, subject in subjects:
            if last < 0:
                dotall = self._compiled_dotall(pat)
                m = dotall.search(subject) if dotall is not None else None
                if m is None:
                    continue
                last = first + subject.count("\n", 0, m.end())
            else:
                m = compiled.search(subject)
            if m is None:
                continue
            if pat.engine == "guarded" and not self._confirm(pat, subject, m.start(), m.end()):
                continue
            scan.verified += 1
            captures = _captures(m, subject)
            leading = pat.regex.startswith("^(")
            whole = _covers_message(subject, m.start(), m.end(), leading)
            scan.hits.append(
                _Hit(
                    scan.g0 + first,
                    scan.g0 + last,
                    scan.line_nos[first],
                    scan.end_nos[last],
                    "pattern",
                    pat.idx,
                    pat.records,
                    subject,
                    captures,
                    whole,
                    level=logtext.level_of(scan.lines[first]),
                )
            )
            return

    def _confirm(self, pat: _Pattern, subject: str, start: int, end: int) -> bool:
        """Run a backtracking-only pattern where it is bounded: on the span RE2 found (its
        relaxed form matched there), short, and without nested quantifiers."""
        if pat.nested or end - start > GUARD_MAX_CHARS:
            return False
        try:
            return re.search(pat.regex, subject[start:end]) is not None
        except re.error:
            return False

    def _verify_code(self, scan: _Scan, key_id: int, li: int) -> None:
        code = self._code_text(key_id)
        line = scan.lines[li]
        pos = line.find(code)
        while pos >= 0:
            before = line[pos - 1 : pos]
            after = line[pos + len(code) : pos + len(code) + 1]
            if not _CODE_BOUNDARY.match(before or " ") and not _CODE_BOUNDARY.match(after or " "):
                break
            pos = line.find(code, pos + 1)
        if pos < 0:
            return
        g = scan.g0 + li
        if (-1 - key_id, g) in scan.attempted:
            return
        scan.attempted.add((-1 - key_id, g))
        recs = [r[0] for r in self._con.execute("SELECT rec FROM codes WHERE code = ?", (code,))]
        subject = logtext.strip_prefix(line)
        scan.hits.append(
            _Hit(
                g,
                g,
                scan.line_nos[li],
                scan.end_nos[li],
                "code",
                -1,
                recs,
                subject,
                [],
                False,
                code,
                logtext.level_of(line),
            )
        )

    # ---- evidence, ranking, output ------------------------------------------------------

    def _tracebacks(self, scan: _Scan) -> list[_Tb]:
        """Group the frames seen so far into tracebacks with their exception lines."""
        out: list[_Tb] = []
        run: list[tuple[int, int, Frame]] = []

        def close() -> None:
            if not run:
                return
            style = run[-1][2].style
            if style in logtext.INNERMOST_FIRST:
                first_g = run[0][0]
                exc_g = next(
                    (g for g in range(first_g - 1, first_g - 7, -1) if g in scan.errors), None
                )
                out.append(_Tb(list(run), exc_g, style))
            else:
                last_g = run[-1][0]
                # Python prints the exception after the frames and their source lines (IPython:
                # numbered context lines), unindented, whatever it looks like ("error: ...").
                exc_g = None
                span = FRAME_GAP_JUPYTER + 8 if style in CONTEXT_STYLES else 8
                service = _service(scan, last_g)
                for g in range(last_g + 1, last_g + span):
                    li = g - scan.g0
                    if g in scan.frames:
                        break
                    if not 0 <= li < len(scan.lines):
                        exc_g = g if g in scan.errors else None
                        break
                    if service is not None and _service(scan, g) != service:
                        continue  # another container's line, interleaved (docker compose)
                    line = logtext.strip_prefix(scan.lines[li])
                    if (
                        not line.strip()
                        or line[:1].isspace()
                        or line[:1] in BOX_CHARS
                        or NUMBERED_SOURCE_RE.match(line)
                    ):
                        continue
                    exc_g = g
                    break
                out.append(_Tb(list(reversed(run)), exc_g, style))

        prev_g = -(10**9)
        for g in sorted(scan.frames):
            line_no, frame = scan.frames[g]
            # IPython shows several source lines around each frame.
            gap = FRAME_GAP_JUPYTER if frame.style in CONTEXT_STYLES else FRAME_GAP
            if run and (
                g - prev_g > gap
                # an exception line between two frames ends one traceback, the next begins
                or any(e in scan.errors for e in range(prev_g + 1, g))
                or (
                    frame.style != run[-1][2].style
                    and not (frame.style in PYTHON_STYLES and run[-1][2].style in PYTHON_STYLES)
                )
            ):
                close()
                run = []
            run.append((g, line_no, frame))
            prev_g = g
        close()
        return out

    def _finalize(self, scan: _Scan, upto: int | None, top: int, min_score: float) -> None:
        """Score hits on lines before `upto` (all when None) and turn them into matches."""
        ready = [h for h in scan.hits if upto is None or h.g_end < upto]
        if upto is not None and not ready and not scan.frames and not scan.errors:
            self._prune(scan, upto)
            return
        tbs = self._tracebacks(scan)
        by_exc = {t.exc_g: t for t in tbs if t.exc_g is not None}
        after = {t.frames[0][0]: t for t in tbs if t.style in logtext.INNERMOST_FIRST and t.frames}
        ready_set = {id(h) for h in ready}
        scan.hits = [h for h in scan.hits if id(h) not in ready_set]
        ready = [h for h in ready if not self._is_source_line(scan, h)]
        clusters: list[list[_Hit]] = []
        for hit in sorted(ready, key=lambda h: (h.g_start, h.g_end)):
            if clusters and hit.g_start <= max(h.g_end for h in clusters[-1]):
                clusters[-1].append(hit)
            else:
                clusters.append([hit])
        used_tbs: set[int] = set()
        self._load_records(rec_idx for hit in ready for rec_idx in hit.records)
        for cluster in clusters:
            g_start = cluster[0].g_start
            g_end = max(h.g_end for h in cluster)
            tb: _Tb | None = next(
                (by_exc[g] for g in range(g_start, g_start - 3, -1) if g in by_exc), None
            )
            if tb is None:
                # (Go: a blank line and "goroutine 1 [running]:" come before the frames)
                tb = next((after[g] for g in range(g_end + 1, g_end + 7) if g in after), None)
            if tb is not None:
                used_tbs.add(id(tb))
                if tb.exc_g is not None:
                    scan.claimed.add(tb.exc_g)
                if tb.frames:
                    # A later block still has these frames but maybe not the lines below them
                    # (no exception line found then): the innermost frame marks them as used.
                    scan.claimed.add(tb.frames[0][0])
            exc = scan.errors.get(g_start)
            cands: list[_Candidate] = []
            for hit in cluster:
                for rec_idx in hit.records:
                    cand = self._score_hit(hit, self._record(rec_idx), tb, exc)
                    if cand is not None:
                        cands.append(cand)
            if tb is not None and tb.exc_g is not None:
                cands.extend(self._frame_candidates(scan, tb, scan.errors.get(tb.exc_g)))
            self._emit(scan, cands, top, min_score)
        # Tracebacks whose message matched no pattern: the raise site may still name the record.
        for t in tbs:
            if id(t) in used_tbs or not t.frames:
                continue
            g_key = t.exc_g if t.exc_g is not None else t.frames[0][0]
            if upto is not None and g_key >= upto - LOOKAHEAD_LINES:
                continue  # wait until the hits around it are settled
            inner_g = t.frames[0][0]
            if g_key in scan.claimed or inner_g in scan.claimed:
                continue
            if any(h.g_start <= g_key <= h.g_end for h in scan.hits):
                continue
            if g_key in scan.tb_done or inner_g in scan.tb_done:
                continue
            scan.tb_done.update((g_key, inner_g))
            exc = scan.errors.get(t.exc_g) if t.exc_g is not None else None
            if self._emit(scan, self._frame_candidates(scan, t, exc), top, min_score):
                scan.claimed.add(g_key)
        self._fuzzy_pass(scan, upto, tbs, by_exc, top, min_score)
        if upto is not None:
            self._prune(scan, upto)

    def _is_source_line(self, scan: _Scan, hit: _Hit) -> bool:
        """A traceback's quoted source line (`raise KeyError(f"None of {missing} ...")`) holds the
        message template, not an error that happened."""
        li = hit.g_start - scan.g0
        line = scan.lines[li] if 0 <= li < len(scan.lines) else hit.subject
        bare = logtext.strip_prefix(line)
        if SOURCE_LINE_RE.match(line) or SOURCE_LINE_RE.match(bare):
            return True
        if (CODE_LINE_RE.match(line) or CODE_LINE_RE.match(bare)) and any(
            g in scan.frames for g in range(hit.g_start - CODE_CONTEXT, hit.g_start + CODE_CONTEXT)
        ):
            return True
        if any(UNFILLED_RE.fullmatch(c) for c in hit.captures):
            return True  # a template placeholder, as written in the source: `{missing}`
        if bare.lstrip()[:1] in BOX_CHARS:
            return True
        above = scan.frames.get(hit.g_start - 1)
        if above is not None and above[1].style == "python" and bare[:1] in (" ", "\t"):
            return True
        if NUMBERED_SOURCE_RE.match(bare):
            # IPython's numbered context lines under "File ...:N, in f(...)"
            return any(
                scan.frames.get(g, (0, None))[1] is not None
                for g in range(hit.g_start - 1, hit.g_start - FRAME_GAP_JUPYTER - 1, -1)
            )
        return False

    def _prune(self, scan: _Scan, upto: int) -> None:
        floor = min([h.g_start for h in scan.hits] + [upto]) - LOOKBACK_LINES
        for g in [g for g in scan.frames if g < floor]:
            del scan.frames[g]
        for g in [g for g in scan.errors if g < floor]:
            del scan.errors[g]
        scan.headers = {g for g in scan.headers if g >= floor}
        scan.attempted = {a for a in scan.attempted if a[1] >= floor}
        scan.claimed = {g for g in scan.claimed if g >= floor}
        scan.tb_done = {g for g in scan.tb_done if g >= floor}
        scan.fuzzy_lines = {g for g in scan.fuzzy_lines if g >= floor}

    def _frame_evidence(self, rec: _Record, tb: _Tb | None) -> tuple[float, list[str], bool]:
        """(combined weight, evidence, user_code) from a traceback for one record."""
        if tb is None or not tb.frames:
            return 0.0, [], False
        weight = 0.0
        evidence: list[str] = []
        rec_pkg = rec.file_path.split("/", 1)[0] if "/" in rec.file_path else ""
        package_seen = False
        for _g, _line_no, frame in tb.frames:
            path = frame.norm_path
            if rec.file_path and (path == rec.file_path or path.endswith("/" + rec.file_path)):
                delta = abs(frame.line - rec.line_number)
                w = (
                    W_FRAME_EXACT
                    if delta == 0
                    else W_FRAME_NEAR
                    if delta <= FRAME_NEAR_LINES
                    else W_FRAME_FILE
                    if delta <= FRAME_FILE_LINES
                    else W_FRAME_FILE / 2
                )
                if w > weight:
                    weight = w
                    evidence = [f"frame:{rec.file_path}:{frame.line}"]
            elif rec_pkg and ("/" + rec_pkg + "/") in ("/" + path):
                package_seen = True
        if package_seen and not evidence:
            evidence.append(f"package:{rec_pkg}")
            weight = W_PACKAGE
        innermost = tb.frames[0][2]
        user = not evidence and self._is_user_code(innermost)
        if not evidence and not user and rec_pkg:
            # Raised inside another library's code: most likely that library's own error.
            inner_pkg = _package_of(innermost)
            if inner_pkg and inner_pkg != rec_pkg:
                return FOREIGN, [], False
        return weight, evidence, user

    def _is_user_code(self, frame: Frame) -> bool:
        path = frame.path.replace("\\", "/")
        if LIB_PATH_RE.search(path) or path.startswith("<"):
            return False
        return self._file_records(frame) is None

    def _score_hit(
        self, hit: _Hit, rec: _Record, tb: _Tb | None, exc: tuple[str, str] | None
    ) -> _Candidate | None:
        evidence: list[str] = []
        factors: list[float] = []
        generic = False
        if hit.method == "pattern":
            pat = self._pattern(hit.pattern)
            generic = pat.generic
            spec = min(1.0, pat.literal_chars / 40.0)
            base = 0.3 if generic else 0.45 + 0.35 * spec
            evidence.append("pattern")
            if hit.whole:
                factors.append(W_WHOLE)
                evidence.append("whole-message")
        else:
            code = hit.code or ""
            base = 0.6 if (len(code) >= 5 and any(c.isdigit() or c == "_" for c in code)) else 0.45
            evidence.append(f"code:{code}")
        cls = _class_on_line(hit.subject, rec.error_class)
        if cls is True:
            factors.append(W_CLASS if hit.method == "pattern" else W_CODE_CLASS)
            evidence.append("error-class")
        conflict = cls is False
        w_frame, f_evidence, user = self._frame_evidence(rec, tb)
        foreign = w_frame == FOREIGN
        if w_frame > 0:
            factors.append(w_frame)
            evidence.extend(f_evidence)
        module = _module_of(exc[0] if exc else None, hit.subject)
        rec_pkg = rec.file_path.split("/", 1)[0] if "/" in rec.file_path else ""
        if module and rec_pkg and not f_evidence:
            if module == rec_pkg:
                factors.append(W_PACKAGE)
                evidence.append(f"package:{rec_pkg}")
            elif module in self._known_packages():
                conflict = True
        score = 1.0 - (1.0 - base) * _prod(1.0 - f for f in factors)
        if conflict:
            score *= CLASS_CONFLICT
        if foreign:
            score *= FOREIGN_FACTOR
        if cls is not True and not f_evidence and hit.level not in ERROR_LEVELS:
            # Nothing says an exception happened here: an INFO line, or a message's words
            # inside a longer sentence, is more likely chatter than the error.
            score *= LEVEL_FACTORS.get(hit.level or "", 1.0)
            if not hit.whole:
                score *= PARTIAL_FACTOR
        if user:
            # Raised in the user's own code (the innermost frame is theirs and no frame is in
            # the record's package): their raise, or Python's, not this library's.
            return None
        if not f_evidence and hit.method == "pattern" and _is_builtin_message(hit.subject):
            return None  # Python's own message: without a frame, no library can claim it
        if generic and not f_evidence:
            score = min(score, GENERIC_CAP)
        if hit.method == "pattern" and cls is not True and not f_evidence:
            # Nothing but the words: they must say most of what they matched. A short template
            # whose placeholders swallowed most of the text ("Could not find {a}.{b}" on pip's
            # "Could not find a version that satisfies the requirement ...") is too thin alone.
            pat = self._pattern(hit.pattern)
            values = sum(len(value) for value in hit.captures)
            said = pat.literal_chars / max(1, pat.literal_chars + values)
            if pat.literal_chars < THIN_LITERAL_CHARS and said < THIN_SHARE:
                score *= THIN_FACTOR
        return _Candidate(rec, min(score, MAX_SCORE), hit.method, evidence, hit)

    def _frame_candidates(
        self, scan: _Scan, tb: _Tb, exc: tuple[str, str] | None
    ) -> list[_Candidate]:
        """Records raised exactly (or nearly) at the traceback's innermost frame."""
        _g, line_no, frame = tb.frames[0]
        g_at = tb.exc_g if tb.exc_g is not None else _g
        li = g_at - scan.g0
        if 0 <= li < len(scan.line_nos):
            line_no = scan.line_nos[li]
        found = self._file_records(frame)
        if found is None:
            return []
        path, entries = found
        out: list[_Candidate] = []
        self._load_records(
            rec_idx
            for line_number, rec_idx in entries
            if abs(frame.line - line_number) <= FRAME_NEAR_LINES
        )
        for line_number, rec_idx in entries:
            delta = abs(frame.line - line_number)
            if delta > FRAME_NEAR_LINES:
                continue
            rec = self._record(rec_idx)
            base = 0.55 if delta == 0 else 0.42 - 0.03 * delta
            evidence = [f"frame:{path}:{frame.line}"]
            factors = []
            if exc is not None and rec.error_class:
                if exc[0].rpartition(".")[2] == rec.error_class:
                    factors.append(W_CLASS)
                    evidence.append("error-class")
                else:
                    base *= CLASS_CONFLICT
            score = 1.0 - (1.0 - base) * _prod(1.0 - f for f in factors)
            hit = _Hit(
                g_at,
                g_at,
                line_no,
                line_no,
                "frame",
                -1,
                [rec_idx],
                exc[1] if exc else "",
                [],
                False,
            )
            out.append(_Candidate(rec, min(score, MAX_SCORE), "frame", evidence, hit))
        return out

    def _emit(self, scan: _Scan, cands: list[_Candidate], top: int, min_score: float) -> bool:
        """Turn the best candidate for one place in the log into a Match, if it scores enough."""
        if not cands:
            return False
        best_by_id: dict[str, _Candidate] = {}
        for cand in cands:
            old = best_by_id.get(cand.rec.id)
            if old is None or cand.score > old.score:
                best_by_id[cand.rec.id] = cand
        ranked = sorted(
            best_by_id.values(),
            key=lambda c: (-c.score, -_literal(self, c), c.rec.idx),
        )
        best = ranked[0]
        if best.score < min_score or best.hit is None:
            return False
        hit = best.hit
        g = hit.g_start
        if best.method == "frame" and any(
            m.id == best.rec.id and abs(m.line - hit.line) <= FRAME_ONLY_NEAR for m in scan.matches
        ):
            return False  # its message was matched nearby (printed before the traceback, say)
        scan.claimed.add(g)
        if best.method == "frame" and hit.line == hit.end_line and hit.subject == "":
            text = scan.lines[g - scan.g0] if 0 <= g - scan.g0 < len(scan.lines) else ""
        else:
            text = hit.subject
        names: list[str | None] = []
        if hit.method == "pattern":
            names = list(self._pattern(hit.pattern).names)
            if len(names) != len(hit.captures):
                names = [None] * len(hit.captures)
        # Near-duplicates that tie with the best (same message, nothing in the log to tell them
        # apart) are all listed, then the next best up to `top` records in all.
        all_ties = [c for c in ranked[1:] if c.score >= best.score - 1e-9]
        ties = all_ties[:MAX_TIES]
        rest = ranked[1 + len(all_ties) :][: max(0, top - 1 - len(ties))]
        alternatives = [(c.rec.id, round(c.score, 3)) for c in ties + rest]
        match = Match(
            id=best.rec.id,
            score=round(best.score, 3),
            method=best.method,
            line=hit.line,
            end_line=hit.end_line,
            text=clip(logtext.strip_prefix(text), TEXT_MAX_CHARS),
            captures=hit.captures,
            capture_names=names,
            evidence=best.evidence,
            alternatives=alternatives,
            suggestion=_suggest(hit.captures),
            duplicates=[c.rec.id for c in all_ties[:MAX_DUPLICATES]],
        )
        # The same error again (a retry, pytest's short summary): one match, its other lines kept,
        # the best-evidenced reading of it kept.
        key = (match.id, tuple(match.captures)) if match.captures else (match.id, ())
        seen = (
            scan.by_key.get(key)
            or scan.by_line.get((match.id, match.line))
            or _truncated_repeat(scan.matches, match)
        )
        if seen is not None:
            if match.line != seen.line and match.line not in seen.other_lines:
                # (one line read twice, as a JSON record and unpacked, is one occurrence)
                seen.occurrences += 1
                if len(seen.other_lines) < MAX_OTHER_LINES:
                    seen.other_lines.append(match.line)
            if match.score > seen.score:
                seen.score = match.score
                seen.method = match.method
                seen.evidence = match.evidence
                seen.alternatives = match.alternatives
                seen.duplicates = match.duplicates
            return True
        scan.by_key[key] = match
        scan.by_line[(match.id, match.line)] = match
        scan.matches.append(match)
        return True

    # ---- fuzzy near misses ----------------------------------------------------------------

    def _fuzzy_pass(
        self,
        scan: _Scan,
        upto: int | None,
        tbs: list[_Tb],
        by_exc: dict[int, _Tb],
        top: int,
        min_score: float,
    ) -> None:
        done = {m.line for m in scan.matches}
        errors = scan.errors
        if upto is None and scan.lines_total <= SHORT_PASTE_LINES:
            # A short paste is about its errors: any line may be a message, even without a class.
            errors = dict(errors)
            for li, line in enumerate(scan.lines):
                g = scan.g0 + li
                bare = logtext.strip_prefix(line)
                if g in errors or len(bare) < FUZZY_MIN_CHARS or bare[:1].isspace():
                    continue
                if not SOURCE_LINE_RE.match(bare):
                    errors[g] = ("", bare)
        for g in sorted(errors):
            if upto is not None and g >= upto:
                break
            if g in scan.claimed or g in scan.fuzzy_lines:
                continue
            scan.fuzzy_lines.add(g)
            li = g - scan.g0
            if not 0 <= li < len(scan.lines) or scan.line_nos[li] in done:
                continue
            cls, message = errors[g]
            if cls.endswith("KeyError"):
                message = logtext.unrepr_message(message) or message
            query = _norm_template(message)
            if len(query) < FUZZY_MIN_CHARS:
                continue
            if query in scan.fuzzy_cache:
                found = scan.fuzzy_cache[query]
            elif scan.fuzzy_queries >= FUZZY_MAX_QUERIES:
                continue
            else:
                scan.fuzzy_queries += 1
                found = scan.fuzzy_cache[query] = self._fuzzy_lookup(query)
            if not found:
                continue
            tb = by_exc.get(g)
            builtin = _is_builtin_message(f"{cls}: {message}" if cls else message)
            cands: list[_Candidate] = []
            for plain, gap, p_idx in found:
                pat = self._pattern(p_idx)
                for rec_idx in pat.records:
                    rec = self._record(rec_idx)
                    # Placeholders count as free (gap) only where the exception class agrees:
                    # a class-less line must read almost the same as the template.
                    agrees = bool(rec.error_class) and cls.rpartition(".")[2] == rec.error_class
                    similarity = gap if agrees else plain
                    if similarity * 100 < (FUZZY_CUTOFF if cls else FUZZY_CLASSLESS_CUTOFF):
                        continue
                    base = 0.62 * similarity
                    factors: list[float] = []
                    evidence = [f"fuzzy:{similarity:.2f}"]
                    if agrees:
                        factors.append(0.2)
                        evidence.append("error-class")
                    w, f_ev, user = self._frame_evidence(rec, tb)
                    if user or (builtin and not f_ev):
                        continue  # the user's own raise, or Python's message (see _score_hit)
                    if w > 0:
                        factors.append(w)
                        evidence.extend(f_ev)
                    score = 1.0 - (1.0 - base) * _prod(1.0 - f for f in factors)
                    if cls and rec.error_class and not agrees and not f_ev:
                        score *= CLASS_CONFLICT  # another class printed: likely another error
                    hit = _Hit(
                        g,
                        g,
                        scan.line_nos[li],
                        scan.end_nos[li],
                        "fuzzy",
                        p_idx,
                        [rec_idx],
                        logtext.strip_prefix(scan.lines[li]),
                        [],
                        False,
                    )
                    cands.append(_Candidate(rec, min(score, 0.9), "fuzzy", evidence, hit))
            self._emit(scan, cands, top, min_score)

    def _fuzzy_lookup(self, query: str) -> list[tuple[float, float, int]]:
        from rapidfuzz import fuzz, process

        if self._fuzzy is None:
            items = self._con.execute("SELECT t, p FROM fuzzy ORDER BY rowid").fetchall()
            self._fuzzy = ([t for t, _ in items], [p for _, p in items])
        templates, pats = self._fuzzy
        # A wide shortlist by plain similarity, then each rescored with its placeholders free
        # to hold any value: "Unknown transport: amqps2. Did you mean amqps?" reads as
        # "No such transport: {transport}.  Did you mean {alt}?" with two words changed, which
        # plain similarity (the values count as differences) puts below the cutoff.
        results = process.extract(
            query,
            templates,
            scorer=fuzz.ratio,
            score_cutoff=FUZZY_SHORTLIST_CUTOFF,
            limit=FUZZY_SHORTLIST,
        )
        scored: list[tuple[float, float, int]] = []
        for _t, score, i in results:
            p_idx = pats[i]
            records = self._pattern(p_idx).records
            template = _gap_template(self._record(records[0]).error_message) if records else ""
            plain = score / 100.0
            gap = max(plain, _gap_similarity(template, query))
            if gap * 100 >= FUZZY_CUTOFF:
                scored.append((plain, gap, p_idx))
        scored.sort(key=lambda item: -item[1])
        return scored[:5]


# --------------------------------------------------------------------------------------------
# Helpers


_GAP = "\x00"  # stands for a placeholder in a template being aligned with a log line


def _gap_template(error_message: str) -> str:
    """The message template normalised like a query, each placeholder kept as one _GAP."""
    from kb.patterns import message_pieces

    text = "".join(_GAP if piece is None else piece for piece in message_pieces(error_message))
    return _norm_template(text)


def _gap_similarity(template: str, query: str) -> float:
    """Indel similarity of a log line to a template whose placeholders absorb any value.

    Text inserted where the template has a placeholder costs nothing; everything else (words
    changed, added or removed) costs as usual. At most half the line may be such free values,
    so a template of mostly placeholders cannot claim an unrelated line."""
    if _GAP not in template or not query:
        return 0.0
    from rapidfuzz.distance import Indel

    free = cost = 0
    for op in Indel.opcodes(template, query):
        if op.tag == "equal":
            continue
        i1, i2, j1, j2 = op.src_start, op.src_end, op.dest_start, op.dest_end
        source = template[i1:i2]
        # Free only where a value stands in for a placeholder, not where it also replaces
        # the template's own words ("Process {x} died" is not "Process completed").
        at_gap = not source.replace(_GAP, "").strip() and (
            _GAP in source
            or (i1 > 0 and template[i1 - 1] == _GAP)
            or (i2 < len(template) and template[i2] == _GAP)
        )
        cost += len(source.replace(_GAP, ""))
        if at_gap:
            free += j2 - j1
        else:
            cost += j2 - j1
    if free * 2 > len(query):
        return 0.0
    total = len(template.replace(_GAP, "")) + len(query) - free
    return 1.0 - cost / total if total else 0.0


_ELLIPSIS_RE = re.compile(r"(?:\.\.\.|…)['\"]?$")


def _truncated_repeat(matches: Sequence[Match], match: Match) -> Match | None:
    """An earlier match of the same record whose values this one repeats cut short, as
    pytest's short test summary does ("Invalid version: '2.1.0-...")."""
    for seen in matches:
        if seen.id != match.id or len(seen.captures) != len(match.captures):
            continue
        if all(_same_or_cut(a, b) for a, b in zip(seen.captures, match.captures, strict=True)):
            return seen
    return None


def _same_or_cut(a: str, b: str) -> bool:
    if a == b:
        return True
    for full, cut in ((a, b), (b, a)):
        stem = _ELLIPSIS_RE.sub("", cut)
        if stem != cut and full.startswith(stem):
            return True
    return False


# Pure functions of the line, asked once per record of every hit (a message raised in many
# files has many records): the answers for the last lines are kept.
@functools.lru_cache(maxsize=256)
def _is_builtin_message(subject: str) -> bool:
    return BUILTIN_MESSAGE_RE.match(logtext.strip_prefix(subject).lstrip()) is not None


def _prod(values: Iterable[float]) -> float:
    out = 1.0
    for v in values:
        out *= v
    return out


def _literal(index: MatcherIndex, cand: _Candidate) -> int:
    if cand.hit is not None and cand.hit.method == "pattern":
        return index._pattern(cand.hit.pattern).literal_chars
    return 0


def _service(scan: _Scan, g: int) -> str | None:
    """The docker compose service a line came from ("api-1" of "api-1  | ..."), if any."""
    li = g - scan.g0
    if not 0 <= li < len(scan.lines):
        return None
    m = SERVICE_RE.match(scan.lines[li])
    return m.group(1) if m else None


def _package_of(frame: Frame) -> str | None:
    """The top-level package a library frame is in (the directory under site-packages)."""
    m = PACKAGE_RE.search(frame.path)
    return m.group(1).split(".", 1)[0] if m else None


@functools.lru_cache(maxsize=256)
def _module_of(printed: str | None, subject: str) -> str | None:
    """The top-level package of a dotted exception class ("sqlalchemy.exc.NoResultFound")."""
    if printed is None:
        exc = logtext.exception_of(subject)
        printed = exc[0] if exc else None
    if not printed or "." not in printed:
        # a class is printed where the message starts: no need to search a megabyte line
        m = DOTTED_CLASS_RE.search(subject, 0, CLASS_SEARCH_CHARS)
        printed = m.group(1) + "." if m else None
    if not printed:
        return None
    top = printed.split(".", 1)[0]
    return None if top in ("builtins", "__main__") else top


@functools.lru_cache(maxsize=256)
def _class_on_line(subject: str, error_class: str | None) -> bool | None:
    """True when the record's class is printed before the message, False when another
    exception class is, None when the line names none."""
    exc = logtext.exception_of(subject)
    if exc is None:
        if error_class and (subject.startswith(error_class + ":") or f".{error_class}:" in subject):
            return True
        return None
    printed = exc[0].rpartition(".")[2]
    if not error_class:
        return None
    return bool(printed == error_class or f"{error_class}:" in subject)


def _covers_message(subject: str, start: int, end: int, leading: bool = False) -> bool:
    """Whether a match spans the message from its start (after "Class: ") to the line's end.
    A pattern opening with a placeholder covers anything, unless a class marks the start."""
    exc = logtext.exception_of(subject)
    if leading and exc is None:
        return False
    msg_start = len(subject) - len(exc[1]) if exc else 0
    tail = subject[end:].strip().rstrip(".")
    return start <= msg_start + 1 and not tail


def _captures(m: Any, subject: str) -> list[str]:
    """Captured values as a person reads them: the log's prefix and the exception class cut off
    a leading group, whitespace trimmed."""
    out: list[str] = []
    for i in range(1, (m.re.groups if hasattr(m, "re") else 0) + 1):
        value = m.group(i)
        if value is None:
            out.append("")
            continue
        if i == 1 and m.start(1) == 0:
            exc = logtext.exception_of(value + " ")
            if exc is not None:
                value = exc[1] if exc[1] else value
        out.append(value.strip())
    return out


def _suggest(captures: Sequence[str]) -> str | None:
    """'did you mean' when one capture lists the valid choices and another is the bad value."""
    if len(captures) < 2:
        return None
    for i, listed in enumerate(captures):
        choices = [c.strip(_CHOICE_TRIM) for c in _CHOICE_SPLIT.split(listed)]
        choices = [c for c in choices if c and len(c) <= 80]
        if len(choices) < 3:
            continue
        for j, value in enumerate(captures):
            bad = value.strip(_CHOICE_TRIM)
            if j == i or not bad or len(bad) > 80 or bad in choices:
                continue
            from rapidfuzz import fuzz, process

            best = process.extractOne(bad, choices, scorer=fuzz.WRatio, score_cutoff=80)
            if best is not None:
                return f"did you mean '{best[0]}'?"
    return None


def sources_from_records(records: Iterable[dict[str, Any]]) -> Iterator[PatternSource]:
    """PatternSource for dataset records in their own keys (what the importer and tests have)."""
    for rec in records:
        yield PatternSource(
            id=rec["id"],
            repo=rec.get("repo", ""),
            message_pattern=rec.get("messagePattern") or "",
            error_message=rec.get("errorMessage") or "",
            error_class=rec.get("errorClass"),
            error_code=rec.get("errorCode"),
            file_path=rec.get("filePath") or "",
            line_number=int(rec.get("lineNumber") or 0),
        )
