"""`kb search`: words, identifiers, paths, exact look-ups, filters, typos and hostile input."""

from __future__ import annotations

import gzip
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from kb.knowledge import KnowledgeBase
from kb.sql import SqlAlchemyRunner
from tests.conftest import RECORDS40, SEED, corpus_records, seed_record
from tests.test_import import write_jsonl

pytestmark = pytest.mark.databases  # each test on SQLite and on PostgreSQL


@pytest.fixture
def loaded(invoke: Any) -> Any:
    assert invoke("import", str(RECORDS40), str(SEED)).exit_code == 0
    return invoke


def ids_of(result: Any) -> list[str]:
    return [r["id"] for r in json.loads(result.stdout)["results"]]


SEED_ID = "46a1fcb95e0d367e"


@pytest.mark.parametrize(
    "query",
    [
        "unknown kv cache group kind",
        "backend_per_kind",
        "vllm/config/attention.py",
        '"Valid kinds are"',
        "KV CACHE Group",
        "kinds valid",
    ],
)
def test_words_identifiers_paths_and_phrases_find_the_record(loaded: Any, query: str) -> None:
    result = loaded("search", query, "--json")
    assert result.exit_code == 0, result.output
    assert ids_of(result)[0] == SEED_ID


def test_exact_id_slug_and_repo_slug_go_straight_to_the_record(loaded: Any) -> None:
    record = seed_record()
    for query in (SEED_ID, SEED_ID.upper(), record["slug"], f"{record['repo']}/{record['slug']}"):
        out = json.loads(loaded("search", query, "--json").stdout)
        assert out["method"] == "exact", query
        assert [r["id"] for r in out["results"]] == [SEED_ID]
        assert out["results"][0]["score"] == 1.0


def test_exact_error_code(invoke: Any, tmp_path: Path) -> None:
    coded = dict(seed_record(), id="00000000000000c0", errorCode="ERR_KV_KIND")
    write_jsonl(tmp_path / "in.jsonl", [coded, *corpus_records(5)])
    invoke("import", str(tmp_path / "in.jsonl"))
    out = json.loads(invoke("search", "ERR_KV_KIND", "--json").stdout)
    assert out["method"] == "exact" and ids_of_json(out) == ["00000000000000c0"]


def ids_of_json(out: dict[str, Any]) -> list[str]:
    return [r["id"] for r in out["results"]]


def test_message_match_ranks_above_a_record_that_only_talks_about_it(
    invoke: Any, tmp_path: Path
) -> None:
    base = seed_record()
    wanted = dict(
        base,
        id="00000000000000a1",
        slug="connection-pool-exhausted",
        errorMessage="Connection pool exhausted after {timeout} seconds",
        messagePattern="Connection pool exhausted after (.+?) seconds",
        documentation="Raised when every connection is checked out.",
    )
    related = dict(
        base,
        id="00000000000000a2",
        slug="retry-budget",
        errorMessage="Retry budget spent for {host}",
        messagePattern="Retry budget spent for (.+?)",
        documentation=(
            "Often follows a connection pool that is exhausted: when the connection pool is "
            "exhausted, retries pile up. Connection pool exhausted errors come first."
        ),
    )
    write_jsonl(tmp_path / "in.jsonl", [related, wanted, *corpus_records()])
    invoke("import", str(tmp_path / "in.jsonl"))
    out = json.loads(invoke("search", "connection pool exhausted", "--json").stdout)
    assert ids_of_json(out)[:2] == ["00000000000000a1", "00000000000000a2"]
    assert out["results"][0]["score"] > out["results"][1]["score"]


@pytest.mark.parametrize(
    ("option", "value_of"),
    [
        ("--repo", lambda r: r["repo"]),
        ("--error-class", lambda r: r["errorClass"]),
        ("--type", lambda r: r["errorType"]),
        ("--severity", lambda r: r["severity"]),
        ("--tag", lambda r: r["tags"][0]),
    ],
)
def test_each_filter_with_and_without_a_query(loaded: Any, option: str, value_of: Any) -> None:
    records = [*corpus_records(), seed_record()]
    value = value_of(records[5])
    expected = {r["id"] for r in records if _has(r, option, value)}
    alone = json.loads(loaded("search", option, value, "--limit", "1000", "--json").stdout)
    assert {r["id"] for r in alone["results"]} == expected
    assert alone["total"] == len(expected)
    word = records[5]["errorMessage"].split()[0]
    with_query = loaded("search", option, value, "--limit", "1000", "--json", "--", word)
    with_query = json.loads(with_query.stdout)
    assert with_query["results"], word
    assert {r["id"] for r in with_query["results"]} <= expected


def _has(record: dict[str, Any], option: str, value: str) -> bool:
    key = {
        "--repo": "repo",
        "--error-class": "errorClass",
        "--type": "errorType",
        "--severity": "severity",
    }.get(option)
    return value in record["tags"] if key is None else record[key] == value


def test_code_filter(invoke: Any, tmp_path: Path) -> None:
    coded = dict(seed_record(), id="00000000000000c1", errorCode="E0502")
    write_jsonl(tmp_path / "in.jsonl", [coded, seed_record()])
    invoke("import", str(tmp_path / "in.jsonl"))
    out = json.loads(invoke("search", "kv cache", "--code", "E0502", "--json").stdout)
    assert ids_of_json(out) == ["00000000000000c1"]


def test_misspelt_words_are_corrected_and_the_output_says_so(loaded: Any) -> None:
    result = loaded("search", "unknwn kv cahce groop")
    assert result.exit_code == 0
    assert "No results for 'unknwn kv cahce groop'; showing results for" in result.stdout
    assert SEED_ID in result.stdout
    out = json.loads(loaded("search", "unknwn kv cahce groop", "--json").stdout)
    assert out["didYouMean"] and out["results"][0]["id"] == SEED_ID


def test_nothing_found_exits_1_with_a_clean_message(loaded: Any) -> None:
    result = loaded("search", "zzqxv")
    assert result.exit_code == 1
    assert result.stderr.strip() == "Nothing found for 'zzqxv'."
    empty = loaded("search", "zzqxv", "--json")
    assert empty.exit_code == 1
    assert json.loads(empty.stdout)["results"] == []


@pytest.mark.parametrize(
    "query",
    [
        '"unbalanced quote',
        "kv AND OR NOT NEAR(",
        "a* ^b -c +d :e {f} [g] (h)",
        "'; DROP TABLE records; --",
        '" OR 1=1 --',
        "records_fts MATCH *",
        "\x00\x1b[31m",
        "kind " * 5000,
        "ü" * 3000,
        "***",
    ],
)
def test_hostile_queries_never_break_the_search(loaded: Any, db_url: str, query: str) -> None:
    result = loaded("search", query, "--json")
    assert result.exit_code in (0, 1), result.output
    json.loads(result.stdout)
    with KnowledgeBase(db_url) as kb:
        assert kb.stats()["records"] == 41


def test_full_text_index_follows_updates(
    invoke: Any, tmp_path: Path, db_url: str, database: str
) -> None:
    record = seed_record()
    invoke("import", str(SEED))
    changed = dict(record, errorMessage="Quixotic frobnication of {kind}", slug="quixotic")
    write_jsonl(tmp_path / "in.jsonl", [changed])
    invoke("import", str(tmp_path / "in.jsonl"))
    assert ids_of(invoke("search", "quixotic frobnication", "--json")) == [SEED_ID]
    # The old message's own phrase is gone from the index (the prose still says "valid kinds").
    assert invoke("search", '"Valid kinds are"', "--json").exit_code == 1
    invoke("import", str(RECORDS40), str(tmp_path / "in.jsonl"), str(SEED))
    assert invoke("search", "quixotic frobnication", "--json").exit_code == 1  # SEED came last
    if database == "sqlite":  # FTS5's index agrees with the records, row for row
        with sqlite3.connect(db_url) as conn:
            conn.execute("INSERT INTO records_fts(records_fts, rank) VALUES ('integrity-check', 1)")


def test_text_output_has_one_block_per_result(loaded: Any) -> None:
    out = loaded("search", "backend_per_kind").stdout
    assert out.splitlines()[0] == "1 of 1 results for 'backend_per_kind' (all-words)"
    assert f"1. {SEED_ID}  vllm-project/vllm · ValueError" in out
    assert "   Unknown KV cache group kind '{kind}' in backend_per_kind." in out
    assert f"   kb show {SEED_ID}" in out
    markdown = loaded("search", "backend_per_kind", "--format", "markdown").stdout
    assert markdown.startswith("### Results for 'backend\\_per\\_kind' (1 of 1)")


def test_bm25_weights_name_every_fts_column_in_order() -> None:
    from kb.models import FTS_COLUMNS
    from kb.search import BM25_WEIGHTS

    assert tuple(BM25_WEIGHTS) == FTS_COLUMNS


def test_the_sqlalchemy_path_and_the_quick_path_agree(loaded: Any, db_url: str) -> None:
    from kb import quick
    from kb.search import Filters

    with KnowledgeBase(db_url) as kb:
        for query in ("kv cache group", "unknwn kv cahce", SEED_ID, "zzqxv"):
            full = kb.search(query).as_dict()
            fast = quick.search(kb.url, query, Filters(), 10)
            assert fast is not None  # a database at the newest schema: the quick path
            assert full == fast.as_dict(), query


def test_the_portable_word_search_finds_records_without_fts(loaded: Any, db_path: Path) -> None:
    from kb.search import Filters, Searcher
    from kb.sql import SqlAlchemyRunner

    with KnowledgeBase(str(db_path)) as kb, kb.engine.connect() as conn:
        runner = SqlAlchemyRunner(conn)
        runner.fts = False  # what a database with neither FTS5 nor tsvector gets
        searcher = Searcher(runner)
        found = searcher.search("backend_per_kind", Filters(), 5)
        assert [r.id for r in found.results] == [SEED_ID]
        assert searcher.search("100%_ \\ '", Filters(), 5).total == 0
        filtered = searcher.search("kv cache", Filters(repo="vllm-project/vllm"), 5)
        assert SEED_ID in [r.id for r in filtered.results]


def test_related_records_for_a_log_line_come_from_its_uncommon_words(
    loaded: Any, db_path: Path
) -> None:
    """What `kb match` suggests for a line no record explains: the records sharing its longest
    uncommon words (all, else all but one, else any), by the message column, on both paths."""
    from kb.quick import QuickReader
    from kb.search import Searcher
    from kb.sql import SqlAlchemyRunner

    line = "RotorError: the KV cache rotor jammed on backend_per_kind group 'chunked'"
    with KnowledgeBase(str(db_path)) as kb:
        full = kb.related(line)
        assert [hit["id"] for hit in full][:1] == [SEED_ID]
        assert set(full[0]) >= {"id", "score", "errorMessage"}
        reader = QuickReader.open(kb.url)
        assert reader is not None
        try:
            assert reader.related(line, 3) == full  # the cold path's search, the same answer
        finally:
            reader.close()
        assert kb.related("the and of with was were") == []  # nothing but common words
        with kb.engine.connect() as conn:
            runner = SqlAlchemyRunner(conn)
            runner.fts = False  # the portable search (PostgreSQL for now): unranked, but some
            assert Searcher(runner).related(line, 3)
            assert SEED_ID in [r.id for r in Searcher(runner).related("backend_per_kind", 10)]


# ---------------------------------------------------------------- search as people type it


@pytest.mark.parametrize(
    ("option", "typed", "exact"),
    [
        ("--error-class", "keyerror", "KeyError"),
        ("--error-class", "KEYERROR", "KeyError"),
        ("--repo", "Pandas-Dev/Pandas", "pandas-dev/pandas"),
        ("--tag", "PyTorch", "pytorch"),
        ("--severity", "ERROR", "error"),
    ],
)
def test_filters_ignore_case(loaded: Any, option: str, typed: str, exact: str) -> None:
    wanted = loaded("search", option, exact, "--limit", "1000", "--json")
    got = loaded("search", option, typed, "--limit", "1000", "--json")
    assert got.exit_code == 0, got.output
    assert ids_of(got) == ids_of(wanted) and ids_of(got)
    name = {"--error-class": "errorClass", "--repo": "repo", "--tag": "tags"}.get(
        option, "severity"
    )
    assert json.loads(got.stdout)["filters"] == {name: [exact]}


def test_a_repository_by_its_short_name_finds_every_repository_of_that_name(
    invoke: Any, tmp_path: Path
) -> None:
    base = seed_record()
    ours = dict(base, id="00000000000000b1", repo="acme/widgets", slug="w1")
    theirs = dict(base, id="00000000000000b2", repo="other-org/Widgets", slug="w2")
    unrelated = dict(base, id="00000000000000b3", repo="acme/widgets-extra", slug="w3")
    write_jsonl(tmp_path / "in.jsonl", [ours, theirs, unrelated, *corpus_records()])
    invoke("import", str(tmp_path / "in.jsonl"))
    out = json.loads(invoke("search", "--repo", "widgets", "--json").stdout)
    assert sorted(ids_of_json(out)) == ["00000000000000b1", "00000000000000b2"]
    assert out["filters"] == {"repo": ["acme/widgets", "other-org/Widgets"]}
    pandas = json.loads(invoke("search", "--repo", "pandas", "--json").stdout)
    assert {r["repo"] for r in pandas["results"]} == {"pandas-dev/pandas"}
    text = invoke("search", "--repo", "widgets", "kv", "cache").stdout
    assert text.startswith("repo 'widgets' means acme/widgets, other-org/Widgets.\n2 of 2 ")
    assert "repo 'acme/widgets' means" not in invoke("search", "--repo", "acme/widgets").stdout


def _improperly_configured(tmp_path: Path) -> Path:
    base = seed_record()
    records = [
        dict(
            base,
            id="00000000000000d1",
            repo="celery/celery",
            slug="celery-backend-settings",
            errorClass="ImproperlyConfigured",
            filePath="celery/backends/arangodb.py",
            errorMessage="ArangoDb backend settings should be grouped in a dict",
        ),
        dict(
            base,
            id="00000000000000d2",
            repo="django/django",
            slug="settings-not-configured",
            errorClass="ImproperlyConfigured",
            filePath="django/conf/__init__.py",
            errorMessage="Requested {desc}, but settings are not configured.",
        ),
        dict(
            base,
            id="00000000000000d3",
            repo="acme/django-things",
            slug="things-settings",
            errorClass="ImproperlyConfigured",
            filePath="things/setup.py",
            errorMessage="Things settings are missing",
        ),
    ]
    write_jsonl(tmp_path / "in.jsonl", [*records, *corpus_records()])
    return tmp_path / "in.jsonl"


def test_a_class_by_its_qualified_name_prefers_the_records_of_its_module(
    invoke: Any, tmp_path: Path
) -> None:
    invoke("import", str(_improperly_configured(tmp_path)))
    qualified = "django.core.exceptions.ImproperlyConfigured"
    for args in (("--error-class", qualified), (qualified,), (f"{qualified}:",)):
        result = invoke("search", *args, "--json")
        assert result.exit_code == 0, (args, result.output)
        out = json.loads(result.stdout)
        assert ids_of_json(out)[0] == "00000000000000d2", args
        assert set(ids_of_json(out)) == {"00000000000000d1", "00000000000000d2", "00000000000000d3"}
        assert out["filters"] == {"errorClass": ["ImproperlyConfigured"]}
    text = invoke("search", qualified).stdout
    assert text.startswith(f"error class {qualified!r} means ImproperlyConfigured.\n")
    celery = json.loads(invoke("search", "celery.exceptions.ImproperlyConfigured", "--json").stdout)
    assert ids_of_json(celery)[0] == "00000000000000d1"
    assert celery["method"] == "error-class"
    # with other words: the class narrows, the words rank
    words = json.loads(invoke("search", f"{qualified}:", "ArangoDb", "--json").stdout)
    assert ids_of_json(words) == ["00000000000000d1"]
    # a dotted name that is no stored class stays words
    assert invoke("search", "zzqx.errors.RotorJammed", "--json").exit_code == 1


def test_a_class_before_the_words_is_not_part_of_the_message_they_quote(
    invoke: Any, tmp_path: Path, database: str
) -> None:
    """ "ValueError: must be positive" (a traceback's last line) ranks first the record whose
    message holds "must be positive": the class is kept apart from the message. A record that
    holds the words more often but not side by side in its message ranks above it on bm25
    (PostgreSQL's ts_rank ranks these two the other way round on the words alone)."""
    base = seed_record()
    records = [
        dict(
            base,
            id="00000000000000e1",
            slug="offset-positive",
            errorClass="ValueError",
            errorMessage="Offset must be positive, got {offset}",
        ),
        dict(
            base,
            id="00000000000000e2",
            slug="must-be-positive",
            errorClass="ValueError",
            errorMessage="must be; positive, must be; positive, {name} must be; positive",
        ),
        dict(base, id="00000000000000e3", slug="error-class", errorClass="Error"),
    ]
    write_jsonl(tmp_path / "in.jsonl", records)
    assert invoke("import", str(tmp_path / "in.jsonl")).exit_code == 0

    def first(*query: str) -> str:
        result = invoke("search", *query, "--json")
        assert result.exit_code == 0, (query, result.output)
        return str(json.loads(result.stdout)["results"][0]["id"])

    for query in ("ValueError: must be positive", "ValueError must be positive"):
        assert first(query) == "00000000000000e1", query
    # without the class the words alone are the phrase: the same record
    assert first("must be positive") == "00000000000000e1"
    # a capitalised word is a class only with its colon ("Error must be positive" reads
    # as words): without it, the phrase "error must be positive" no message holds
    assert first("Error: must be positive") == "00000000000000e1"
    if database == "sqlite":
        assert first("Error must be positive") == "00000000000000e2"
        assert first("ValueError must be") == "00000000000000e2"  # the words rank


def test_a_misspelt_identifier_gets_the_identifier_it_meant(loaded: Any) -> None:
    result = loaded("search", "backnd_per_kindd")
    assert result.exit_code == 0, result.output
    assert "showing results for 'backend_per_kind'" in result.stdout
    out = json.loads(loaded("search", "backnd_per_kindd", "--json").stdout)
    assert out["didYouMean"] == "backend_per_kind"
    assert ids_of_json(out) == [SEED_ID]
    nothing = loaded("search", "backnd_per_kindd", "--repo", "numpy/numpy")
    assert nothing.exit_code == 1
    assert "Did you mean: backend_per_kind?" in nothing.stderr


def test_a_query_found_whole_in_a_message_ranks_that_record_first(
    invoke: Any, tmp_path: Path
) -> None:
    """bm25 prefers short texts with many of the words; a record whose message holds the
    typed phrase as it is still comes first, typed bare or "quoted"."""
    base = seed_record()
    phrase = dict(
        base,
        id="00000000000000e1",
        slug="pool-size",
        errorMessage=(
            "The configured connection pool size must be a positive integer, and the pool "
            "timeout must be set as well when the engine is created for {url}"
        ),
    )
    scattered = dict(
        base,
        id="00000000000000e2",
        slug="integer-pool",
        errorMessage="integer size positive: pool must be a pool size",
        documentation="pool size pool size pool size must be positive integer",
    )
    write_jsonl(tmp_path / "in.jsonl", [scattered, phrase, *corpus_records()])
    invoke("import", str(tmp_path / "in.jsonl"))
    # the same words in another order are no phrase of either message: bm25 alone decides
    shuffled = json.loads(invoke("search", "integer positive must pool size", "--json").stdout)
    assert ids_of_json(shuffled)[0] == "00000000000000e2"
    for query in ("pool size must be a positive integer", '"Pool Size must be a positive"'):
        out = json.loads(invoke("search", query, "--json").stdout)
        assert ids_of_json(out)[0] == "00000000000000e1", query
        scores = [r["score"] for r in out["results"]]
        assert scores == sorted(scores, reverse=True)  # best first, by score too


def test_a_message_holds_a_phrase_word_for_word_not_inside_longer_words(
    invoke: Any, tmp_path: Path
) -> None:
    """A message holds "should be a" as words, not inside "should be able": only the one that
    holds it so ranks first, though bm25 prefers the other."""
    base = seed_record()
    able = dict(
        base, id="00000000000000f1", slug="able", errorMessage="should be able to load a file"
    )
    held = dict(
        base,
        id="00000000000000f2",
        slug="held",
        errorMessage=(
            "the configured value should be a list of strings or a tuple of paths, got {type} "
            "for {name} in the settings file that was read when the service started"
        ),
    )
    write_jsonl(tmp_path / "in.jsonl", [able, held, *corpus_records()])
    assert invoke("import", str(tmp_path / "in.jsonl")).exit_code == 0

    def first(query: str) -> str:
        return str(json.loads(invoke("search", query, "--json").stdout)["results"][0]["id"])

    assert first("a be should") == "00000000000000f1"  # no phrase: bm25 alone
    assert first("should be a") == "00000000000000f2"
    assert first('"Should be a"') == "00000000000000f2"


# ---------------------------------------------------------------- common words and ranking

COMMON_WORD_QUERIES = [
    "None of are in the columns",
    "KeyError not in index",
    "dtype object is not supported",
    "the value is not in the list",
    "expected scalar type Float but found",
    "migration revision not found alembic",
    "must be a positive integer",
    "object has no attribute",
    "ValueError invalid literal",
    "deprecated argument will be removed",
]


def test_ranking_without_the_common_words_is_the_ranking_with_them(
    db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Words every record holds select nothing, bm25 ranks by the words most records lack
    (kb.query.COMMON_SHARE says why that is the same ranking) and "most" by each word once:
    on real records, the same totals, methods, ids in order and scores as the query's own
    expression with every word."""
    from kb.query import terms_of
    from kb.search import Filters, Searcher
    from kb.sql import read_revision
    from tests.conftest import corpus_dir

    corpus = corpus_dir()
    if corpus is None:
        pytest.skip("the shared corpus is not available")
    with gzip.open(corpus / "records.jsonl.gz", "rt", encoding="utf-8") as fh:
        lines = [line for _, line in zip(range(3000), fh, strict=False)]
    (db_path.parent / "in.jsonl").write_text("".join(lines))
    with KnowledgeBase(str(db_path)) as kb:
        kb.import_sources([str(db_path.parent / "in.jsonl")])
        with kb.engine.connect() as conn:
            runner = SqlAlchemyRunner(conn)
            # no revision: no word is counted in every record, so none is left out
            every_word = Searcher(runner)
            revision = read_revision(runner)
            common = everywhere = most = 0
            for query in COMMON_WORD_QUERIES:
                searcher = Searcher(runner, revision=revision)
                common += bool(searcher.common.of(terms_of(query)))
                everywhere += bool(searcher.common.everywhere(terms_of(query)))
                got = searcher.search(query, Filters(), 20).as_dict()
                with monkeypatch.context() as patched:  # bm25 on the query's own expression
                    patched.setattr("kb.search.fts_rank_expression", lambda *_: None)
                    wanted = every_word.search(query, Filters(), 20).as_dict()
                assert got["total"] == wanted["total"] and got["method"] == wanted["method"]
                most += got["method"] == "most-words"
                assert [r["id"] for r in got["results"]] == [r["id"] for r in wanted["results"]]
                for mine, theirs in zip(got["results"], wanted["results"], strict=True):
                    assert mine["score"] == pytest.approx(theirs["score"], abs=1e-4), query
    assert common >= 5 and everywhere >= 3 and most >= 1  # the test tests something


@pytest.mark.parametrize(
    ("terms", "mode", "common", "expected"),
    [
        ("KeyError the index", "all", "the", '"KeyError" AND "index"'),
        ("KeyError the index", "all", "", None),  # nothing left out: the query's own
        ("KeyError the index", "all", "KeyError the index", None),  # nothing to rank by
        ("KeyError not in index", "most", "not in", '"KeyError" OR "index"'),
        ("KeyError not in index", "most", "not in index", None),  # a record may lack KeyError
        ("KeyError not in index", "most", "", '"KeyError" OR "not" OR "in" OR "index"'),
        ("KeyError not in index", "any", "not in", None),
    ],
)
def test_the_rank_expression_leaves_out_the_common_words_when_others_find_every_record(
    terms: str, mode: str, common: str, expected: str | None
) -> None:
    from kb.query import fts_rank_expression

    assert fts_rank_expression(terms.split(), mode, frozenset(common.split())) == expected


@pytest.mark.parametrize(
    ("terms", "mode", "everywhere", "expected"),
    [
        ("KeyError not in index", "all", "not in", "KeyError index"),
        ("not in", "all", "not in", "not in"),  # nothing else to select by
        ("KeyError not in index", "most", "not in", "KeyError index"),
        ("KeyError not in", "most", "not in", "KeyError not in"),  # every record has 2 of 3
        ("KeyError not in", "any", "not in", "KeyError not in"),  # every record has one
    ],
)
def test_words_every_record_holds_are_left_out_only_where_they_select_nothing(
    terms: str, mode: str, everywhere: str, expected: str
) -> None:
    from kb.query import selecting

    assert selecting(terms.split(), mode, frozenset(everywhere.split())) == expected.split()


@pytest.mark.parametrize(
    ("phrases", "expected"),
    [
        (["the first argument"], '(x) AND {error_message} : "the first argument"'),
        (
            ["is not", "the model"],
            '(x) AND {error_message} : "is not" AND {error_message} : "the model"',
        ),
        (["the ? !"], '(x) AND {error_message} : "the ? !"'),
        (["? !"], None),  # no word: the text alone can say
    ],
)
def test_the_walk_for_a_phrases_records_is_the_whole_phrase_common_words_too(
    phrases: list[str], expected: str | None
) -> None:
    from kb.query import held_word_for_word

    assert held_word_for_word(phrases, "x") == expected


def test_a_word_of_every_record_is_counted_once_per_revision_and_kept_in_the_cache(
    loaded: Any, db_path: Path, tmp_path: Path
) -> None:
    """Counting is a walk of the word's whole doclist: once per knowledge-base revision, not
    again in a new process (a cold `kb search`), which reads the count from the cache."""
    from kb import query
    from kb.sql import read_revision

    with KnowledgeBase(str(db_path)) as kb, kb.engine.connect() as conn:
        runner = SqlAlchemyRunner(conn)
        revision = read_revision(runner)
        statements: list[str] = []

        def run(sql: str, params: Any = ()) -> list[tuple[Any, ...]]:
            statements.append(sql)
            return runner.rows(sql, params)

        query._SHARES.clear()
        common = query.CommonWords(run, revision, tmp_path / "cache")
        assert common.everywhere(["the", "backend_per_kind", "kv"]) == {"the"}
        assert common.of(["the", "backend_per_kind", "kv"]) == {"the"}
        counts = [sql for sql in statements if sql.startswith("SELECT count(*) FROM records_fts")]
        assert len(counts) == 1
        query._SHARES.clear()  # as in a new process
        statements.clear()
        assert query.CommonWords(run, revision, tmp_path / "cache").everywhere(["the"]) == {"the"}
        assert statements == []
