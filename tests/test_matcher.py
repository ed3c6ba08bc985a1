"""kb.matcher: every known error in a log, ranked, with evidence; against real corpus records
(tests/fixtures/matcher/records.jsonl) and, when it is present, the full shared corpus."""

from __future__ import annotations

import gzip
import io
import json
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from kb.matcher import (
    CACHE_FILE,
    MatcherIndex,
    PatternSource,
    build_index,
    cache_is_current,
    load_index,
    sources_from_records,
    write_index,
)
from tests.answer_keys import (
    KEY_ALTERNATIVE,
    NEAR_MISS_ALTERNATIVE,
    TIE,
    TOP_1,
    answers,
    best_answer,
)
from tests.conftest import corpus_dir

FIXTURES = Path(__file__).parent / "fixtures" / "matcher"
SITE = "/srv/app/.venv/lib/python3.11/site-packages"
NOISE = (
    '2026-03-14T08:00:00.000Z INFO  [http] 10.0.8.96 "PUT /metrics HTTP/1.1" 200 51113B 526ms\n'
    "2026-03-14T08:00:00.037Z DEBUG [db] query ok rows=161 elapsed=7.7ms stmt=SELECT id FROM t\n"
    "2026-03-14T08:00:02.666Z WARN  [cache] hit ratio 0.28 over last 60s (evictions=2375)\n"
    "INFO 03-14 08:00:01 [loggers.py:123] Engine 000: Avg prompt throughput: 704.3 tokens/s\n"
)


def fixture_records() -> list[dict[str, Any]]:
    with open(FIXTURES / "records.jsonl", encoding="utf-8") as fh:
        return [json.loads(line) for line in fh]


def synthetic(rid: str, pattern: str, message: str, **extra: Any) -> dict[str, Any]:
    """A record for shapes the corpus lacks (error codes, hostile or JavaScript-only regexes)."""
    rec: dict[str, Any] = {
        "id": rid,
        "repo": "example/hostile",
        "messagePattern": pattern,
        "errorMessage": message,
        "errorClass": None,
        "errorCode": None,
        "filePath": "hostile/mod.py",
        "lineNumber": 1,
    }
    rec.update(extra)
    return rec


EXTRA = [
    synthetic("00000000000000aa", "hostile input (a+)+b", "hostile input {a}b"),
    synthetic("00000000000000bb", r"token (?<t>\w+) repeated as \k<t> here", "token {t}"),
    synthetic(
        "00000000000000cc",
        "Request failed with status code (.+?)",
        "Request failed with status code {status}",
        errorCode="ERR_BAD_RESPONSE",
        errorClass="AxiosError",
        repo="axios/axios",
        filePath="lib/core/settle.js",
        lineNumber=19,
    ),
    synthetic("00000000000000dd", "Expected (.+?) but got (.+?) for (.+?) in (.+?)\\.", "x"),
    synthetic(
        "00000000000000ff",
        "connection pool exhausted after (.+?) retries",
        "connection pool exhausted after %d retries",
        repo="acme/pool",
        filePath="github.com/acme/pool/pool.go",
        lineNumber=88,
    ),
]


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> MatcherIndex:
    cache = tmp_path_factory.mktemp("cache")
    return build_index(sources_from_records(fixture_records() + EXTRA), cache, "fixture-rev")


def ids_at(report: Any) -> dict[int, str]:
    return {m.line: m.id for m in report.matches}


# ---- the corpus logs --------------------------------------------------------------------


def test_paste_log_finds_its_three_tracebacks_at_their_lines(index: MatcherIndex) -> None:
    expected = json.loads((FIXTURES / "paste.expected.json").read_text())
    report = index.match((FIXTURES / "paste.log").read_bytes())
    found = ids_at(report)
    for planted in expected["planted"]:
        assert found.get(planted["line"]) == planted["id"]
    assert len(report.matches) == 3
    assert report.stats["lines"] == 207


def test_traceback_evidence_names_class_and_raising_frame(index: MatcherIndex) -> None:
    report = index.match(FIXTURES / "paste.log")
    best = {m.id: m for m in report.matches}["47b1f16ae78d5108"]
    assert best.method == "pattern"
    assert "error-class" in best.evidence
    assert "frame:sqlalchemy/util/langhelpers.py:501" in best.evidence
    assert best.captures == ["sqlalchemy.dialects", "postgresqlx"]
    assert best.capture_names == ["group", "name"]
    assert best.score > 0.9


def test_source_line_quoted_in_a_traceback_is_not_an_error(index: MatcherIndex) -> None:
    report = index.match(FIXTURES / "paste.log")
    assert 135 not in ids_at(report)  # `raise KeyError(f"None of {missing} are in the columns")`


def test_matches_are_best_first_and_orderable_by_log_line(index: MatcherIndex) -> None:
    report = index.match(FIXTURES / "paste.log")
    scores = [m.score for m in report.matches]
    assert scores == sorted(scores, reverse=True)
    assert [m.line for m in report.in_log_order()] == [9, 136, 207]


# ---- clean logs and generic patterns ----------------------------------------------------


def test_clean_noise_comes_back_empty(index: MatcherIndex) -> None:
    report = index.match(NOISE * 50)
    assert report.matches == []
    assert report.stats["lines"] == 200


def test_generic_pattern_never_wins_alone(index: MatcherIndex) -> None:
    report = index.match(NOISE + "2026-03-14T08:00:01Z INFO [cfg] key 'x' not found, default\n")
    assert report.matches == []


def test_generic_message_from_users_own_code_is_not_claimed(index: MatcherIndex) -> None:
    log = (
        "Traceback (most recent call last):\n"
        '  File "/home/me/project/app.py", line 3, in <module>\n'
        "    raise KeyError(f'{name} not found')\n"
        "KeyError: 'thing not found'\n"
    )
    assert index.match(log).matches == []


def test_generic_message_raised_in_its_library_is_claimed(index: MatcherIndex) -> None:
    log = (
        "Traceback (most recent call last):\n"
        f'  File "{SITE}/xarray/core/indexes.py", line 1349, in sel\n'
        '    raise KeyError(f"{labels} not found")\n'
        "KeyError: \"['x'] not found\"\n"
    )
    (match,) = index.match(log).matches
    assert match.id == "1f981d5dc069b06f"
    assert match.line == 4


# ---- ranking ----------------------------------------------------------------------------


def test_near_duplicates_collapse_under_one_match_with_the_others_listed(
    index: MatcherIndex,
) -> None:
    line = (
        "ERROR job failed: ValueError: "
        "Expected a non-empty value for `credential_id` but received None"
    )
    (match,) = index.match(line).matches
    pair = {"fe0b16d24b659b1a", "a66b055deb5e4579"}
    assert {match.id, *match.duplicates} == pair
    assert {match.id, *(a for a, _ in match.alternatives)} == pair
    assert match.captures == ["None"]


def test_frame_tells_near_duplicates_apart(index: MatcherIndex) -> None:
    for lineno, rid in ((444, "fe0b16d24b659b1a"), (141, "a66b055deb5e4579")):
        log = (
            "Traceback (most recent call last):\n"
            f'  File "{SITE}/openai/resources/beta/agents/vaults/credentials.py",'
            f" line {lineno}, in x\n"
            "ValueError: Expected a non-empty value for `credential_id` but received ''\n"
        )
        (match,) = index.match(log).matches
        assert match.id == rid
        assert match.duplicates == []


def test_frame_identifies_the_record_when_the_message_is_cut_off(index: MatcherIndex) -> None:
    log = (
        NOISE
        + "Traceback (most recent call last):\n"
        + f'  File "{SITE}/vllm/config/profiler.py", line 266, in __post_init__\n'
        + "ValueError: ['a', 'b'] only applicable wh\n"
        + NOISE
    )
    (match,) = index.match(log).matches
    assert match.id == "03907e999369d27b"
    # the raise site alone, or the cut message read as the start of its template there
    assert match.method in ("frame", "fuzzy")
    assert "frame:vllm/config/profiler.py:266" in match.evidence
    assert match.line == 7
    assert "error-class" in match.evidence


def test_wrong_exception_class_lowers_the_score(index: MatcherIndex) -> None:
    right = index.match("RuntimeError: Browser script result failed.").matches[0]
    wrong = index.match("TypeError: Browser script result failed.").matches[0]
    assert right.id == wrong.id == "61fab2d5ba541a04"
    assert wrong.score < right.score


# ---- reading logs as pasted ---------------------------------------------------------------


def test_keyerror_repr_quoting_is_understood(index: MatcherIndex) -> None:
    log = "KeyError: \"'graphs' must contain at least one variable name\"\n"
    (match,) = index.match(log).matches
    assert match.id == "cdba1ca5c401e1d8"


def test_message_split_over_lines_is_found(index: MatcherIndex) -> None:
    log = (
        NOISE
        + "RuntimeError: Error happened when batch testing peer-to-peer access from 0 to 1:\n"
        + "CUDA error: peer access is not supported between these two devices\n"
        + NOISE
    )
    (match,) = index.match(log).matches
    assert match.id == "df40c6d6e8f3249a"
    assert (match.line, match.end_line) == (5, 6)
    assert match.captures[:2] == ["0", "1"]


def test_pytest_prefixed_lines_and_ansi_colours_are_not_in_the_way(index: MatcherIndex) -> None:
    log = (
        "    def test_it():\n"
        ">       f()\n"
        "\x1b[1m\x1b[31mE   RuntimeError: Browser script result failed.\x1b[0m\n"
    )
    (match,) = index.match(log).matches
    assert (match.id, match.line) == ("61fab2d5ba541a04", 3)


def test_docker_compose_prefixes_and_crlf(index: MatcherIndex) -> None:
    log = (
        "api-1     | starting\r\n"
        "api-1     | ValueError: Cannot anchor impulse responses outside of the sample.\r\n"
        "worker-1  | ok\r\n"
    )
    (match,) = index.match(log.encode()).matches
    assert (match.id, match.line) == ("c1a1f8dbfb3e7cd2", 2)


def test_line_wrapped_by_an_80_column_terminal_is_joined(index: MatcherIndex) -> None:
    message = (
        "TypeError: Something went wrong when trying to set the new scale value, expected to "
        "find the old value to be of type float or torch.Tensor, got <class 'str'> instead."
    )
    wrapped = "\n".join(message[i : i + 80] for i in range(0, len(message), 80))
    (match,) = index.match("boot ok\n" + wrapped + "\n").matches
    assert match.id == "221d847bc3605f13"
    assert match.line == 2 and match.end_line == 1 + -(-len(message) // 80)


def test_two_errors_in_one_log_are_both_found_in_log_order(index: MatcherIndex) -> None:
    log = (
        NOISE
        + "ERROR [w1] job failed: RuntimeError: Browser script result failed.\n"
        + NOISE
        + "ERROR [w2] AssertionError: input_layouts and desired_input_layouts should have same"
        + " length!\n"
    )
    report = index.match(log)
    assert [(m.line, m.id) for m in report.in_log_order()] == [
        (5, "61fab2d5ba541a04"),
        (10, "e97e5e03526f82b5"),
    ]


def test_same_error_repeated_is_one_match_with_its_other_lines(index: MatcherIndex) -> None:
    line = "ValueError: Cannot anchor impulse responses outside of the sample.\n"
    (match,) = index.match(line + NOISE + line).matches
    assert match.line == 1 and match.occurrences == 2 and match.other_lines == [6]


def test_streams_and_paths_are_read_block_by_block(index: MatcherIndex, tmp_path: Path) -> None:
    log = NOISE * 3000 + "RuntimeError: Browser script result failed.\n" + NOISE * 10
    path = tmp_path / "x.log"
    path.write_text(log)
    for source in (path, io.BytesIO(log.encode()), io.StringIO(log), log, log.encode()):
        (match,) = index.match(source).matches  # type: ignore[arg-type]
        assert match.line == 12001


@pytest.mark.parametrize("threaded", [False, True])
def test_errors_at_block_edges_are_found_whether_blocks_are_scanned_in_a_thread_or_not(
    index: MatcherIndex, monkeypatch: pytest.MonkeyPatch, threaded: bool
) -> None:
    """Small blocks put errors (and a traceback) across block boundaries and into the carried
    lines; a big block's prefilter scan runs in a thread beside the work on the previous one."""
    import kb.logtext
    import kb.matcher.prefilter

    monkeypatch.setattr(kb.matcher.prefilter, "THREADED_SCAN_BYTES", 1 if threaded else 1 << 40)
    monkeypatch.setattr(kb.logtext, "BLOCK_BYTES", 65536)
    paste = (FIXTURES / "paste.log").read_text()
    log = (NOISE * 150 + paste) * 3 + NOISE * 5
    whole = [(m.line, m.id) for m in index.match(log.encode()).matches]
    assert len(whole) == 3  # one match per error, each with its other lines
    assert all(len(m.other_lines) == 2 for m in index.match(log.encode()).matches)
    expected = json.loads((FIXTURES / "paste.expected.json").read_text())
    assert sorted(i for _, i in whole) == sorted(p["id"] for p in expected["planted"])


def test_a_thread_scan_hands_the_gil_over_quickly_and_gives_the_interval_back(
    index: MatcherIndex, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Hyperscan takes the GIL back for each key it finds: while a block is scanned in a
    thread, the process switches threads every SCAN_SWITCH_INTERVAL, and afterwards at the
    interval it had (here a made-up one), also when the scan failed."""
    import sys
    import threading

    import kb.logtext
    from kb.matcher import prefilter

    monkeypatch.setattr(prefilter, "THREADED_SCAN_BYTES", 1)
    monkeypatch.setattr(kb.logtext, "BLOCK_BYTES", 65536)
    seen: list[tuple[bool, float]] = []
    scan = prefilter._scan

    def watched(*args: Any, **kwargs: Any) -> Any:
        in_thread = threading.current_thread() is not threading.main_thread()
        seen.append((in_thread, sys.getswitchinterval()))
        return scan(*args, **kwargs)

    monkeypatch.setattr(prefilter, "_scan", watched)
    before = sys.getswitchinterval()
    sys.setswitchinterval(0.0123)
    try:
        log = (NOISE * 150 + (FIXTURES / "paste.log").read_text()) * 3
        assert len(index.match(log.encode()).matches) == 3
        assert sys.getswitchinterval() == pytest.approx(0.0123)
        in_thread = [interval for threaded, interval in seen if threaded]
        assert in_thread and max(in_thread) == pytest.approx(prefilter.SCAN_SWITCH_INTERVAL)

        def broken(*_args: Any, **_kwargs: Any) -> Any:
            raise RuntimeError("scan failed")

        monkeypatch.setattr(prefilter, "_scan", broken)
        with pytest.raises(RuntimeError):
            index.match(log.encode())
        assert sys.getswitchinterval() == pytest.approx(0.0123)
    finally:
        sys.setswitchinterval(before)


def test_a_match_that_fails_mid_log_leaves_no_scan_running(
    index: MatcherIndex, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A failure while a log is read (here the reader raising, as Ctrl-C would) must not leave
    a block's scan running on the thread's scratch spaces: the next match would scan with
    them at the same time. Thread scans are slowed down so that an overlap would be seen."""
    import threading
    import time

    import kb.logtext
    from kb.matcher import prefilter

    monkeypatch.setattr(prefilter, "THREADED_SCAN_BYTES", 1)
    monkeypatch.setattr(kb.logtext, "BLOCK_BYTES", 65536)
    scan = prefilter.Prefilter.hits_by_line
    lock = threading.Lock()
    running: list[int] = []
    overlaps: list[int] = []

    def slow_scan(self: Any, data: bytes, in_thread: bool = False) -> Any:
        if not in_thread:
            return scan(self, data)
        with lock:
            running.append(1)
            if len(running) > 1:
                overlaps.append(1)
        time.sleep(0.2)
        try:
            return list(scan(self, data, in_thread))
        finally:
            with lock:
                running.pop()

    monkeypatch.setattr(prefilter.Prefilter, "hits_by_line", slow_scan)
    paste = (FIXTURES / "paste.log").read_text()
    log = ((NOISE * 150 + paste) * 4).encode()

    class Interrupted(io.BytesIO):
        def read(self, size: int | None = -1) -> bytes:
            if self.tell() > 150_000:
                raise KeyboardInterrupt
            return super().read(size)

    with pytest.raises(KeyboardInterrupt):
        index.match(Interrupted(log))
    assert len(index.match(log).matches) == 3
    assert not overlaps


# ---- captures, suggestions, fuzzy, codes --------------------------------------------------


def test_captures_are_whole_values_named_after_the_placeholders(index: MatcherIndex) -> None:
    log = "VLLMValidationError: max_tokens must be at least 1, got 0."
    (match,) = index.match(log).matches
    assert match.id == "a93fea4459463c58"
    assert match.captures == ["max_tokens", "0"]
    assert match.capture_names == ["parameter_name", "value"]


def test_did_you_mean_when_the_message_lists_the_valid_choices(index: MatcherIndex) -> None:
    log = (
        "ValueError: decode_backend must be one of ['flashinfer', 'cutlass', 'triton'], got 'trito'"
    )
    (match,) = index.match(log).matches
    assert match.id == "d0a42686e0448dcd"
    assert match.suggestion == "did you mean 'triton'?"


def test_reworded_message_comes_back_as_a_fuzzy_near_miss(index: MatcherIndex) -> None:
    log = "ValueError: Must provide an even number of non keyword arguments\n"
    (match,) = index.match(log).matches
    assert match.id == "3270e932489110b1"
    assert match.method == "fuzzy"
    assert match.score < 0.9  # a near miss never looks as sure as a match


def test_error_code_in_the_knowledge_base_is_found_but_log_levels_are_not(
    index: MatcherIndex,
) -> None:
    (match,) = index.match("AxiosError: ERR_BAD_RESPONSE something else\n").matches
    assert match.id == "00000000000000cc"
    assert match.method == "code"
    assert index.match("ERROR INFO WARN FATAL\n").matches == []


# ---- safety -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "line",
    [
        "hostile input " + "a" * 50_000,  # exponential for a backtracking engine
        "Expected " + "x but got " * 5_000 + " for y in",
        "token " + "abc " * 12_000 + "repeated as",
    ],
)
def test_hostile_lines_never_hang(index: MatcherIndex, line: str) -> None:
    started = time.perf_counter()
    report = index.match(line + "\n" + line + "\n", min_score=0)
    assert time.perf_counter() - started < 2.0
    assert report.stats["candidates"] >= 1  # the hostile pattern did run on the line


def test_guarded_pattern_still_matches_through_its_bounded_fallback(index: MatcherIndex) -> None:
    (match,) = index.match("token abc repeated as abc here\n", min_score=0).matches
    assert match.id == "00000000000000bb"
    assert index.match("token abc repeated as xyz here\n", min_score=0).matches == []


# ---- the cache ----------------------------------------------------------------------------


def test_cache_for_another_revision_is_ignored(index: MatcherIndex, tmp_path: Path) -> None:
    build_index(sources_from_records(fixture_records()[:3]), tmp_path, "rev-a")
    assert load_index(tmp_path, "rev-a") is not None
    assert load_index(tmp_path, "rev-b") is None


def test_missing_or_corrupt_cache_loads_as_none(tmp_path: Path) -> None:
    assert load_index(tmp_path, "x") is None
    (tmp_path / CACHE_FILE).write_bytes(b"not a database")
    assert load_index(tmp_path, "x") is None


def test_cache_is_written_atomically_and_is_self_sufficient(tmp_path: Path) -> None:
    build_index(sources_from_records(fixture_records()), tmp_path, "r1")
    assert sorted(p.name for p in tmp_path.iterdir()) == [CACHE_FILE]
    loaded = load_index(tmp_path, "r1")
    assert loaded is not None
    report = loaded.match(FIXTURES / "paste.log")
    assert {m.id for m in report.matches} == {
        "aa8d7e3a38cd7b97",
        "765d8cebe29fa6d4",
        "47b1f16ae78d5108",
    }


def test_written_cache_is_current_only_for_its_revision_and_format(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kb.matcher import cache

    assert not cache_is_current(tmp_path, "r1")
    write_index(sources_from_records(fixture_records()[:5]), tmp_path, "r1")
    assert cache_is_current(tmp_path, "r1")
    assert not cache_is_current(tmp_path, "r2")
    monkeypatch.setattr(cache, "FORMAT_VERSION", cache.FORMAT_VERSION + 1)
    assert not cache_is_current(tmp_path, "r1")
    assert load_index(tmp_path, "r1") is None  # a newer kb rebuilds an older kb's cache


def test_a_build_reports_its_progress_record_by_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kb.matcher import build

    monkeypatch.setattr(build, "BUILD_CHUNK", 7)
    records = fixture_records()
    steps: list[int] = []
    write_index(sources_from_records(records), tmp_path, "r1", steps.append)
    assert sum(steps) == len(records)
    assert len(steps) == -(-len(records) // 7) and max(steps) == 7


def test_a_build_in_small_chunks_writes_the_cache_one_chunk_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Patterns and near-miss templates seen in an earlier chunk are recognised by their
    digests (kb.matcher.build SEEN): each is kept once, with its first record, whatever the
    chunks. The records come three times: as they are, copied under new ids (every pattern
    repeats), and with another pattern for the same message (every template repeats, with a
    pattern of its own that the template's first record does not have)."""
    import sqlite3

    from kb.matcher import build

    records = fixture_records()
    copied = [{**record, "id": f"a{index:015x}"} for index, record in enumerate(records)]
    reworded = [
        {**record, "id": f"b{index:015x}", "messagePattern": record["messagePattern"] + " again"}
        for index, record in enumerate(records)
    ]

    def tables(chunk: int) -> dict[str, list[Any]]:
        monkeypatch.setattr(build, "BUILD_CHUNK", chunk)
        path = tmp_path / f"cache-{chunk}.sqlite3"
        build.write_cache_file(sources_from_records(records + copied + reworded), path, "r1")
        con = sqlite3.connect(path)
        try:
            names = [n for (n,) in con.execute("SELECT name FROM sqlite_master WHERE type='table'")]
            return {
                name: con.execute(f"SELECT * FROM {name}").fetchall()
                for name in names
                if name != "meta"
            }
        finally:
            con.close()

    whole = tables(len(records) * 3)
    assert tables(7) == whole
    assert whole["fuzzy"] and whole["patterns"]
    assert len(whole["records"]) == 3 * len(records)


@pytest.mark.parametrize("threaded", [False, True])
def test_sharded_prefilter_finds_what_one_database_finds(
    index: MatcherIndex, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, threaded: bool
) -> None:
    """Big knowledge bases compile their keys in several Hyperscan databases (bounded build
    memory); every shard is scanned, so the answers are the same as with one. A big block's
    shards are scanned in two threads, half each: the same answers again."""
    import sqlite3
    import threading

    from kb.matcher import build, prefilter

    monkeypatch.setattr(build, "SHARD_KEYS", 7)
    threads: set[str] = set()
    if threaded:
        monkeypatch.setattr(prefilter, "THREADED_SCAN_BYTES", 1)
        scan = prefilter._scan

        def watched(dbs: list[Any], *args: Any) -> Any:
            threads.add(threading.current_thread().name)
            return scan(dbs, *args)

        monkeypatch.setattr(prefilter, "_scan", watched)
    sharded = build_index(sources_from_records(fixture_records() + EXTRA), tmp_path, "rev")
    con = sqlite3.connect(tmp_path / CACHE_FILE)
    (shards,) = con.execute("SELECT COUNT(*) FROM shards").fetchone()
    (keys,) = con.execute("SELECT COUNT(*) FROM keys").fetchone()
    con.close()
    assert shards == -(-keys // 7) > 2
    text = (FIXTURES / "paste.log").read_bytes()
    one = [(m.line, m.id, m.score, m.evidence) for m in index.match(text).matches]
    assert len(one) == 3
    assert [(m.line, m.id, m.score, m.evidence) for m in sharded.match(text).matches] == one
    assert threads == ({"kb-scan", "kb-scan-2"} if threaded else set())


def test_prepared_patterns_from_the_importer_are_used_as_given(tmp_path: Path) -> None:
    from kb.patterns import prepare

    src = PatternSource(
        id="00000000000000ee",
        repo="x/y",
        message_pattern="(",  # invalid: matches through its message text
        error_message="Totally broken pattern for {thing} here",
        error_class="ValueError",
        error_code=None,
        file_path="y/z.py",
        line_number=3,
        prepared=prepare("(", "Totally broken pattern for {thing} here"),
    )
    loaded = build_index([src], tmp_path, "r")
    (match,) = loaded.match("ValueError: Totally broken pattern for gizmo here").matches
    assert match.id == "00000000000000ee" and match.captures == ["gizmo"]


# ---- the full shared corpus (skipped when ../shared is not there) ---------------------------


@pytest.fixture(scope="module")
def corpus_index(full_corpus_index: MatcherIndex) -> tuple[MatcherIndex, Path, dict[str, str]]:
    """The session's one full-corpus index (conftest.py, shared with tests/test_drift.py), the
    corpus folder, and each record's messagePattern (ties must share one)."""
    corpus = corpus_dir()
    assert corpus is not None  # full_corpus_index skips when it is missing
    with gzip.open(corpus / "records.jsonl.gz", "rt", encoding="utf-8") as fh:
        records = (json.loads(line)["record"] for line in fh)
        patterns = {r["id"]: r.get("messagePattern") or "" for r in records}
    return full_corpus_index, corpus, patterns


@pytest.mark.parametrize("name", ["paste", "big"])
def test_full_corpus_answers_every_planted_error_top_1_or_by_a_tie_of_the_same_pattern(
    corpus_index: tuple[MatcherIndex, Path, dict[str, str]], name: str
) -> None:
    """Each planted error is the best record of the match at its line, or ties with it on an
    identical pattern (nothing in the log can tell such records apart); a right record listed
    below a wrong one does not count, and nothing is found off the planted lines."""
    index, corpus, patterns = corpus_index
    expected = json.loads((corpus / "logs" / f"{name}.expected.json").read_text())
    report = index.match(corpus / "logs" / f"{name}.log")
    how: Counter[str] = Counter()
    for planted in expected["planted"]:
        found = answers(report.matches, planted)
        if any(way == TOP_1 for _, way in found):
            how[TOP_1] += 1
        elif any(way == TIE and patterns[m.id] == patterns[planted["id"]] for m, way in found):
            how[TIE] += 1
        else:
            how[f"missed {planted['id']} at line {planted['line']}"] += 1
    assert how[TOP_1] + how[TIE] == len(expected["planted"]), how
    planted_lines = {p["line"] for p in expected["planted"]}
    assert [m.line for m in report.matches if m.line not in planted_lines] == []


# ---- report formats people paste ------------------------------------------------------------

PANDAS = "/home/me/.venv/lib/python3.11/site-packages/pandas"


def test_jupyter_traceback_with_context_lines(index: MatcherIndex) -> None:
    log = (
        "---------------------------------------------------------------------------\n"
        "KeyError                                  Traceback (most recent call last)\n"
        "Cell In[3], line 4\n"
        "      1 import pandas as pd\n"
        '----> 4 df.set_index("customer_id")\n'
        "\n"
        f"File {PANDAS}/core/frame.py:7891, in DataFrame.set_index(self, keys, drop)\n"
        "   7889         missing.append(col)\n"
        "   7890 if missing:\n"
        '-> 7891     raise KeyError(f"None of {missing} are in the columns")\n'
        "\n"
        "KeyError: \"None of ['customer_id'] are in the columns\"\n"
    )
    (match,) = index.match(log).matches
    assert (match.id, match.line) == ("765d8cebe29fa6d4", 12)
    assert "frame:pandas/core/frame.py:7891" in match.evidence


@pytest.mark.parametrize("threaded", [False, True])
def test_pytest_long_report_and_its_short_summary_are_one_match(
    index: MatcherIndex, monkeypatch: pytest.MonkeyPatch, threaded: bool
) -> None:
    """The raise-site line ("frame.py:7891: KeyError") is found by `re` in a small block and
    by Hyperscan in the scanning thread in a big one: the same match and frame either way."""
    import kb.matcher.prefilter

    monkeypatch.setattr(kb.matcher.prefilter, "THREADED_SCAN_BYTES", 1 if threaded else 1 << 40)
    log = (
        "    def test_index():\n"
        '>       df.set_index("customer_id")\n'
        "\n"
        "tests/test_x.py:5: \n"
        "_ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _\n"
        '>           raise KeyError(f"None of {missing} are in the columns")\n'
        "E           KeyError: \"None of ['customer_id'] are in the columns\"\n"
        "\n"
        f"{PANDAS}/core/frame.py:7891: KeyError\n"
        "=========================== short test summary info ============================\n"
        "FAILED tests/test_x.py::test_index - KeyError: \"None of ['customer_id'] are in the"
        ' columns"\n'
    )
    (match,) = index.match(log).matches
    assert (match.id, match.line, match.other_lines) == ("765d8cebe29fa6d4", 7, [11])
    assert "frame:pandas/core/frame.py:7891" in match.evidence


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"tests/test_x.py:5: \n",
        b"a.py:1: x b.py:22: y\nno location here\r\nc.py:333: \n",
        b"x.py: 1: not one\n.py:7:no space\n[loggers.py:123] Engine\n",
        b"\xff\xfe caf\xc3\xa9 d.py:9: KeyError",  # not UTF-8, no newline at the end
        b"\n\n\ne.py:10: \n\n" * 3,
        b"f.py:1: g.py:2: \n",  # two on one line
    ],
)
def test_pytest_locations_are_the_same_lines_from_re_and_hyperscan(data: bytes) -> None:
    from kb.matcher.prefilter import Prefilter, pytest_locations

    prefilter = Prefilter(None, 0)  # type: ignore[arg-type]  # the reader is not asked
    assert prefilter.pytest_lines(data) == pytest_locations(data)
    assert prefilter.pytest_lines(data * 2) == pytest_locations(data * 2)  # compiled once


def test_exception_group_sub_tracebacks_are_read(index: MatcherIndex) -> None:
    log = (
        "  + Exception Group Traceback (most recent call last):\n"
        '  |   File "/home/me/app.py", line 9, in <module>\n'
        "  | ExceptionGroup: many (1 sub-exception)\n"
        "  +-+---------------- 1 ----------------\n"
        "    | Traceback (most recent call last):\n"
        f'    |   File "{SITE}/openai/lib/browser.py", line 1093, in run\n'
        "    | RuntimeError: Browser script result failed.\n"
        "    +------------------------------------\n"
    )
    (match,) = index.match(log).matches
    assert (match.id, match.line) == ("61fab2d5ba541a04", 7)
    assert "frame:openai/lib/browser.py:1093" in match.evidence


# ---- lessons from real logs -----------------------------------------------------------------


def test_source_line_behind_a_docker_prefix_is_not_an_error(index: MatcherIndex) -> None:
    log = (
        'web-1  |   File "/usr/local/lib/python3.11/site-packages/django/apps/registry.py",'
        " line 138, in check_apps_ready\n"
        'web-1  |     raise AppRegistryNotReady("Apps aren\'t loaded yet.")\n'
        "web-1  | django.core.exceptions.AppRegistryNotReady: Apps aren't loaded yet.\n"
    )
    (match,) = index.match(log).matches
    assert (match.id, match.line) == ("bf3e8a396600520e", 3)
    assert match.other_lines == []


def test_logger_rows_wrapped_at_80_columns_are_joined(index: MatcherIndex) -> None:
    prefix = "2026-03-14T15:30:07.646Z ERROR [api] "
    text = (
        prefix
        + "sqlalchemy.orm.exc.DetachedInstanceError: Parent instance <User at 0x7fa43efbb090>"
        " is not bound to a Session; lazy load operation of attribute 'addresses' cannot proceed"
        " (Background on this error at: https://sqlalche.me/e/21/bhk3)"
    )
    rows = [text[i : i + 80] for i in range(0, len(text), 80)]
    longer = "2026-03-14T15:30:07.600Z INFO  [api] GET /users/1 200 in 12ms " + "x" * 40
    log = "\n".join([longer, *rows, longer]) + "\n"
    (match,) = index.match(log).matches
    assert match.id == "41155f26652fd6ba"
    assert (match.line, match.end_line) == (2, 1 + len(rows))
    assert match.captures == ["<User at 0x7fa43efbb090>", "addresses"]


def test_dotted_class_names_the_package_that_raised(index: MatcherIndex) -> None:
    (match,) = index.match("packaging.version.InvalidVersion: Invalid version: '1.0-rc'").matches
    assert match.id == "068f17d5e7855248"  # not pandas' identical-looking message
    assert "package:packaging" in match.evidence


def test_message_raised_inside_another_known_library_is_not_claimed(
    index: MatcherIndex,
) -> None:
    log = (
        "Traceback (most recent call last):\n"
        f'  File "{SITE}/click/globals.py", line 36, in get_current_context\n'
        '    return t.cast("Context", _local.stack[-1])\n'
        "AttributeError: '_thread._local' object has no attribute 'stack'\n"
    )
    assert index.match(log).matches == []


def test_placeholder_at_the_end_may_render_empty(index: MatcherIndex) -> None:
    log = (
        "MergeError: Merge keys are not unique in left dataset; not a one-to-one merge\n"
        "Duplicates in left:\n"
    )
    (match,) = index.match(log).matches
    assert (match.id, match.line) == ("11a4264234a6b669", 1)


def test_short_paste_of_a_reworded_message_without_class_is_a_near_miss(
    index: MatcherIndex,
) -> None:
    log = "After upgrading I get this on startup:\n\n> Apps are not loaded yet.\n\nAny idea?\n"
    (match,) = index.match(log).matches
    assert (match.id, match.line, match.method) == ("bf3e8a396600520e", 3, "fuzzy")


# ---- the real logs of tests/fixtures/reallogs (made by its generate.py) ----------------------

REALLOGS = Path(__file__).parent / "fixtures" / "reallogs"


def _real_logs() -> list[Path]:
    return sorted(REALLOGS.glob("*.expected.json"))


@pytest.fixture(scope="module")
def reallogs_index(tmp_path_factory: pytest.TempPathFactory) -> MatcherIndex:
    if not (REALLOGS / "records.jsonl.gz").is_file() or not _real_logs():
        pytest.skip("tests/fixtures/reallogs is not generated")
    with gzip.open(REALLOGS / "records.jsonl.gz", "rt", encoding="utf-8") as fh:
        recs = [json.loads(line)["record"] for line in fh]
    return build_index(sources_from_records(recs), tmp_path_factory.mktemp("real"), "real")


def test_real_logs_answer_every_expected_error_as_the_real_log_suite_accepts_and_nothing_else(
    reallogs_index: MatcherIndex,
) -> None:
    """The first development set again, straight through MatcherIndex (tests/test_reallogs.py
    goes through KnowledgeBase), counting how each expected error is answered."""
    how: Counter[str] = Counter()
    extra: list[str] = []
    for expected_path in _real_logs():
        expected = json.loads(expected_path.read_text())
        log = expected_path.with_name(expected["file"])
        report = reallogs_index.match(log)
        used: set[int] = set()
        for want in expected["expected"]:
            way = best_answer(report.matches, want)
            how[way if way != "missed" else f"missed {want['id']} in {log.name}"] += 1
            used.update(id(m) for m, _ in answers(report.matches, want))
        extra += [
            f"{log.name}: {m.id} at line {m.line}" for m in report.matches if id(m) not in used
        ]
    total = sum(how.values())
    accepted = how[TOP_1] + how[KEY_ALTERNATIVE] + how[TIE] + how[NEAR_MISS_ALTERNATIVE]
    assert accepted == total, how
    assert extra == []


def test_message_whose_value_spans_lines_is_found(index: MatcherIndex) -> None:
    log = (
        NOISE
        + "ValueError: Weight input_size_per_partition = tensor([[1, 2],\n"
        + "        [3, 4]]) is not divisible by weight quantization block_k = 42.\n"
        + NOISE
    )
    (match,) = index.match(log).matches
    assert match.id == "f38963f18f2e15c4"
    assert (match.line, match.end_line) == (5, 6)
    assert match.captures == ["tensor([[1, 2],\n        [3, 4]])", "42"]


def test_javascript_stack_below_the_message_is_evidence(index: MatcherIndex) -> None:
    log = (
        "AxiosError: Request failed with status code 404\n"
        "    at settle (/app/node_modules/axios/lib/core/settle.js:19:12)\n"
        "    at IncomingMessage.handleStreamEnd"
        " (/app/node_modules/axios/lib/adapters/http.js:599:11)\n"
    )
    (match,) = index.match(log).matches
    assert match.id == "00000000000000cc"
    assert match.captures == ["404"]
    assert "frame:lib/core/settle.js:19" in match.evidence


def test_rich_traceback_box_is_read(index: MatcherIndex) -> None:
    bar = "─" * 30
    log = (
        f"╭{bar} Traceback (most recent call last) {bar}╮\n"
        "│ /home/me/app.py:5 in <module>                                            │\n"
        "│                                                                          │\n"
        '│ ❱ 5 df.set_index("customer_id")                                          │\n'
        "│                                                                          │\n"
        f"│ {PANDAS}/core/frame.py:7891 in set_index │\n"
        "│                                                                          │\n"
        "│   7890 │   if missing:                                                   │\n"
        '│ ❱ 7891 │   │   raise KeyError(f"None of {missing} are in the columns")   │\n'
        f"╰{bar * 2}╯\n"
        "KeyError: \"None of ['customer_id'] are in the columns\"\n"
    )
    (match,) = index.match(log).matches
    assert (match.id, match.line) == ("765d8cebe29fa6d4", 11)
    assert "frame:pandas/core/frame.py:7891" in match.evidence


def test_traceback_inside_a_json_log_record_is_unpacked(index: MatcherIndex) -> None:
    record = {
        "ts": "2026-03-14T08:00:00Z",
        "level": "error",
        "msg": "job failed",
        "exc_info": "Traceback (most recent call last):\n"
        f'  File "{SITE}/openai/lib/browser.py", line 1093, in run\n'
        '    raise RuntimeError("Browser script result failed.")\n'
        "RuntimeError: Browser script result failed.",
    }
    log = '{"level": "info", "msg": "start"}\n' + json.dumps(record) + "\n"
    (match,) = index.match(log).matches
    assert (match.id, match.line, match.occurrences) == ("61fab2d5ba541a04", 2, 1)
    assert "frame:openai/lib/browser.py:1093" in match.evidence


def test_go_panic_with_module_cache_frames(index: MatcherIndex) -> None:
    log = (
        "panic: connection pool exhausted after 3 retries\n"
        "\n"
        "goroutine 1 [running]:\n"
        "github.com/acme/pool.(*Pool).Get(...)\n"
        "\t/home/me/go/pkg/mod/github.com/acme/pool@v1.2.0/pool.go:88 +0x1d\n"
        "main.main()\n"
        "\t/app/main.go:12 +0x25\n"
        "exit status 2\n"
    )
    (match,) = index.match(log).matches
    assert (match.id, match.line, match.captures) == ("00000000000000ff", 1, ["3"])
    assert "frame:github.com/acme/pool/pool.go:88" in match.evidence


def test_info_and_warn_chatter_that_quotes_known_messages_comes_back_empty(
    index: MatcherIndex,
) -> None:
    assert index.match(FIXTURES / "clean_chatter.log").matches == []


def test_the_same_words_as_an_exception_are_claimed(index: MatcherIndex) -> None:
    line = "2026-03-14T08:00:03Z ERROR [cfg] ValueError: batch_size must be a positive integer"
    (match,) = index.match(line).matches
    assert match.id == "f6ca35557115c448"


def test_match_can_be_called_from_several_threads(index: MatcherIndex) -> None:
    from concurrent.futures import ThreadPoolExecutor

    log = (FIXTURES / "paste.log").read_text()
    with ThreadPoolExecutor(4) as pool:
        reports = list(pool.map(lambda _: index.match(log), range(8)))
    assert all(len(r.matches) == 3 for r in reports)


# ---- where people paste from ------------------------------------------------------------------


def test_github_actions_annotation_prefix(index: MatcherIndex) -> None:
    log = "2026-03-14T08:00:00.1234567Z ##[error]RuntimeError: Browser script result failed.\n"
    (match,) = index.match(log).matches
    assert (match.id, match.line) == ("61fab2d5ba541a04", 1)
    assert "error-class" in match.evidence


def test_class_in_markdown_backticks_is_recognised(index: MatcherIndex) -> None:
    log = "*Alert* job crashed: `RuntimeError: Browser script result failed.`\n"
    (match,) = index.match(log).matches
    assert match.id == "61fab2d5ba541a04"
    assert "error-class" in match.evidence


@pytest.mark.parametrize("quote", ["    ", "> ", ">     ", "> > "])
def test_traceback_pasted_indented_or_quoted(index: MatcherIndex, quote: str) -> None:
    body = (
        "Traceback (most recent call last):\n"
        f'  File "{SITE}/openai/lib/browser.py", line 1093, in run\n'
        "RuntimeError: Browser script result failed.\n"
    )
    log = "Hi, I get this:\n\n" + "".join(quote + line + "\n" for line in body.splitlines())
    (match,) = index.match(log).matches
    assert (match.id, match.line) == ("61fab2d5ba541a04", 5)
    assert "frame:openai/lib/browser.py:1093" in match.evidence


def test_logfmt_field_with_escaped_quotes(index: MatcherIndex) -> None:
    log = (
        'ts=2026-03-14T08:00:00Z level=error msg="job failed" '
        'error="KeyError: \\"None of [\'customer_id\'] are in the columns\\""\n'
    )
    (match,) = index.match(log).matches
    assert match.id == "765d8cebe29fa6d4"


def test_an_empty_knowledge_base_matches_nothing_without_failing(tmp_path: Path) -> None:
    empty = build_index([], tmp_path, "empty")
    report = empty.match(FIXTURES / "paste.log")
    assert report.matches == [] and report.stats["records"] == 0


def test_message_printed_before_its_traceback_is_one_match(index: MatcherIndex) -> None:
    log = (
        "[ERROR] RuntimeError: Browser script result failed.\n"
        "Traceback (most recent call last):\n"
        f'  File "{SITE}/openai/lib/browser.py", line 1093, in run\n'
        '    raise RuntimeError("Browser script result failed.")\n'
        "END RequestId: 3f6c1e0a-8b2d-4c57-9e41-7d2a9b0c5e18\n"
    )
    (match,) = index.match(log).matches
    assert (match.id, match.line) == ("61fab2d5ba541a04", 1)


def test_string_lines_of_a_pretty_printed_json_are_not_source_code(index: MatcherIndex) -> None:
    log = (
        "{\n"
        '  "output_type": "error",\n'
        '  "ename": "RuntimeError",\n'
        '  "evalue": "Browser script result failed.",\n'
        '  "traceback": []\n'
        "}\n"
    )
    (match,) = index.match(log).matches
    assert (match.id, match.line) == ("61fab2d5ba541a04", 4)


def test_reworded_repr_quoted_keyerror_is_a_near_miss(index: MatcherIndex) -> None:
    log = "KeyError: \"'graphs' must contain at least one variable\"\n"
    (match,) = index.match(log).matches
    assert (match.id, match.method) == ("cdba1ca5c401e1d8", "fuzzy")


def test_pytest_summary_that_cuts_the_value_short_is_the_same_error(index: MatcherIndex) -> None:
    log = (
        '  File "/venv/lib/python3.11/site-packages/packaging/version.py", line 466, in __init__\n'
        "packaging.version.InvalidVersion: Invalid version: '2.1.0-final-rc'\n"
        "=========================== short test summary info ============================\n"
        "FAILED tests/test_v.py::test_parse - packaging.version.InvalidVersion: Invalid "
        "version: '2.1.0-...\n"
    )
    report = index.match(log)
    assert [(m.id, m.line, m.other_lines) for m in report.matches] == [("068f17d5e7855248", 2, [4])]
    assert report.matches[0].captures == ["'2.1.0-final-rc'"]


def test_reworded_message_scores_with_its_placeholders_free_to_hold_values() -> None:
    from kb.matcher.cache import normalize_template
    from kb.matcher.fuzzy import align, gap_template

    def gap_similarity(template: str, line: str) -> float:
        return align(template, line).gap

    template = gap_template("No such transport: {transport}.  Did you mean {alt}?")
    reworded = normalize_template("Unknown transport: amqps2. Did you mean amqps?")
    unrelated = normalize_template("Process completed with exit code 1.")
    assert gap_similarity(template, reworded) > 0.8
    assert gap_similarity(template, unrelated) < 0.5
    # A value may fill a placeholder, not replace the template's own words.
    died = gap_template("Process {name} (PID: {pid}) died with exit code {code}")
    assert (
        gap_similarity(died, normalize_template("Process worker-3 died with exit code 1.")) > 0.95
    )
    # Mostly placeholders cannot claim a line that is mostly other text.
    assert (
        gap_similarity(
            gap_template("{a} failed: {b}"),
            normalize_template(
                "compile step for the documentation site failed: see the log above for details"
            ),
        )
        < 0.5
    )


def test_a_number_ending_a_sentence_keeps_its_period() -> None:
    from kb.matcher.cache import normalize_template

    assert normalize_template("n_clusters=5.") == normalize_template("n_clusters={k}.")


def _index_of(tmp_path: Path, records: list[dict[str, Any]]) -> MatcherIndex:
    return build_index(sources_from_records(records), tmp_path, "rev")


LOOKALIKES = [
    synthetic(
        "0000000000000b01",
        "(.+?) must be positive",
        "{name} must be positive",
        errorClass="ValueError",
        repo="acme/tensors",
        filePath="tensors/checks.py",
        lineNumber=40,
    ),
    synthetic(
        "0000000000000b02",
        "division by zero",
        "division by zero",
        errorClass="ZeroDivisionError",
        repo="acme/tensors",
        filePath="tensors/ops.py",
        lineNumber=12,
    ),
]


def test_an_error_raised_in_the_users_own_code_is_not_a_librarys(tmp_path: Path) -> None:
    index = _index_of(tmp_path, LOOKALIKES)
    user = (
        "Traceback (most recent call last):\n"
        '  File "/home/me/proj/main.py", line 30, in <module>\n'
        '    raise ValueError("batch_size must be positive")\n'
        "ValueError: batch_size must be positive\n"
    )
    assert index.match(user).matches == []
    library = user.replace(
        "/home/me/proj/main.py", "/venv/lib/python3.11/site-packages/tensors/checks.py"
    ).replace("line 30", "line 40")
    assert [m.id for m in index.match(library).matches] == ["0000000000000b01"]


def test_pythons_own_messages_need_a_frame_to_be_claimed(tmp_path: Path) -> None:
    index = _index_of(tmp_path, LOOKALIKES)
    assert index.match("ZeroDivisionError: division by zero\n").matches == []
    with_frame = (
        "Traceback (most recent call last):\n"
        '  File "/venv/lib/python3.11/site-packages/tensors/ops.py", line 12, in div\n'
        "    return a / b\n"
        "ZeroDivisionError: division by zero\n"
    )
    assert [m.id for m in index.match(with_frame).matches] == ["0000000000000b02"]


def test_consecutive_tracebacks_keep_their_own_frames(tmp_path: Path) -> None:
    index = _index_of(tmp_path, LOOKALIKES)
    log = (
        "Traceback (most recent call last):\n"
        '  File "/home/me/proj/main.py", line 30, in <module>\n'
        '    raise ValueError("batch_size must be positive")\n'
        "ValueError: batch_size must be positive\n"
        "Traceback (most recent call last):\n"
        '  File "/venv/lib/python3.11/site-packages/tensors/checks.py", line 40, in check\n'
        '    raise ValueError(f"{name} must be positive")\n'
        "ValueError: lr must be positive\n"
    )
    assert [(m.id, m.line) for m in index.match(log).matches] == [("0000000000000b01", 8)]


def test_a_short_template_whose_values_fill_most_of_the_line_is_too_thin_alone(
    tmp_path: Path,
) -> None:
    thin = synthetic(
        "0000000000000b03",
        "Could not find (.+?)\\.(.+?)",
        "Could not find {collection}.{name}",
        repo="acme/galaxy",
        filePath="galaxy/find.py",
        lineNumber=7,
        errorClass="AnsibleError",
    )
    index = _index_of(tmp_path, [thin])
    pip = (
        "ERROR: Could not find a version that satisfies the requirement torch==9.9 "
        "(from versions: none)\n"
    )
    assert index.match(pip).matches == []
    # one common phrase needs more than its words to be reported: its class, or a frame
    assert index.match("ERROR: Could not find community.general\n").matches == []
    found = index.match("ERROR: AnsibleError: Could not find community.general\n").matches
    assert [m.id for m in found] == ["0000000000000b03"]


def test_standard_library_messages_need_a_frame_too(tmp_path: Path) -> None:
    json_lookalike = synthetic(
        "0000000000000b04",
        "Object of type (.+?) is not JSON serializable",
        "Object of type {type(obj)} is not JSON serializable",
        errorClass="TypeError",
        repo="acme/tensors",
        filePath="tensors/serialize.py",
        lineNumber=3,
    )
    index = _index_of(tmp_path, [json_lookalike])
    assert (
        index.match("TypeError: Object of type datetime is not JSON serializable\n").matches == []
    )


def test_a_near_miss_printed_under_another_exception_class_is_not_claimed(
    tmp_path: Path,
) -> None:
    revision = synthetic(
        "0000000000000b05",
        "Revision '(.+?)' not found in the model repository\\.",
        "Revision '{revision}' not found in the model repository.",
        errorClass="RevisionNotFoundError",
        repo="acme/hub",
        filePath="hub/revisions.py",
        lineNumber=9,
    )
    index = _index_of(tmp_path, [revision])
    same_class = "RevisionNotFoundError: Revision 'v2' was not found in the model repository.\n"
    other_class = "ApiException: Revision 'v2' was not found in the model repository.\n"
    assert [m.method for m in index.match(same_class).matches] == ["fuzzy"]
    assert index.match(other_class).matches == []


# ---- other versions of a library (issue 10) -------------------------------------------------

DRIFT_RECORDS = [
    synthetic(
        "000000000000d001",
        "No GPU or Intel XPU found\\. A GPU or Intel XPU is needed for quantization\\.",
        "No GPU or Intel XPU found. A GPU or Intel XPU is needed for quantization.",
        errorClass="RuntimeError",
        repo="huggingface/accelerate",
        filePath="accelerate/utils/bnb.py",
        lineNumber=158,
        documentation="Raised as `RuntimeError` by `load_and_quantize_model` "
        "(accelerate/utils/bnb.py) in the accelerate project.",
    ),
    synthetic(
        "000000000000d002",
        "No GPU found\\. A GPU is needed for quantization\\.",
        "No GPU found. A GPU is needed for quantization.",
        errorClass="RuntimeError",
        repo="huggingface/accelerate",
        filePath="accelerate/utils/bnb.py",
        lineNumber=209,
        documentation="Raised as `RuntimeError` by `get_quantized_model_device_map` "
        "(accelerate/utils/bnb.py) in the accelerate project.",
    ),
    synthetic(
        "000000000000d003",
        "'labels' should contain at least one label\\.",
        "'labels' should contain at least one label.",
        errorClass="ValueError",
        repo="scikit-learn/scikit-learn",
        filePath="sklearn/metrics/_classification.py",
        lineNumber=564,
    ),
    synthetic(
        "000000000000d004",
        "dropna must be unspecified as the new implementation does not introduce rows of NA "
        "values\\. This argument will be removed in a future version of pandas\\.",
        "dropna must be unspecified as the new implementation does not introduce rows of NA "
        "values. This argument will be removed in a future version of pandas.",
        errorClass="ValueError",
        repo="pandas-dev/pandas",
        filePath="pandas/core/frame.py",
        lineNumber=14364,
    ),
    synthetic(
        "000000000000d005",
        "(.+?) not implemented",
        "{func} not implemented",
        errorClass="NotImplementedError",
        repo="sympy/sympy",
        filePath="sympy/core/function.py",
        lineNumber=10,
    ),
    synthetic(
        "000000000000d006",
        "MRV set computation for derivatives not implemented yet\\.",
        "MRV set computation for derivatives not implemented yet.",
        errorClass="NotImplementedError",
        repo="sympy/sympy",
        filePath="sympy/series/gruntz.py",
        lineNumber=317,
    ),
]


DRIFT_RECORDS.append(
    synthetic(
        "000000000000d007",
        "Connection closed",
        "Connection closed",
        errorClass="ConnectionError",
        repo="redis/redis-py",
        filePath="redis/connection.py",
        lineNumber=20,
    )
)


@pytest.fixture(scope="module")
def drift_index(tmp_path_factory: pytest.TempPathFactory) -> MatcherIndex:
    cache = tmp_path_factory.mktemp("drift-cache")
    return build_index(sources_from_records(fixture_records() + DRIFT_RECORDS), cache, "rev")


def test_the_frames_function_names_the_record_when_an_older_release_reworded_it(
    drift_index: MatcherIndex,
) -> None:
    """The old message is, word for word, another function's message in the same file: the
    raising frame's function decides, and the reworded record of that function is found."""
    log = (
        "Traceback (most recent call last):\n"
        '  File "/home/me/app/quantize.py", line 12, in <module>\n'
        "    load_and_quantize_model(model)\n"
        f'  File "{SITE}/accelerate/utils/bnb.py", line 153, in load_and_quantize_model\n'
        '    raise RuntimeError("No GPU found. A GPU is needed for quantization.")\n'
        "RuntimeError: No GPU found. A GPU is needed for quantization.\n"
    )
    (match,) = drift_index.match(log).matches
    assert match.id == "000000000000d001" and match.method == "fuzzy"
    assert "frame:accelerate/utils/bnb.py:153" in match.evidence
    # without the traceback, the exact words stand
    assert drift_index.match(log.splitlines()[-1]).matches[0].id == "000000000000d002"


def test_a_repr_quoted_exception_in_a_log_line_is_matched(drift_index: MatcherIndex) -> None:
    log = (
        "[2026-11-30 18:07:03,484: ERROR/ForkPoolWorker-3] Task shop.tasks.nightly[3ec5] raised "
        "unexpected: ValueError(\"'labels' should contains at least one label.\")\n"
    )
    (match,) = drift_index.match(NOISE + log + NOISE).matches
    assert match.id == "000000000000d003" and "error-class" in match.evidence


def test_a_message_cut_short_is_read_as_the_start_of_its_template(
    drift_index: MatcherIndex,
) -> None:
    log = (
        "Run failed · ValueError: dropna must be unspecified with future_stack=True as the new "
        "implementation does not introduce rows of NA values. This argument…\n"
    )
    (match,) = drift_index.match(log).matches
    assert match.id == "000000000000d004" and match.method == "fuzzy"
    assert any(e.startswith("cut:") for e in match.evidence)


def test_a_message_hard_wrapped_over_lines_of_a_paste_is_read_as_one(
    drift_index: MatcherIndex,
) -> None:
    log = (
        "Copied from the report:\n"
        "dropna must be unspecified with future_stack=True as the new implementation\n"
        "does not introduce rows of NA values. This argument will be removed in a\n"
        "future version of pandas.\n"
    )
    (match,) = drift_index.match(log).matches
    assert match.id == "000000000000d004"
    assert (match.line, match.end_line) == (2, 4)


def test_a_phrase_never_outranks_a_specific_template_reading_the_same_line(
    drift_index: MatcherIndex,
) -> None:
    """`{func} not implemented` matches the line exactly, but a specific template reads all of
    it but a typo; the phrase stays an alternative. Alone, without its class, the phrase is
    not reported at all."""
    line = "NotImplementedError: MRV set computation for derviatives not implemented yet."
    (match,) = drift_index.match(line).matches
    assert match.id == "000000000000d006"
    assert "000000000000d005" in [alt for alt, _score in match.alternatives]
    assert drift_index.match("INFO: the exporter for parquet not implemented").matches == []


def test_two_common_words_inside_a_daemons_line_are_not_a_known_error(
    drift_index: MatcherIndex,
) -> None:
    """The phrase needs its class, a frame or its package to be reported at all."""
    sshd = (
        "Nov 30 17:28:02 gpu-node-2 sshd[991]: Connection closed by authenticating user root "
        "10.0.0.5 port 51234 [preauth]\n"
    )
    assert drift_index.match(sshd).matches == []
    raised = drift_index.match("redis.exceptions.ConnectionError: Connection closed\n").matches
    assert [m.id for m in raised] == ["000000000000d007"]


# ---- what no record explains ------------------------------------------------------------------


def test_a_traceback_no_record_explains_is_listed_with_its_library_frame(
    drift_index: MatcherIndex,
) -> None:
    log = (
        NOISE
        + "Traceback (most recent call last):\n"
        + '  File "/home/me/app/run.py", line 3, in <module>\n'
        + f'  File "{SITE}/zzlib/core.py", line 88, in spin\n'
        + "zzlib.errors.RotorError: rotor alpha jammed\n"
        + NOISE
    )
    report = drift_index.match(log)
    assert report.matches == []
    (entry,) = report.unmatched
    assert entry.to_dict() == {
        "line": 8,
        "text": "zzlib.errors.RotorError: rotor alpha jammed",
        "error_class": "zzlib.errors.RotorError",
        "frame": "zzlib/core.py:88",
        "occurrences": 1,
        "suggestions": [],
    }


def test_unknown_error_lines_are_folded_and_known_ones_are_not_listed(
    drift_index: MatcherIndex,
) -> None:
    log = (
        "2026-03-14T08:00:01Z ERROR [worker] sync failed: upstream returned 502\n"
        + NOISE
        + "2026-03-14T08:00:09Z ERROR [worker] sync failed: upstream returned 502\n"
        + "ValueError: 'labels' should contain at least one label.\n"
    )
    report = drift_index.match(log)
    assert [m.id for m in report.matches] == ["000000000000d003"]
    (entry,) = report.unmatched
    assert entry.line == 1 and entry.occurrences == 2 and entry.error_class is None
    assert drift_index.match(NOISE).unmatched == []  # a clean log: nothing to list


def test_suggestions_come_from_the_search_given_for_the_first_unmatched_lines(
    drift_index: MatcherIndex,
) -> None:
    report = drift_index.match("zzlib.errors.RotorError: rotor alpha jammed\n")
    asked: list[str] = []

    def search(words: str, limit: int) -> list[dict[str, Any]]:
        asked.append(words)
        return [{"id": "000000000000d003", "score": 0.5, "errorMessage": "x", "repo": "r"}]

    report.add_suggestions(search)
    assert asked and report.unmatched[0].suggestions == [
        {"id": "000000000000d003", "score": 0.5, "errorMessage": "x"}
    ]


def test_a_short_pastes_exact_words_also_list_the_record_that_says_them_reworded(
    corpus_index: tuple[MatcherIndex, Path, dict[str, str]],
) -> None:
    """scipy 1.10's CSR check printed "index pointer values must form a non-decreasing
    sequence": word for word another record's message today, while the same check now says
    "indptr must be a non-decreasing sequence" (the drift set's dd4c155d299). Without a frame
    the exact reading stays first; the rewording is listed below it."""
    index, _corpus, _patterns = corpus_index
    paste = b"ValueError: index pointer values must form a non-decreasing sequence\n"
    report = index.match(paste, top=3)
    assert len(report.matches) == 1
    match = report.matches[0]
    assert match.method == "pattern"
    alternatives = [rid for rid, _score in match.alternatives]
    assert "f01f4b9ea78d25a1" in alternatives
    assert all(score < match.score for _rid, score in match.alternatives)
