"""kb's own bm25 (kb.ranking): the ranking, scores and totals of FTS5's bm25, without its walks."""

from __future__ import annotations

import gzip
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kb.knowledge import KnowledgeBase
from kb.ranking import TOKENIZER, Ranker, Slots, Tokenizer, native_library
from kb.search import Filters, Searcher, SearchResponse
from tests.conftest import corpus_dir
from tests.test_search import COMMON_WORD_QUERIES

# Every way a query reaches the ranking: words, "most" words, any word, identifiers and paths
# (phrases of several tokens), a quoted phrase, common words, a typo, and filters.
QUERIES = [
    *COMMON_WORD_QUERIES,
    "model",
    "backend_per_kind",
    "pandas/core/frame.py set_index",
    "torch.cuda out of memory",
    '"must be a positive integer"',
    "connection refused redis timeout zzzz",
    "tokenizr padding",
    "index index",
]
FILTERED_QUERIES = ["not supported", "invalid value"]


@pytest.fixture(scope="module")
def real_kb(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """3,000 records of the shared corpus in a SQLite file."""
    corpus = corpus_dir()
    if corpus is None:
        pytest.skip("the shared corpus is not available")
    folder = tmp_path_factory.mktemp("ranking")
    with gzip.open(corpus / "records.jsonl.gz", "rt", encoding="utf-8") as fh:
        lines = [line for _, line in zip(range(3000), fh, strict=False)]
    (folder / "in.jsonl").write_text("".join(lines))
    kb = KnowledgeBase(str(folder / "kb.sqlite3"))
    kb.import_sources([str(folder / "in.jsonl")])
    yield kb
    kb.close()


def _native_or_skip() -> None:
    """kb_bm25 in C is built (hatch_build.py), else the test skips; CI builds it."""
    if native_library() is None:
        why = "kb_bm25 in C is not built (hatch_build.py needs a C compiler and libsqlite3-dev)"
        if os.environ.get("CI"):
            pytest.fail(f"CI builds it: {why}")
        pytest.skip(why)


@pytest.fixture(params=["C", "Python"])
def either_bm25(request: pytest.FixtureRequest, real_kb: KnowledgeBase) -> Iterator[str]:
    """real_kb's searches ranked by kb_bm25 in C, then by the Python function."""
    native = request.param == "C"
    if native:
        _native_or_skip()
    saved = real_kb._ranker
    assert saved is not None
    real_kb._ranker = Ranker(saved.uri, saved.busy_timeout_ms, native=native)
    assert real_kb._ranker.native() is native
    yield request.param
    real_kb._ranker.close()
    real_kb._ranker = saved


def _search(
    kb: KnowledgeBase, monkeypatch: pytest.MonkeyPatch, own: bool, query: str, filters: Filters
) -> tuple[SearchResponse, int]:
    """The search with kb_bm25 always (own: it may score every record) or never tried, and
    how often it ranked records."""
    used = 0
    rows = Ranker.rows

    def counting(self: Ranker, sql: str, params: Any = ()) -> Any:
        nonlocal used
        found = rows(self, sql, params)
        used += bool(found) and "kb_bm25(" in sql  # it ranked records
        return found

    with monkeypatch.context() as patched:
        if own:
            patched.setattr("kb.search.most_scored", lambda *_: 10**9)
        else:
            patched.setattr(Searcher, "_own_ranking", lambda *_: None)
            patched.setattr(Searcher, "_rest_scores", lambda *_: None)
        patched.setattr(Ranker, "rows", counting)
        return kb.search_by(query, filters, 20), used


def test_kb_bm25_ranks_and_scores_as_fts5_bm25_on_real_records(
    real_kb: KnowledgeBase, monkeypatch: pytest.MonkeyPatch, either_bm25: str
) -> None:
    with real_kb.engine.connect() as conn:  # the most common type and tag: filters that keep many
        (error_type,) = conn.exec_driver_sql(
            "SELECT error_type FROM records GROUP BY 1 ORDER BY count(*) DESC LIMIT 1"
        ).one()
        (tag,) = conn.exec_driver_sql(
            "SELECT tag FROM record_tags GROUP BY 1 ORDER BY count(*) DESC LIMIT 1"
        ).one()
    filtered = [Filters(error_type=error_type), Filters(tag=tag)]
    cases = [(q, Filters()) for q in QUERIES]
    cases += [(q, f) for q in FILTERED_QUERIES for f in filtered]
    ranked = 0
    for query, filters in cases:
        own, used = _search(real_kb, monkeypatch, True, query, filters)
        theirs, unused = _search(real_kb, monkeypatch, False, query, filters)
        assert unused == 0
        ranked += used
        assert (own.total, own.method, own.corrected) == (
            theirs.total,
            theirs.method,
            theirs.corrected,
        ), query
        assert [r.id for r in own.results] == [r.id for r in theirs.results], query
        # the same arithmetic in the same order as fts5_aux.c: equal, not merely close
        assert [r.score for r in own.results] == [r.score for r in theirs.results], query
        assert own.total or filters == Filters(), query  # the filters keep something
    assert ranked >= len(cases) - 2  # kb_bm25 ranked (queries that found nothing did not)


def test_kb_bm25_gives_up_past_the_records_it_may_score_and_fts5_ranks(
    real_kb: KnowledgeBase, monkeypatch: pytest.MonkeyPatch, either_bm25: str
) -> None:
    rows = Ranker.rows
    for query in ("expected scalar type Float but found", "vllm/config/attention.py", "model"):
        theirs, _ = _search(real_kb, monkeypatch, False, query, Filters())
        assert theirs.total > 1, query
        gave_up = 0

        def spy(self: Ranker, sql: str, params: Any = ()) -> Any:
            nonlocal gave_up
            found = rows(self, sql, params)
            gave_up += found is None
            return found

        with monkeypatch.context() as patched:
            patched.setattr("kb.search.most_scored", lambda *_: 1)
            patched.setattr("kb.search.worth_trying", lambda *_: True)  # tried, gives up
            patched.setattr("kb.search.sure_to_finish", lambda *_: True)  # not counted
            patched.setattr(Ranker, "rows", spy)
            got = real_kb.search_by(query, Filters(), 20)
        assert gave_up >= 1, query
        assert (got.total, got.method) == (theirs.total, theirs.method), query
        assert [(r.id, r.score) for r in got.results] == [
            (r.id, r.score) for r in theirs.results
        ], query


@pytest.fixture(scope="module")
def data_kb(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The bundled dataset (data/, 514 records) in a SQLite file: its reader's URI. Always at
    hand, where the shared corpus may not be."""
    folder = tmp_path_factory.mktemp("data-kb")
    kb = KnowledgeBase(str(folder / "kb.sqlite3"))
    kb.import_sources([str(Path(__file__).parent.parent / "data")])
    kb.close()
    yield f"file:{folder / 'kb.sqlite3'}?mode=ro"


# FTS5 expressions and kb_bm25's slots for each of their phrases: one phrase, several, a
# phrase in a column, a phrase that ranks nothing (-1), one word in two groups of "most"
# (the best of its phrases counts), a slot two phrases share; and the records holding each
# (any, several, half of them or more: the idf floor).
NATIVE_CASES = [
    ('"must be"', (0,), (40,)),
    ('"ValueError" AND "must"', (0, 1), (60, 300)),
    ('"ValueError" AND error_message : ("not" "supported")', (0, -1), (60, 0)),
    (
        '("not" AND "found") OR ("not" AND "supported") OR ("found" AND "supported")',
        (0, 1, 0, 2, 1, 2),
        (200, 30, 30),
    ),
    ('"error" OR "the"', (0, 1), (400, 514)),
    ('"the" AND "a"', (0, 0), (514,)),
    ('"is not"', (0,), (0,)),
]


def test_kb_bm25_in_c_scores_every_record_as_the_python_function(data_kb: str) -> None:
    """Every record each expression finds, each slot layout: the same doubles, bit for bit
    (the C function adds and divides in the Python function's order, no fused operations)."""
    _native_or_skip()
    native, python = Ranker(data_kb, 1000), Ranker(data_kb, 1000, native=False)
    assert native.native() and not python.native()
    for expression, phrases, counts in NATIVE_CASES:
        literal = Slots(phrases, counts, 10**6).literal()
        sql = (
            f"SELECT rowid, kb_bm25(records_fts, {literal}) FROM records_fts "
            "WHERE records_fts MATCH ? ORDER BY rowid"
        )
        got, wanted = native.rows(sql, [expression]), python.rows(sql, [expression])
        assert wanted and len(wanted) > 1, expression  # records found, scored
        assert got == wanted, expression
        assert len({score for _, score in wanted}) > 1, expression  # scores that differ
    native.close()
    python.close()


@pytest.mark.parametrize("native", [True, False], ids=["C", "Python"])
def test_kb_bm25_fails_its_statement_past_the_records_it_may_score(
    data_kb: str, native: bool
) -> None:
    if native:
        _native_or_skip()
    ranker = Ranker(data_kb, 1000, native=native)
    sql = "SELECT rowid, kb_bm25(records_fts, {}) FROM records_fts WHERE records_fts MATCH ?"
    (found,) = ranker.rows("SELECT count(*) FROM records_fts WHERE records_fts MATCH ?", ["error"])
    assert found[0] > 3
    assert ranker.rows(sql.format(Slots((0,), (9,), found[0] - 1).literal()), ["error"]) is None
    rows = ranker.rows(sql.format(Slots((0,), (9,), found[0]).literal()), ["error"])
    assert rows is not None and len(rows) == found[0]
    ranker.close()


def test_a_native_library_that_does_not_load_leaves_the_python_function(
    data_kb: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    broken = tmp_path / "_kb_bm25.so"
    broken.write_bytes(b"not a library")
    monkeypatch.setattr("kb.ranking.native_library", lambda: broken)
    ranker = Ranker(data_kb, 1000)
    assert not ranker.native()
    literal = Slots((0,), (9,), 10**6).literal()
    rows = ranker.rows(
        f"SELECT rowid, kb_bm25(records_fts, {literal}) FROM records_fts WHERE records_fts MATCH ?",
        ["error"],
    )
    assert rows
    ranker.close()


def test_a_ranker_that_cannot_run_leaves_the_ranking_to_fts5(
    real_kb: KnowledgeBase, monkeypatch: pytest.MonkeyPatch
) -> None:
    wanted, _ = _search(real_kb, monkeypatch, False, "dtype object is not supported", Filters())
    with monkeypatch.context() as patched:
        patched.setattr(Ranker, "rows", lambda *_: None)  # locked, replaced, failed
        got = real_kb.search_by("dtype object is not supported", Filters(), 20)
    assert [(r.id, r.score) for r in got.results] == [(r.id, r.score) for r in wanted.results]
    assert got.results


class _ApswBeforeFts5:
    """An apsw before 3.47 as the ranker sees it: connections, no FTS5 functions."""

    class Error(Exception):
        pass

    SQLITE_OPEN_READONLY = 1
    SQLITE_OPEN_URI = 0x40

    class Connection:
        def __init__(self, *_: Any, **__: Any) -> None:
            pass

        def set_busy_timeout(self, _: int) -> None:
            pass


@pytest.mark.parametrize("apsw", [None, _ApswBeforeFts5], ids=["missing", "before 3.47"])
def test_without_apsw_the_search_ranks_with_fts5(tmp_path: Path, invoke: Any, apsw: Any) -> None:
    from tests.conftest import RECORDS40

    assert invoke("import", str(RECORDS40)).exit_code == 0
    ranker = Ranker(f"file:{tmp_path / 'kb.sqlite3'}?mode=ro", 1000)
    saved = sys.modules.get("apsw")
    sys.modules["apsw"] = apsw  # None: import apsw raises ImportError
    try:
        assert ranker.rows("SELECT 1") is None
    finally:
        if saved is not None:
            sys.modules["apsw"] = saved
        else:
            del sys.modules["apsw"]
    result = invoke("search", "cache group kind", "--json")
    assert result.exit_code == 0 and json.loads(result.stdout)["results"]


def test_phrase_counts_are_kept_for_the_next_process(
    real_kb: KnowledgeBase, monkeypatch: pytest.MonkeyPatch
) -> None:
    import kb.query

    monkeypatch.setattr(kb.query, "PERSISTED_MIN", 0)  # keep every count, not only long walks
    monkeypatch.setattr(kb.query, "_COUNTS", {})
    first, used = _search(real_kb, monkeypatch, True, "invalid literal for int", Filters())
    assert used == 1
    kept = list(real_kb.cache_dir().glob("phrase-counts-*.json"))
    assert len(kept) == 1
    counts = json.loads(kept[0].read_text())
    assert {"invalid", "literal", "int"} <= counts.keys()
    # a new process: nothing in memory, the file read, no record counted again
    monkeypatch.setattr(kb.query, "_COUNTS", {})

    def no_count(*_: Any) -> int:
        raise AssertionError("counted again")

    monkeypatch.setattr(kb.query, "count_holding", no_count)
    again, used = _search(real_kb, monkeypatch, True, "invalid literal for int", Filters())
    assert used == 1
    assert [(r.id, r.score) for r in again.results] == [(r.id, r.score) for r in first.results]


def test_a_phrase_no_record_holds_once_counted_is_not_walked_again(
    real_kb: KnowledgeBase, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A term no record holds (its count known: kept per revision) means the query finds
    nothing: no statement walks the index for it, and the answer is the walk's."""
    import kb.query

    monkeypatch.setattr(kb.query, "_COUNTS", {})
    query = '"be the of"'  # common words, side by side in no record
    walked, _used = _search(real_kb, monkeypatch, True, query, Filters())
    assert walked.total == 0 and walked.results == []
    statements: list[str] = []
    init = Searcher.__init__

    def spying(self: Searcher, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        run = self.run

        def spied(sql: str, params: Any = ()) -> Any:
            statements.append(sql)
            return run(sql, params)

        self.run = spied

    ranker_rows = Ranker.rows

    def ranker_spied(self: Ranker, sql: str, params: Any = ()) -> Any:
        statements.append(sql)
        return ranker_rows(self, sql, params)

    monkeypatch.setattr(Searcher, "__init__", spying)
    monkeypatch.setattr(Ranker, "rows", ranker_spied)
    again, _used = _search(real_kb, monkeypatch, True, query, Filters())
    assert (again.total, again.results, again.method) == (0, [], walked.method)
    assert statements and not [sql for sql in statements if "MATCH" in sql], statements


@pytest.mark.parametrize(
    ("terms", "mode", "common", "slots", "slot_terms"),
    [
        ("a b c", "all", "", [0, 1, 2], "a b c"),  # the expression itself
        ("a the c", "all", "the", [0, -1, 1], "a c"),  # the common word ranks nothing
        # "most": the groups (b c) (a c) (a b), each word counting for its one slot
        ("a b c", "most", "", [1, 2, 0, 2, 0, 1], "a b c"),
        ("a in b c", "most", "in", [-1, 1, 2, 0, 1, 2, 0, -1, 2, 0, -1, 1], "a b c"),
        # nothing left to rank by: FTS5 ranks the groups, each phrase its own slot
        ("a in the", "most", "in the", [0, 1, 2, 3, 4, 5], "in the a the a in"),
        ("a b", "any", "b", [0, 1], "a b"),
        ("a a", "all", "", [0, 1], "a a"),  # a repeated word counts twice, as in FTS5
    ],
)
def test_rank_slots_follow_the_ranking_expression(
    terms: str, mode: str, common: str, slots: list[int], slot_terms: str
) -> None:
    from kb.query import rank_slots

    assert rank_slots(terms.split(), mode, frozenset(common.split())) == (
        slots,
        slot_terms.split(),
    )


def test_a_servers_threads_share_the_ranker(
    real_kb: KnowledgeBase, monkeypatch: pytest.MonkeyPatch
) -> None:
    """kb serve's threads search one KnowledgeBase: its one apsw connection serves them all,
    none falls back, and each gets what it gets alone."""
    import threading

    queries = ["model", "expected scalar type Float but found", "torch.cuda out of memory"]
    alone = {q: _search(real_kb, monkeypatch, True, q, Filters())[0].as_dict() for q in queries}
    failed: list[str] = []
    rows = Ranker.rows

    def counting(self: Ranker, sql: str, params: Any = ()) -> Any:
        found = rows(self, sql, params)
        if found is None:
            failed.append(sql)
        return found

    def work(query: str) -> None:
        for _ in range(5):
            if real_kb.search_by(query, Filters(), 20).as_dict() != alone[query]:
                failed.append(query)

    with monkeypatch.context() as patched:
        patched.setattr("kb.search.most_scored", lambda *_: 10**9)
        patched.setattr(Ranker, "rows", counting)
        threads = [threading.Thread(target=work, args=(q,)) for q in queries * 2]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert failed == []


# Queries of words many of the 3,000 records hold, typed as people type them: phrases most
# records' messages hold, phrases a few hold, and words no message holds side by side.
BROAD_QUERIES = [
    *COMMON_WORD_QUERIES,
    "should be a",
    "object has no attribute",
    "is not supported",
    "must be",
    "not found",
    "the model",
    '"is not" value',
    "ValueError the generators",
]


@pytest.mark.parametrize(
    ("limit", "chunk", "own_scores", "text_first", "first"),
    [
        (5, None, "all", "sampled", None),
        (20, None, "all", "sampled", None),
        (5, 2, "all", "never", None),
        (5, None, "all", "always", None),
        (20, None, "all", "always", None),
        (5, None, "none", "never", None),
        (5, 2, "none", "never", None),
        (5, None, "none", "always", None),
        # the best scores read first too few: every score is read after them
        (5, 2, "all", "never", 3),
        (20, None, "all", "never", 6),
        (5, 2, "none", "never", 3),
        # the records that do not hold the phrase scored by kb_bm25 in C too
        (5, None, "rest", "sampled", None),
        (20, None, "rest", "never", None),
        (5, 2, "rest", "never", 3),
    ],
)
def test_a_query_that_finds_many_reads_only_its_best_records_and_ranks_them_alike(
    real_kb: KnowledgeBase,
    monkeypatch: pytest.MonkeyPatch,
    limit: int,
    chunk: int | None,
    own_scores: str,
    text_first: str,
    first: int | None,
) -> None:
    """kb.broad's ranking (FTS5 scores alone, the phrase's records found by FTS5, only the
    best records read) is the one statement's: the same totals, methods, ids in order and
    scores, where the phrase's records fill the page and where they do not (with reads of 2
    records at a time too); the phrase's records scored by kb's own bm25 in the walk that
    finds them, or by FTS5's bm25 after it; their text read best first or, where the sample
    says few hold it (or always, or never), in the walk that finds them."""
    import kb.broad

    if chunk is not None:
        monkeypatch.setattr("kb.broad.TEXT_CHUNK", chunk)
    if first is not None:
        monkeypatch.setattr("kb.broad.HELD_FIRST", first)
    if own_scores == "none":
        monkeypatch.setattr("kb.search.own_held_scores", lambda *_: lambda *_: None)
    rest = 0
    if own_scores == "rest":
        _native_or_skip()
        scores_of = kb.broad._best_scored

        def rest_scored(*args: Any) -> Any:
            nonlocal rest
            found = scores_of(*args)
            rest += found is not None
            return found

        monkeypatch.setattr("kb.broad._best_scored", rest_scored)
    if text_first != "sampled":
        monkeypatch.setattr("kb.broad.TEXT_FIRST_SHARE", 2.0 if text_first == "always" else 0.0)
    holding, held_scores_of = kb.broad._best_holding, kb.broad._held_scores
    filled = partly = broad = scored = every = 0

    def reads(*args: Any) -> Any:
        nonlocal every
        every += args[-1] is None  # every score, not the best few
        return held_scores_of(*args)

    monkeypatch.setattr("kb.broad._held_scores", reads)

    def spy(run: Any, *args: Any) -> Any:
        nonlocal filled, partly
        held_scores = args[5]
        if held_scores is not None:

            def counted(worded: str, text: Any, most: int | None) -> Any:
                nonlocal scored
                found = held_scores(worded, text, most)
                scored += found is not None
                return found

            args = (*args[:5], counted)

        found = holding(run, *args)
        filled += len(found) >= limit
        partly += 0 < len(found) < limit
        return found

    for query in BROAD_QUERIES:
        with monkeypatch.context() as patched:
            patched.setattr(Searcher, "_own_ranking", lambda *_: None)  # FTS5's bm25 ranks
            patched.setattr("kb.search.BROAD_RECORDS", 10**9)  # the one statement
            wanted = real_kb.search_by(query, Filters(), limit)
        with monkeypatch.context() as patched:
            patched.setattr(Searcher, "_own_ranking", lambda *_: None)
            patched.setattr("kb.search.BROAD_RECORDS", 1)  # kb.broad
            patched.setattr("kb.broad._best_holding", spy)
            got = real_kb.search_by(query, Filters(), limit)
            broad += got.total > 0
        assert (got.total, got.method) == (wanted.total, wanted.method), query
        assert [(r.id, r.score) for r in got.results] == [
            (r.id, r.score) for r in wanted.results
        ], query
    assert broad >= len(BROAD_QUERIES) - 2 and filled >= 2 and partly >= 1  # tests something
    assert (scored >= broad - 2) if own_scores != "none" else scored == 0
    if own_scores == "rest":
        assert rest >= 3  # kb_bm25 in C ranked the records without the phrase
    if text_first == "never":  # the best few first; every score where they were too few
        assert (every >= 1) if first is not None else every == 0


@pytest.mark.parametrize("found", ["by FTS5's phrase", "by the tokens side by side"])
@pytest.mark.parametrize(
    "phrase",
    ["must be", "is not supported", "not found", "num heads", "hidden size", "does not exist"],
)
def test_the_sampled_text_share_is_the_share_of_the_sampled_records_holding_the_text(
    real_kb: KnowledgeBase, phrase: str, found: str
) -> None:
    """kb.broad.text_share counts the records of its sample (4 runs of 512 keys) that
    hold a phrase word for word, and says what share of them hold its text: all ("must be"),
    none ("num heads": the messages say num_heads), some ("hidden size"), each as a walk of
    every record finds them; found by FTS5's phrase in each run, or by the records holding
    its words anywhere in the run and their messages' tokens (kb.broad.side_by_side)."""
    import sqlite3

    import kb.broad
    from kb.config import sqlite_file
    from kb.query import fts_phrase, held_word_for_word, phrase_held, sample_runs

    path = sqlite_file(real_kb.url)
    assert path is not None
    conn = sqlite3.connect(path)
    statements: list[str] = []

    def run(sql: str, params: Any = ()) -> list[tuple[Any, ...]]:
        statements.append(sql)
        return conn.execute(sql, params).fetchall()

    worded = held_word_for_word([phrase], " AND ".join(fts_phrase(w) for w in phrase.split()))
    assert worded is not None
    within = " AND ".join(fts_phrase(w) for w in phrase.split())
    sampled_by = None
    if found != "by FTS5's phrase":
        apsw = pytest.importorskip("apsw")
        name, args = TOKENIZER
        tokenizer = Tokenizer(apsw.Connection(":memory:").fts5_tokenizer(name, list(args)))
        sampled_by = kb.broad.side_by_side([phrase], within, tokenizer)
        assert sampled_by is not None
    held = kb.broad.Held(worded, phrase_held([phrase]), sampled_by)
    text_sql, text_params = held.text
    ((low, high),) = run("SELECT min(key), max(key) FROM records")
    runs = sample_runs(low, high, kb.broad.SAMPLE_RUNS, kb.broad.SAMPLE_RUN)
    assert len(runs) == kb.broad.SAMPLE_RUNS  # 3,000 keys: a sample of 2,048 of them

    def in_sample(rows: list[tuple[Any, ...]]) -> int:
        return sum(any(a <= key <= b for a, b in runs) for (key,) in rows)

    words = run("SELECT rowid FROM records_fts WHERE records_fts MATCH ?", [worded])
    holding = run(
        "SELECT r.key FROM records_fts JOIN records r ON r.key = records_fts.rowid "
        f"WHERE records_fts MATCH ? AND {text_sql}",
        [worded, *text_params],
    )
    statements.clear()
    sampled, share = kb.broad.text_share(run, held)
    conn.close()
    assert len(statements) == 2  # the keys' span, then the sample and its text at once
    assert in_sample(words) > 0
    assert (sampled, share) == (in_sample(words), in_sample(holding) / in_sample(words))


def test_the_tokenizer_is_the_index_s() -> None:
    """kb.ranking.TOKENIZER reads a text as the full-text index does: the tokenizer its
    table was made with (kb/models.py, the same as the migration's)."""
    from kb.models import SQLITE_FTS_DDL

    name, args = TOKENIZER
    assert f"tokenize='{' '.join([name, *args])}'" in SQLITE_FTS_DDL[0]


@pytest.mark.parametrize(
    ("message", "phrases", "held"),
    [
        ("ValueError: Arguments must be of type int", ["arguments must be of type"], True),
        ("the argument must be of the type", ["arguments must be of type"], False),
        ("plotly.graph_objs is missing", ["plotly graph objs"], True),  # porter: obj
        ("Naïve shapes must match", ["naive shapes", "must match"], True),
        ("naive shapes; match must", ["naive shapes", "must match"], False),
        ("write_full failed", ["ite_full"], False),
        ("the ite_full flag", ["ite full"], True),
    ],
)
def test_side_by_side_holds_a_message_whose_tokens_hold_each_phrase_s_in_a_row(
    message: str, phrases: list[str], held: bool
) -> None:
    """kb.broad.side_by_side: a message holds the phrases where the index's tokens of it
    hold each phrase's tokens in a row (case, diacritics, punctuation and endings aside, as
    FTS5's phrase finds it); its expression asks for every word in the message column."""
    apsw = pytest.importorskip("apsw")
    import kb.broad

    name, args = TOKENIZER
    tokenizer = Tokenizer(apsw.Connection(":memory:").fts5_tokenizer(name, list(args)))
    found = kb.broad.side_by_side(phrases, '"x"', tokenizer)
    assert found is not None
    assert found.holds(message) is held
    assert found.words.startswith('("x") AND {error_message} : (')
    assert kb.broad.side_by_side(["..."], '"x"', tokenizer) is None


@pytest.mark.parametrize("query", ['"is not supported"', "tensor", '"must be"'])
def test_a_query_of_one_ranked_term_walks_it_once_for_its_total_and_its_idf(
    real_kb: KnowledgeBase, monkeypatch: pytest.MonkeyPatch, query: str
) -> None:
    """Where the query's expression is one term of its ranking, alone and unfiltered, its
    total is the term's count (kb.query.PhraseCounts, kept per revision), the same statement
    kb_bm25's idf runs: counted once in a first search, not at all in the next; and the same
    total as a count of the expression."""
    import sqlite3

    import kb.query
    from kb.config import sqlite_file
    from kb.sql import SqlAlchemyRunner

    monkeypatch.setattr("kb.query._COUNTS", {})  # nothing counted in this process yet
    for kept in real_kb.cache_dir().glob(kb.query.COUNT_FILES.format("*")):
        kept.unlink()
    monkeypatch.setattr("kb.search.BROAD_RECORDS", 1)  # kb.broad, which needs the total
    counted: list[str] = []
    count_sql = "SELECT count(*) FROM records_fts WHERE records_fts MATCH ?"

    def spy(rows: Any) -> Any:
        def counting(self: Any, sql: str, params: Any = ()) -> Any:
            if sql == count_sql:
                counted.append(params[0])
            return rows(self, sql, params)

        return counting

    monkeypatch.setattr(SqlAlchemyRunner, "rows", spy(SqlAlchemyRunner.rows))
    monkeypatch.setattr(Ranker, "rows", spy(Ranker.rows))
    first = real_kb.search_by(query, Filters())
    assert first.total > 0
    assert len(counted) == len(set(counted)), counted  # each term once (its words' too)
    path = sqlite_file(real_kb.url)
    assert path is not None
    with sqlite3.connect(path) as conn:
        totals = {term: conn.execute(count_sql, [term]).fetchall()[0][0] for term in counted}
    expression = kb.query.fts_expression(kb.query.terms_of(query), "all")
    assert first.total == totals[expression]
    total = totals[expression]
    counted.clear()
    again = real_kb.search_by(query, Filters())
    assert (again.total, [r.id for r in again.results]) == (total, [r.id for r in first.results])
    assert counted == []


def test_a_broad_query_walks_its_holders_while_another_thread_counts_and_answers_alike(
    real_kb: KnowledgeBase, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The count of a query kb.broad ranks runs in the ranker's own thread while this one walks
    the best holders of its phrase (kb_bm25 in C), which kb.broad then takes instead of
    walking them again: the same totals, methods, ids and scores as one walk after the
    other, and the walk beside the count used, not only made."""
    _native_or_skip()
    beside_count, held_scores, rows = Searcher._beside_count, Searcher._held_scores, Ranker.rows
    counted = taken = 0
    walks = {"plain": 0, "beside": 0}  # kb_bm25's walks: one after the other, or beside
    way = "plain"

    def walking(self: Ranker, sql: str, params: Any = ()) -> Any:
        walks[way] += "kb_bm25(" in sql
        return rows(self, sql, params)

    monkeypatch.setattr(Ranker, "rows", walking)

    def counting(self: Searcher, *args: Any) -> Any:
        found = beside_count(self, *args)
        if found is None:
            return None

        def walked() -> None:
            nonlocal counted
            counted += 1  # a walk made while another thread counted
            found()

        return walked

    def taking(self: Searcher, *args: Any) -> Any:
        scores = held_scores(self, *args)
        if scores is None:
            return None

        def spied(worded: str, text: Any, most: int | None) -> Any:
            nonlocal taken
            taken += (worded, text is not None, most) in self._prefetched
            return scores(worded, text, most)

        return spied

    for query in BROAD_QUERIES:
        with monkeypatch.context() as patched:
            # kb.broad, its holders scored by kb_bm25, the rest by FTS5's bm25: as at a million
            # records for a query the sample says finds too many for kb_bm25 alone
            patched.setattr("kb.search.BROAD_RECORDS", 1)
            patched.setattr(Searcher, "_own_ranking", lambda *_: None)
            patched.setattr(Searcher, "_beside_count", lambda *_: None)
            way = "plain"
            wanted = real_kb.search_by(query, Filters(), 10)
        with monkeypatch.context() as patched:
            patched.setattr("kb.search.BROAD_RECORDS", 1)
            patched.setattr(Searcher, "_own_ranking", lambda *_: None)
            patched.setattr(Searcher, "_beside_count", counting)
            patched.setattr(Searcher, "_held_scores", taking)
            way = "beside"
            got = real_kb.search_by(query, Filters(), 10)
        assert (got.total, got.method) == (wanted.total, wanted.method), query
        assert [(r.id, r.score) for r in got.results] == [
            (r.id, r.score) for r in wanted.results
        ], query
    assert counted >= len(BROAD_QUERIES) // 2 and taken >= len(BROAD_QUERIES) // 2
    # each walk beside a count that kb.broad took is one it did not make (a query that finds
    # nothing, or too few for kb.broad, made its walk beside the count for nothing)
    assert walks["plain"] > 0 and walks["beside"] == walks["plain"] + counted - taken
