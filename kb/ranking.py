"""kb's own bm25 for the FTS5 index: FTS5's formula and weights, with the document frequencies
given to it instead of counted on every query.

FTS5's bm25 first walks, for every phrase of the query, the whole list of records that hold
it (its idf), on every query: at a million records a walk of "model" or "identifier" (a record
in six, a record in two) costs more than finding and reading the records. `kb_bm25` computes
the same score (the same k1, b, weights, idf floor and order of arithmetic) from counts kept
per knowledge-base revision, so it walks nothing more than the query's own match. It runs in
Python once per record found (FTS5 runs auxiliary functions only in C or through apsw), so it
pays where a query finds few records: the searcher tries it first, and it gives up (TooMany)
past the records it can score in the time FTS5's walks would take (`most_scored`).
"""

from __future__ import annotations

import contextlib
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from kb.config import SEARCH_MMAP_PRAGMA, sqlite_reader_uri
from kb.pagemap import FIRST_READ, advise_random

if TYPE_CHECKING:  # apsw is imported only when a ranker is opened
    from concurrent.futures import Future

    from apsw import FTS5ExtensionApi

# The FTS5 columns, in the order of the index (kb/models.py FTS_COLUMNS, checked by a test).
# bm25 weight per column: the message and code are what people paste, so they count most;
# identifiers (slug, class, repo, path, tags) next; the prose (documentation, scenarios,
# solutions) least, or long generic text would outrank the record whose message was quoted.
BM25_WEIGHTS: Final = {
    "slug": 4.0,
    "error_message": 10.0,
    "error_code": 10.0,
    "error_class": 4.0,
    "repo": 3.0,
    "file_path": 3.0,
    "tags": 2.0,
    "documentation": 1.0,
    "trigger_scenarios": 0.7,
    "common_situations": 0.7,
    "solutions": 0.5,
}
_WEIGHTS: Final = tuple(BM25_WEIGHTS.values())
# FTS5's own constants (fts5_aux.c): term-frequency saturation, length normalisation, and the
# idf given to a phrase that half the records or more hold (its formula is then <= 0).
K1: Final = 1.2
B: Final = 0.75
IDF_FLOOR: Final = 1e-6
# One record scored by kb_bm25 (a Python call, its phrases' positions read) takes about 10 us;
# FTS5's bm25 walks an entry of a word's record list in about 70 ns ("identifier", 496,415
# records, 35.6 ms; "model", 176,118, 14.0 ms; 4,881 records of "KeyError index" scored in 50
# ms more than FTS5 ranked them; at a million records, 2026-12-02). So kb_bm25 scores at most
# as many records as FTS5's bm25 would walk entries in the same time (MIN_SCORED at least),
# and gives up past that: FTS5's bm25 then ranks, after a count.
SECONDS_PER_RECORD: Final = 10e-6
SECONDS_PER_ENTRY: Final = 70e-9
# kb_bm25 in C (NATIVE_NAME below) costs 0.4 of the Python function's time a record in the
# statement that ranks (the join and the window count included): at a million records,
# 2026-12-05, "model" (176,118 records) 1.32 against 3.75 us, "must be" (123,954) 1.47
# against 3.96, "KeyError index" (4,881) 2.29 against 4.74, "tensor shape" (5,560) 2.50
# against 5.64. It may score as many records more.
SECONDS_PER_NATIVE_RECORD: Final = 4e-6
MIN_SCORED: Final = 100  # a millisecond: never worth a count and FTS5's walks to save
# Not tried at all where the sample says the query finds this many times the records kb_bm25
# may score: it would give up, having scored them for nothing. The sample's bound (the rarest
# word's records) is loose (at 1M: 14,120 for the 428 records of "None of are in the
# columns"), so only a wide miss counts: "KeyError not in index", 4,881 records for 350.
HOPELESS: Final = 10
FUNCTION: Final = "kb_bm25"
# The index's tokenizer (kb/models.py SQLITE_FTS_DDL, checked by a test), run through apsw to
# read a text as FTS5 read it; apsw's FTS5_TOKENIZE_QUERY and _DOCUMENT flags.
TOKENIZER: Final = ("porter", ("unicode61", "remove_diacritics", "2"))
_QUERY: Final = 1
_DOCUMENT: Final = 4
# kb_bm25 in C (kb/_kb_bm25.c, an SQLite extension), built beside this module at install time
# where a C compiler and SQLite's headers are at hand (hatch_build.py); else the function
# below ranks. The same scores; the C one costs SECONDS_PER_NATIVE_RECORD a record.
NATIVE_NAME: Final = "_kb_bm25"
NATIVE_ENTRY: Final = "sqlite3_kbbm_init"
NATIVE_SUFFIXES: Final = {"win32": ".dll", "darwin": ".dylib"}  # else .so


class TooMany(Exception):
    """kb_bm25 was asked to score more records than its statement allows (Slots.most)."""


@dataclass(frozen=True)
class Slots:
    """How kb_bm25 reads a MATCH expression: for each of its phrases (in FTS5's order) the
    slot it counts for, -1 for none (a word too common to rank by); each slot is one phrase
    of FTS5's ranking, with the number of records that hold it. A word in several phrases
    (each group of "most") counts once, as in the ranking expression kb.query makes. `most`:
    the records it may score before it gives up (TooMany)."""

    phrases: tuple[int, ...]
    counts: tuple[int, ...]
    most: int

    def literal(self) -> str:
        """The SQL string literal kb_bm25 takes: numbers only, made here (the column weights
        too, so that the C function and this module's rank by the same)."""
        value = [list(self.phrases), list(self.counts), self.most, list(_WEIGHTS)]
        return "'" + json.dumps(value, separators=(",", ":")) + "'"


@dataclass(frozen=True)
class OwnRanking:
    """A query as kb_bm25 ranks it (kb.query.rank_slots: each phrase's slot, each slot's
    term), and the records it may score before it gives up (most_scored)."""

    phrase_slots: list[int]
    slot_terms: list[str]
    most: int
    count_first: bool = True  # the records are counted before (see sure_to_finish)
    # the records the query finds at most (its rarest term's, counted): none, and there is no
    # walk at all ("Pass for the": 153 ms at a million records for no record, the phrase's
    # common words walked with their positions)
    found_at_most: float = float("inf")


def ranking_statement(
    slots: Slots, source: str, columns: str, order: Sequence[tuple[str, Sequence[Any]]]
) -> tuple[str, list[Any]]:
    """The SELECT of the best records of `source` (FROM and WHERE, its table `records r`) by
    kb_bm25: `columns`, the score and the total, after the `order` terms that go before the
    score (with their parameters, which come first); the caller binds the source's
    parameters and the LIMIT after them. The total comes from a window's count in the same
    walk, outside the query that scores (FTS5 runs its functions only in a query on its own
    table), over keys and scores alone (the window holds every record found); the records'
    columns are read for the best alone."""
    heads = [f"{sql} AS head{i}" for i, (sql, _) in enumerate(order)]
    rank = f"{FUNCTION}(records_fts, {slots.literal()}) AS rank"
    ordered = [*(f"head{i}" for i in range(len(order))), "rank", "id"]
    scored = f"SELECT {', '.join(['r.key AS key', 'r.id AS id', rank, *heads])} FROM {source}"
    best = (
        f"SELECT *, count(*) OVER () AS total FROM ({scored}) ORDER BY {', '.join(ordered)} LIMIT ?"
    )
    sql = (
        f"SELECT {columns}, b.rank, b.total FROM ({best}) b "
        f"JOIN records r ON r.key = b.key ORDER BY {', '.join('b.' + o for o in ordered)}"
    )
    return sql, [p for _, params in order for p in params]


def worth_trying(most_found: float, most: int) -> bool:
    """Whether kb_bm25 may finish a query that finds `most_found` records at most (the
    sample's estimate), allowed to score `most`."""
    return most_found < HOPELESS * most


def sure_to_finish(most_found: float, most: int) -> bool:
    """Whether kb_bm25 is sure to finish a query that finds `most_found` records at most,
    allowed to score `most`: else the searcher counts them first (a walk without scoring)
    rather than risk scoring `most` of them for nothing."""
    return most_found <= most


def most_scored(walked: float, per_record: float = SECONDS_PER_RECORD) -> int:
    """The records kb_bm25 scores, `per_record` seconds each, in the time FTS5's bm25 walks
    `walked` record-list entries (the ranking's words' records, estimated), MIN_SCORED at
    least."""
    return max(MIN_SCORED, int(walked * SECONDS_PER_ENTRY / per_record))


def idf(records: int, holding: int) -> float:
    """FTS5's idf of a phrase that `holding` of `records` records hold."""
    value = math.log((records - holding + 0.5) / (holding + 0.5))
    return value if value > 0.0 else IDF_FLOOR


@dataclass
class _Statement:
    """What kb_bm25 keeps from one row of a statement to the next (FTS5's aux data)."""

    ranked: list[tuple[int, int]]  # (phrase, slot) of the phrases that count, FTS5's order
    average: float  # the mean record's tokens
    idfs: list[float]  # a slot's
    weights: list[float]  # a column's
    most: int
    scored: int = 0


def kb_bm25(api: FTS5ExtensionApi, /, *args: Any) -> float:
    """The FTS5 auxiliary function: `kb_bm25(records_fts, slots)`, `slots` as
    `Slots.literal()` makes it. A slot's frequency is the weighted count of its phrase in the
    record, added instance by instance in FTS5's order (column, then offset) as bm25 adds.
    It runs once per record found, so it reads only the columns that hold each phrase (a call
    for each, where the locations of all eleven cost a list each) and scores as fts5_aux.c
    does (the same order of arithmetic): 34 against 38 ms for the 2,931 records of
    "ValueError adapter image", 33 against 51 for the 4,552 of "AttributeError object has",
    at a million records (2026-12-02)."""
    statement = api.aux_data
    if statement is None:  # the statement's first row
        phrase_slots, counts, most, weights = json.loads(str(args[0]))
        records = api.row_count
        statement = api.aux_data = _Statement(
            ranked=[(phrase, slot) for phrase, slot in enumerate(phrase_slots) if slot >= 0],
            average=api.column_total_size(-1) / records if records else 1.0,
            idfs=[idf(records, int(n)) for n in counts],
            weights=[float(w) for w in weights],
            most=int(most),
        )
    if statement.scored >= statement.most:
        raise TooMany(f"more than {statement.most} records to score")
    statement.scored += 1
    idfs, weights = statement.idfs, statement.weights
    frequencies = [0.0] * len(idfs)
    columns_of, offsets_of = api.phrase_columns, api.phrase_column_offsets
    for phrase, slot in statement.ranked:
        frequency = 0.0
        for column in columns_of(phrase):
            weight = weights[column]
            for _offset in offsets_of(phrase, column):
                frequency += weight
        # a word's phrases in the groups its record did not match hold nothing
        if frequency > frequencies[slot]:
            frequencies[slot] = frequency
    # FTS5's bm25 (negative, lower is better): each slot's idf times its saturated frequency
    norm = K1 * (1.0 - B + B * api.column_size(-1) / statement.average)
    total = 0.0
    for frequency, phrase_idf in zip(frequencies, idfs, strict=True):
        total += phrase_idf * ((frequency * (K1 + 1.0)) / (frequency + norm))  # as fts5_aux.c
    return -total


class Tokenizer:
    """The index's tokenizer: a text's tokens as FTS5 made them when it indexed the records
    (lower case, no diacritics, porter's stems), and the parts of a query that are tokens."""

    def __init__(self, tokenize: Any) -> None:
        self._tokenize = tokenize  # an apsw.FTS5Tokenizer

    def tokens(self, text: str) -> list[str]:
        """The text's tokens, as the index holds a record's (1-2 us for a message)."""
        found = self._tokenize(text.encode(), _DOCUMENT, None, include_offsets=False)
        return [token for token, *_ in found]

    def words(self, text: str) -> list[str]:
        """The parts of a query's text that are each one token, as typed (quoted on its own,
        each is the same token in an FTS5 expression)."""
        data = text.encode()
        found = self._tokenize(data, _QUERY, None, include_colocated=False)
        return [data[start:end].decode(errors="replace") for start, end, *_ in found]


class Ranker:
    """kb_bm25's statements on read-only apsw connections to the SQLite file, one per thread
    (apsw refuses a connection busy in another thread), each opened when its thread first
    needs it and then kept. Where apsw is not installed or the file cannot be opened, `rows`
    says None (FTS5's bm25 then)."""

    def __init__(
        self, uri: str, busy_timeout_ms: int, native: bool = True, path: str | None = None
    ) -> None:
        import threading  # here: the cold `kb search` (kb.quick) makes no ranker

        self.uri = uri
        self.path = path  # the file the uri opens: its maps are advised (kb.pagemap)
        self.busy_timeout_ms = busy_timeout_ms
        self._native = native_library() if native else None
        self._local = threading.local()
        self._opened: list[Any] = []  # every thread's, closed together
        self._unusable = False
        self._lock = threading.Lock()
        self._beside: Any = None  # threads of its own for rows_beside, started when first asked

    def rows(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]] | None:
        """The statement's rows; None when it cannot run here (no apsw, locked past the
        timeout, a file replaced under it) or kb_bm25 gave up (TooMany): the searcher then
        ranks with FTS5's bm25 on its own connection, which reports the error if it is the
        database's."""
        conn = self._connection()
        if conn is None:
            return None
        import apsw

        try:
            return [tuple(row) for row in conn.execute(sql, tuple(params))]
        except (apsw.Error, TooMany):
            return None

    def rows_beside(self, sql: str, params: Sequence[Any] = ()) -> Future[Any]:
        """The statement's rows as `rows` gives them, from a thread of the ranker's own (with
        its own connection), so that the caller goes on meanwhile: SQLite runs each walk
        without Python's lock, on the machine's other core. As many threads as cores, made as
        needed: a server's searches at once do not wait for each other's counts in line."""
        import os
        from concurrent.futures import ThreadPoolExecutor

        with self._lock:
            if self._beside is None:
                self._beside = ThreadPoolExecutor(
                    max_workers=os.cpu_count() or 2, thread_name_prefix="kb-ranker"
                )
            beside: ThreadPoolExecutor = self._beside
        return beside.submit(self.rows, sql, params)

    def native(self) -> bool:
        """Whether kb_bm25 is the C one on this thread's connection (kb/_kb_bm25.c)."""
        return self._connection() is not None and self._native is not None

    def seconds_per_record(self) -> float:
        """What kb_bm25 costs a record on this thread's connection (most_scored)."""
        return SECONDS_PER_NATIVE_RECORD if self.native() else SECONDS_PER_RECORD

    def tokenizer(self) -> Tokenizer | None:
        """The index's tokenizer on this thread's connection; None where it cannot run."""
        conn = self._connection()
        if conn is None:
            return None
        found: Tokenizer | None = getattr(self._local, "tokenizer", None)
        if found is None:
            import apsw

            name, args = TOKENIZER
            try:
                found = self._local.tokenizer = Tokenizer(conn.fts5_tokenizer(name, list(args)))
            except apsw.Error:
                return None
        return found

    def _connection(self) -> Any:
        conn = getattr(self._local, "conn", None)
        if conn is not None or self._unusable:
            return conn
        try:
            import apsw
        except ImportError:
            self._unusable = True
            return None
        if not hasattr(apsw.Connection, "register_fts5_function"):  # before apsw 3.47
            self._unusable = True
            return None
        try:
            conn = apsw.Connection(self.uri, flags=apsw.SQLITE_OPEN_READONLY | apsw.SQLITE_OPEN_URI)
            conn.set_busy_timeout(self.busy_timeout_ms)
            conn.execute(SEARCH_MMAP_PRAGMA)
            if self.path is not None:
                with contextlib.suppress(apsw.Error):  # unadvised, the map works as before
                    conn.execute(FIRST_READ).fetchall()
                    advise_random(self.path)
            if not self._load_native(conn):
                conn.register_fts5_function(FUNCTION, kb_bm25)
        except apsw.Error:
            self._unusable = True
            return None
        self._local.conn = conn
        with self._lock:
            self._opened.append(conn)
        return conn

    def _load_native(self, conn: Any) -> bool:
        """Whether kb_bm25 in C is now the connection's (loaded, then loading switched off
        again: no statement loads anything); where it fails to load, no later connection
        tries it."""
        if self._native is None:
            return False
        import apsw

        try:
            conn.enable_load_extension(True)
            try:
                conn.load_extension(str(self._native), NATIVE_ENTRY)
            finally:
                conn.enable_load_extension(False)
        except apsw.Error:
            self._native = None
            return False
        return True

    def close(self) -> None:
        with self._lock:
            beside, self._beside = self._beside, None
        if beside is not None:
            beside.shutdown(wait=True)
        with self._lock:
            for conn in self._opened:
                conn.close()
            self._opened.clear()


def native_library() -> Path | None:
    """kb_bm25 in C, where the install built it."""
    import sys

    found = Path(__file__).with_name(NATIVE_NAME + NATIVE_SUFFIXES.get(sys.platform, ".so"))
    return found if found.is_file() else None


def ranker_for(path: Path | None, busy_timeout_ms: int) -> Ranker | None:
    """The ranker of a SQLite file (None for no file: an in-memory database, PostgreSQL)."""
    if path is None or not path.is_file():
        return None
    return Ranker(sqlite_reader_uri(path), busy_timeout_ms, path=str(path))
