"""Building the matcher's cache: every record's pattern prepared, the prefilter compiled.

The only part of the matcher that needs kb.patterns and kb.relax (to prepare patterns),
hashlib and tempfile; a match only reads what this wrote (kb.matcher.cache). Run once per
knowledge-base revision, right after an import.
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
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from kb import logline
from kb.jsontext import std_dumps
from kb.matcher.anchors import BUCKET_KEYS, anchor_of, bitmap_of
from kb.matcher.cache import (
    CODE,
    INDEXES,
    MARKERS,
    PATTERN,
    SCHEMA,
    TEMPLATE_MIN_CHARS,
    normalize_template,
    words_of,
)
from kb.matcher.cachefile import CACHE_FILE, FORMAT_VERSION
from kb.matcher.fuzzyrows import write_templates, write_words
from kb.matcher.keydb import ShardWriter, compiled, release_memory
from kb.pacing import FEWER_COLLECTIONS
from kb.patterns import (
    GENERIC_LITERAL_CHARS,
    MIN_KEY_CHARS,
    PreparedPattern,
    backtracking_unbounded,
    message_pieces,
    prepare,
)
from kb.relax import relax
from kb.sql import select_in

if TYPE_CHECKING:
    from kb.matcher.index import MatcherIndex

# The schema of the digests that recognise a pattern or a template seen in an earlier chunk:
# a database in memory, detached after the last row. In the temporary tables, behind SQLite's
# 2 MB page cache, their random keys were read and written back through the temporary file:
# at 1M records their inserts took 8.5 s and the build 12.3 s of system time, against 4.2 s
# and 6.6 s in memory (2026-12-06). The database holds 3.8 MB at 150,000 records and 25 MB
# at 1M while rows come; the build's peak is its key workers' after (265-273 MB at 1M).
SEEN: Final = "seen"
# What upstream writes as filePath when the analysis found no file: no frame can be in it.
UNKNOWN_FILE: Final = "unknown"
# Records a build holds before writing them to the cache: bounds its memory, amortises inserts.
BUILD_CHUNK = 2_000
# The latest (messagePattern, errorMessage) pairs a build prepared, with their digests: one
# error raised in several places of a repository comes with one pattern, its records read
# close together. In the shared corpus 27% of the records repeat a pair; the last 4,096 pairs
# catch 73% of the repeats (27,245 of 37,444 at 150,000 records), a prepare() and a digest of
# about 14 us each saved (0.4 s of the build's 11 s of CPU there). A pair holds about 1 KB.
PREPARED_MEMO: Final = 4096
# The longest prefilter key: Hyperscan refuses literals past about 16,000 bytes, and a key this
# long (the longest key of the 69,652-record corpus is 597 characters) already
# says all a key can. Four bytes a character at most, well under the limit.
MAX_KEY_CHARS: Final = 2000
# Keys per Hyperscan database. Each database is a pass over the log, and a larger one costs
# little more than a smaller (big.log, 21.9 MB, at 1M records: 56k keys 16.7 ms, 111k keys
# 22.2 ms, 223k keys 31.2 ms a pass), so shards are as few as memory allows. Compiling holds
# about 2.3 KB a key at its peak (100k keys 262 MB, 110k keys 284 MB in a fresh process), paid
# by a worker process of its own (kb.matcher.keydb), so this keeps every process of `kb import`
# under 300 MB. At 1M records (669k keys) 7 shards, not 12 of 56k: a pass over big.log 146 ms
# against 206, the cold `kb match` of it 0.508 s against 0.536 (15 pairs); at 150,000 records
# (104k keys) one shard, not two: 31 ms against 49-64, cold 0.327 s against 0.351 (2026-12-04).
SHARD_KEYS = 110_000
# Shards are cut from the keys in order of length, so that each holds keys of like length: at
# 1M records (669k keys in 12 shards) one pass of the 12 over 8 MB of big.log took 184.8 ms
# against 293.6 ms with the keys in the order they were first seen, and the databases took
# 78 MB against 95 MB (the same hits).

# Words shaped like codes that name log levels, outcomes or protocols, never error codes.
NOT_CODES: Final = frozenset(logline.LEVELS) | {
    "OK", "FAIL", "FAILED", "FAILURE", "SUCCESS", "PASS", "PASSED", "TRUE", "FALSE", "NONE",
    "NULL", "GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS", "HTTP", "HTTPS", "UTC",
    "GMT", "JSON", "XML", "SQL", "API", "URL",
}  # fmt: skip
MIN_CODE_CHARS: Final = 3  # shorter codes ("E1") are everywhere in logs
# Where a record says which function raised it: its source code (the last `def` above the
# raise), else its documentation naming the function beside the record's file
# ("... by `DataFrame.set_index` (pandas/core/frame.py)").
DEF_RE: Final = re.compile(r"^\s*(?:async\s+)?(?:def|function|func|fn)\s+(\w+)\s*[(<]", re.M)
DOC_FUNCTION_RE: Final = re.compile(r"`([A-Za-z_][\w.]*)` \(([^()`\s]+)\)")


# Not frozen: a frozen dataclass sets each field through object.__setattr__, and a build
# makes one a record (150,000 in 0.23 s frozen, 0.08 s as it is; 2026-12-06).
@dataclass(slots=True)
class PatternSource:
    """One record, as the matcher needs it."""

    id: str
    repo: str
    message_pattern: str
    error_message: str
    error_class: str | None
    error_code: str | None
    file_path: str
    line_number: int | None  # None: the dataset gives no line (upstream's analysis found none)
    prepared: PreparedPattern | None = None
    function: str | None = None  # the raising function's name (raising_function)


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
            line_number=rec.get("lineNumber"),
            function=raising_function(
                file_path=rec.get("filePath") or "",
                line_number=rec.get("lineNumber"),
                source_code=rec.get("sourceCode"),
                source_start=rec.get("sourceCodeStart"),
                documentation=rec.get("documentation"),
            ),
        )


def raising_function(
    *,
    file_path: str,
    line_number: int | None,
    source_code: str | None,
    source_start: int | None,
    documentation: str | None,
) -> str | None:
    """The name of the function that raises a record's error (as a stack frame prints it: the
    last part of `Class.method`), or None when the record does not say.

    From the record's source code when it has the raise line (the last definition above it),
    else from its documentation where it names a function beside the record's own file."""
    if source_code and source_start and line_number and line_number >= source_start:
        above = "\n".join(source_code.splitlines()[: line_number - source_start + 1])
        defined = DEF_RE.findall(above)
        if defined:
            return str(defined[-1])
    if documentation and file_path:
        for m in DOC_FUNCTION_RE.finditer(documentation, 0, 2000):
            if m.group(2) == file_path:
                name = m.group(1).rpartition(".")[2]
                return name if not name.startswith("<") else None
    return None


def fuzzy_template(error_message: str) -> str:
    """The literal words of a message template, as the near-miss search compares them."""
    literal = " ".join(p for p in message_pieces(error_message) if p is not None)
    return normalize_template(literal)


def build_index(sources: Iterable[PatternSource], cache_dir: Path, revision: str) -> MatcherIndex:
    """write_index, then load what it wrote."""
    from kb.matcher.index import load_index

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
    release_memory()
    cache_dir = Path(cache_dir)
    cache_dir.mkdir(parents=True, exist_ok=True)
    # A killed build's temporary file is removed by the next build (kb.matcher.lock).
    fd, tmp_name = tempfile.mkstemp(prefix=".matcher-", suffix=".tmp", dir=cache_dir)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        write_cache_file(sources, tmp, revision, progress)
        os.replace(tmp, cache_dir / CACHE_FILE)
        with contextlib.suppress(OSError):  # some file systems cannot sync a folder
            sync_path(cache_dir)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_cache_file(
    sources: Iterable[PatternSource],
    path: Path,
    revision: str,
    progress: Callable[[int], None] | None = None,
    *,
    synced: bool = True,
) -> None:
    """The cache for `revision` written to `path` (an empty or new file) and, unless not
    `synced` (the caller then syncs it with sync_path before the rename), synced to the disk,
    ready to be renamed into place; the caller removes it when this raises."""
    with FEWER_COLLECTIONS:
        _write_cache_file(sources, path, revision, progress)
    if synced:
        # Written without a journal or syncs (a failed build is thrown away whole), so the
        # file reaches the disk before it takes the cache's name: after a crash or a power
        # cut the name holds the old cache or the new one, never a part of the new.
        sync_path(path)


def _write_cache_file(
    sources: Iterable[PatternSource],
    path: Path,
    revision: str,
    progress: Callable[[int], None] | None,
) -> None:
    started = time.perf_counter()
    con = sqlite3.connect(path)
    con.execute("PRAGMA journal_mode=OFF")
    con.execute("PRAGMA synchronous=OFF")
    # SQLite's default page cache (2 MB) for the temporary tables too: 64 MB held them at
    # 150,000 records (188,000 page reads of 4 KB gone, the build's CPU 11.4 to 10.6 s), but
    # the build beside a 1M import then peaked at 342 MB (the target is 300), and the import
    # waited no less: the build is not its critical path (2026-12-05, reverted).
    con.executescript(SCHEMA)
    writer = _RowWriter(con)
    try:
        kinds = _write_rows(writer, sources, progress)
    except BaseException:
        writer.abandon()
        raise
    meta = {
        "format": str(FORMAT_VERSION),
        "revision": revision,
        "records": str(writer.n_records),
        "patterns": str(writer.n_patterns),
        "kinds": json.dumps(_kind_ranges(kinds)),
        "shard_bytes": str(writer.shard_bytes),
        "packages": json.dumps(sorted(writer.packages)),
        "built_s": f"{time.perf_counter() - started:.3f}",
    }
    con.executemany("INSERT INTO meta VALUES (?,?)", list(meta.items()))
    con.commit()
    con.close()


def _write_rows(
    writer: _RowWriter,
    sources: Iterable[PatternSource],
    progress: Callable[[int], None] | None,
) -> list[str]:
    """Every record's rows, the keys numbered and compiled, the templates and their words;
    the kind of every key id."""
    pending: list[tuple[int, PatternSource, PreparedPattern, int | None]] = []
    prepared = functools.lru_cache(maxsize=PREPARED_MEMO)(_prepared)
    for rec_idx, src in enumerate(sources):
        writer.n_records = rec_idx + 1
        if src.prepared is not None:
            prep, digest = src.prepared, _pattern_digest(src.prepared)
        else:
            prep, digest = prepared(src.message_pattern, src.error_message)
        pending.append((rec_idx, src, prep, digest))
        if len(pending) >= BUILD_CHUNK:
            writer.write(pending)
            if progress is not None:
                progress(len(pending))
            pending.clear()
    writer.write(pending)
    if progress is not None and pending:
        progress(len(pending))
    kinds = writer.finish()
    # The templates, words and indexes are written while the last shard compiles in its
    # worker (the keys' anchors are final: finish() looked them up).
    write_templates(writer.con, BUILD_CHUNK)
    write_words(writer.con, writer.templates)
    writer.con.executescript(INDEXES)
    writer.shards_written()
    return kinds


def sync_path(path: Path) -> None:
    """Flush a file, or a folder's entries (a rename), to the disk."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _prepared(message_pattern: str, error_message: str) -> tuple[PreparedPattern, int | None]:
    prep = prepare(message_pattern, error_message)
    return prep, _pattern_digest(prep)


def _pattern_digest(prep: PreparedPattern) -> int | None:
    """A 64-bit digest of (engine, regex) that recognises a pattern seen in an earlier chunk
    (None for a record that cannot match by pattern)."""
    if prep.regex is None or not prep.keys:
        return None
    digest = hashlib.blake2b(
        f"{prep.engine}\0{prep.regex}".encode("utf-8", "surrogatepass"), digest_size=8
    ).digest()
    return int.from_bytes(digest, signed=True)  # an SQLite INTEGER


class _RowWriter:
    """Writes records and their patterns to the cache a chunk at a time, then the keys.

    Streamed: rows go to the cache in chunks and the per-key / per-pattern lists are grouped by
    SQLite at the end, so memory stays flat in the record count (what grows in Python is the
    error codes and the kind of each key)."""

    def __init__(self, con: sqlite3.Connection) -> None:
        self.con = con
        con.executescript(
            f"""
            CREATE TEMP TABLE prec (p INTEGER, rec INTEGER);
            CREATE TEMP TABLE kp (key TEXT, p INTEGER, a BLOB);
            CREATE TEMP TABLE fz (t TEXT, p INTEGER, n INTEGER);
            CREATE TEMP TABLE tw (w TEXT, n INTEGER, r TEXT);
            ATTACH ':memory:' AS {SEEN};
            CREATE TABLE {SEEN}.pid (ident INTEGER PRIMARY KEY, p INTEGER);
            CREATE TABLE {SEEN}.fzh (h INTEGER PRIMARY KEY);
            """
        )
        self.n_patterns = 0
        self.n_records = 0
        self.templates = 0  # distinct near-miss templates (rows of fz) listed in tw so far
        self._fz_rowid = 0  # the last row of fz listed in tw
        self.shard_bytes = 0
        self._shards: ShardWriter | None = None  # once finish() has numbered the keys
        self.codes: dict[str, list[int]] = {}
        self.packages: set[str] = set()

    def write(self, chunk: list[tuple[int, PatternSource, PreparedPattern, int | None]]) -> None:
        """Number the chunk's patterns, one row per distinct (engine, regex): a pattern is
        recognised across chunks by its digest looked up in SQLite, so no map of every
        pattern stays in Python (70 MB at 1M records)."""
        con = self.con
        known: dict[int, int] = {
            ident: p_idx
            for ident, p_idx in select_in(
                con.execute,
                f"SELECT ident, p FROM {SEEN}.pid WHERE ident IN ({{marks}})",
                {digest for *_, digest in chunk if digest is not None},
            )
        }
        templates: list[tuple[str, int, int]] = []  # for fz, where new (_new_templates)
        new_idents: list[tuple[int, int]] = []
        pattern_rows: list[tuple[Any, ...]] = []
        prec_rows: list[tuple[int, int]] = []
        kp_rows: list[tuple[str, int, bytes | None]] = []
        record_rows: list[tuple[Any, ...]] = []
        file_rows: list[tuple[str, int | None, int]] = []
        function_rows: list[tuple[str, int]] = []
        for rec_idx, src, prep, ident in chunk:
            if ident is not None and prep.regex is not None:
                p_idx = known.get(ident)
                if p_idx is not None:
                    prec_rows.append((p_idx, rec_idx))  # a pattern's later record
                else:
                    p_idx = known[ident] = self.n_patterns
                    self.n_patterns += 1
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
                            std_dumps(prep.placeholder_names),
                            f"[{rec_idx}]",  # its first record; later ones go through prec
                            relax(prep.regex) if guarded else None,
                            int(backtracking_unbounded(prep.regex) if guarded else 0),
                            std_dumps(prep.keys[1:]),
                        )
                    )
                    # A prefix of a required literal is required too: one past Hyperscan's
                    # limit (one dataset's 16 KB literal broke every later match) is cut.
                    key = prep.keys[0][:MAX_KEY_CHARS]
                    if len(key.strip()) >= MIN_KEY_CHARS:
                        # The key's anchor (kb.matcher.anchors) found here, while an import
                        # still sends rows, not when the keys are numbered after its last one:
                        # at 150,000 records 0.45-0.76 s less after it.
                        kp_rows.append((key, p_idx, anchor_of(key.encode("utf-8"))))
                    if prep.literal_chars >= GENERIC_LITERAL_CHARS:
                        template = fuzzy_template(src.error_message)
                        if len(template) >= TEMPLATE_MIN_CHARS:
                            templates.append((template, p_idx, len(template)))
            code = src.error_code
            if (
                code
                and MIN_CODE_CHARS <= len(code) <= MAX_KEY_CHARS
                and code not in NOT_CODES
                and "\0" not in code  # Hyperscan's bindings would cut it there (kb.patterns)
            ):
                self.codes.setdefault(code, []).append(rec_idx)
            path = src.file_path.replace("\\", "/").lstrip("./")
            if path == UNKNOWN_FILE:
                path = ""
            if path:
                file_rows.append((path, src.line_number, rec_idx))
                if "/" in path:
                    self.packages.add(path.split("/", 1)[0])
            record_rows.append(
                (
                    rec_idx,
                    src.id,
                    src.error_class,
                    path,
                    src.line_number,
                    src.error_message,
                    src.function,
                )
            )
            if src.function:
                function_rows.append((src.function, rec_idx))
        con.executemany(f"INSERT INTO {SEEN}.pid VALUES (?,?)", new_idents)
        con.executemany("INSERT INTO patterns VALUES (?,?,?,?,?,?,?,?,?,?,?,?)", pattern_rows)
        con.executemany("INSERT INTO prec VALUES (?,?)", prec_rows)
        con.executemany("INSERT INTO kp VALUES (?,?,?)", kp_rows)
        con.executemany("INSERT INTO fz VALUES (?,?,?)", self._new_templates(templates))
        self._list_words()
        con.executemany("INSERT INTO records VALUES (?,?,?,?,?,?,?)", record_rows)
        con.executemany("INSERT INTO files VALUES (?,?,?)", file_rows)
        con.executemany("INSERT INTO functions VALUES (?,?)", function_rows)

    def _new_templates(self, templates: list[tuple[str, int, int]]) -> list[tuple[str, int, int]]:
        """The (template, pattern, length) rows whose template fz does not hold yet, each
        template's first: recognised by a 64-bit digest of the text (Python's str hash, stable
        within this process, as the table is) in the SEEN database, not by the text in a key
        of fz's own: at 1M records that key's inserts took 5.2 s, the digests' 2.1 s."""
        if not templates:
            return []
        digests: dict[int, tuple[str, int, int]] = {}
        for row in templates:
            digests.setdefault(hash(row[0]), row)
        for (held,) in select_in(
            self.con.execute, f"SELECT h FROM {SEEN}.fzh WHERE h IN ({{marks}})", digests
        ):
            del digests[held]
        self.con.executemany(f"INSERT INTO {SEEN}.fzh VALUES (?)", [(h,) for h in digests])
        return list(digests.values())

    def _list_words(self) -> None:
        """The words of the templates this chunk added to fz, one row of tw a word: how many
        of them hold it and their places (comma-separated) in fz's order, the templates'
        places (kb.matcher.templates). Done chunk by chunk: beside an import
        (kb.matcher.background) this runs while the import is still sending rows, not after
        its last one (at 150,000 records, listing them all at the end took 2.9 s and
        grouping them 2 s more). A row a word and chunk, not a row a word and template: at
        150,000 records 172,734 rows, not 914,211, and the rows' insert and grouping 1.1-1.3
        s, not 4.3 (in a (word, place) table keyed by both) or 3.7-3.9 (unkeyed, sorted at
        the end)."""
        new = self.con.execute(
            "SELECT rowid, t FROM fz WHERE rowid > ? ORDER BY rowid", (self._fz_rowid,)
        ).fetchall()
        if not new:
            return
        self._fz_rowid = new[-1][0]
        places: dict[str, list[int]] = {}
        for place, (_rowid, template) in enumerate(new, self.templates):
            for word in set(words_of(template)):
                held = places.get(word)
                if held is None:
                    places[word] = [place]
                else:
                    held.append(place)
        self.templates += len(new)
        self.con.executemany(
            "INSERT INTO tw VALUES (?,?,?)",
            [(word, len(held), ",".join(map(str, held))) for word, held in places.items()],
        )

    def finish(self) -> list[str]:
        """Group each pattern's records, then number the keys and compile them shard by
        shard. Hyperscan ids: pattern keys first (shortest first; of one length, in the order
        they were first seen), then codes, then the markers. Returns the kind of every key
        id."""
        con = self.con
        codes = self.codes
        con.commit()  # a database is detached outside a transaction
        con.execute(f"DETACH {SEEN}")
        # Shortest first: each shard holds keys of like length (see SHARD_KEYS). The keys are
        # grouped once, into a table in id order whose rows count them: the count then costs
        # no second sort of kp (COUNT(DISTINCT key), 0.24 s at 150,000 records, 2026-12-05).
        # Everything the shards do not need waits until the last one compiles.
        con.execute(
            """
            CREATE TEMP TABLE kg AS
            SELECT key, json_group_array(p) AS patterns, MIN(r) AS first, MIN(a) AS anchor
            FROM (SELECT key, p, rowid AS r, a FROM kp ORDER BY key, rowid)
            GROUP BY key ORDER BY length(key), first
            """
        )
        (n_pattern_keys,) = con.execute("SELECT count(*) FROM kg").fetchone()
        n_keys = n_pattern_keys + len(codes) + len(MARKERS)
        n_shards = max(1, -(-n_keys // SHARD_KEYS))
        shards = self._shards = ShardWriter(con, -(-n_keys // n_shards))
        grouped = con.execute("SELECT key, patterns, anchor FROM kg ORDER BY rowid")
        while chunk := grouped.fetchmany(BUILD_CHUNK):
            for key, patterns, anchor in chunk:  # a key's rows share its anchor
                shards.add(key, PATTERN, patterns, anchor)
        for code in codes:
            shards.add(code, CODE, "[]", anchor_of(code.encode("utf-8")))
        for marker, kind in MARKERS:
            shards.add(marker, kind, "[]", anchor_of(marker.encode("utf-8")))
        shards.flush()
        # While the last shard compiles: each pattern's records, the codes, the lookup.
        con.executescript(
            """
            DROP TABLE kg;
            CREATE INDEX temp.prec_p ON prec (p, rec);
            UPDATE patterns SET records = rtrim(records, ']') || ',' ||
                (SELECT group_concat(rec, ',') FROM prec WHERE prec.p = patterns.idx) || ']'
            WHERE idx IN (SELECT p FROM prec);
            """
        )
        con.executemany(
            "INSERT INTO codes VALUES (?,?)", [(c, r) for c, rs in codes.items() for r in rs]
        )
        _write_lookup(con)
        return shards.kinds

    def shards_written(self) -> None:
        """Wait for the last shard's database and write it (after finish)."""
        assert self._shards is not None
        self._shards.done()
        self.shard_bytes = self._shards.bytes

    def abandon(self) -> None:
        """A failed build: no worker is left compiling for it."""
        if self._shards is not None:
            self._shards.abandon()


def _write_lookup(con: sqlite3.Connection) -> None:
    """What a short text is looked up with (kb.matcher.anchors): the bitmap of the anchors, and
    the keys that cannot be found by theirs compiled into one more database, the rest shard
    (kept apart from the others, which hold every key). An anchor shared by more than
    BUCKET_KEYS keys is taken from them first."""
    con.execute(
        """
        UPDATE keys SET anchor = NULL WHERE anchor IN (
            SELECT anchor FROM keys WHERE anchor IS NOT NULL
            GROUP BY anchor HAVING COUNT(*) > ?)
        """,
        (BUCKET_KEYS,),
    )
    bits = bitmap_of(
        [a for (a,) in con.execute("SELECT DISTINCT anchor FROM keys WHERE anchor IS NOT NULL")]
    )
    rows = con.execute("SELECT idx, key FROM keys WHERE anchor IS NULL").fetchall()
    con.execute("INSERT INTO lookup VALUES (?, ?)", (bits, compiled(rows) if rows else None))


def _kind_ranges(kinds: list[str]) -> list[list[Any]]:
    """Runs of equal kinds as [first_id, kind]: keys are written grouped by kind."""
    out: list[list[Any]] = []
    for i, kind in enumerate(kinds):
        if not out or out[-1][1] != kind:
            out.append([i, kind])
    return out
