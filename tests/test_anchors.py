"""kb.matcher.anchors: a short text's keys found by its words give what the full Hyperscan
databases give, and a match takes that path only while it costs less than loading them."""

from __future__ import annotations

import gzip
import json
import sqlite3
from pathlib import Path
from typing import Any

import hyperscan
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kb.matcher import CACHE_FILE, MatcherIndex, build_index, load_index, sources_from_records
from kb.matcher import prefilter as prefilter_module
from kb.matcher.anchors import (
    MAX_RUNS,
    anchor_of,
    bitmap_of,
    hits_in,
    may_be_anchors,
    windows,
)

REALLOGS = Path(__file__).parent / "fixtures" / "reallogs"
MATCHER = Path(__file__).parent / "fixtures" / "matcher"


def every_occurrence(keys: list[bytes], data: bytes) -> list[tuple[int, int]]:
    """The oracle: Hyperscan's own literal scan, every (end, key id), overlaps included."""
    db = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
    db.compile(
        expressions=keys,
        ids=list(range(len(keys))),
        elements=len(keys),
        flags=[0] * len(keys),
        literal=True,
    )
    hits: list[tuple[int, int]] = []

    def on_hit(key_id: int, _from: int, to: int, _flags: int, _ctx: Any) -> None:
        hits.append((to, key_id))

    db.scan(data, match_event_handler=on_hit)
    return sorted(hits)


def by_anchors(keys: list[bytes], data: bytes) -> list[tuple[int, int]]:
    """What a match looks up: keys with an anchor by the text's windows, the others (the rest
    shard) by the oracle's scan."""
    anchored = []
    rest = []
    bits = bitmap_of({a for a in map(anchor_of, keys) if a is not None})
    found = set(may_be_anchors(bits, windows(data)))
    for key_id, key in enumerate(keys):
        anchor = anchor_of(key)
        if anchor is None:
            rest.append(key_id)
        elif anchor in found:
            anchored.append((key_id, key.decode("utf-8")))
    hits = hits_in(data, anchored)
    if rest:
        hits += [(end, rest[i]) for end, i in every_occurrence([keys[i] for i in rest], data)]
    return sorted(hits)


# Texts made of few distinct words and separators, so that keys occur, overlap, repeat and
# share anchors; "é" and "\u2502" put non-ASCII bytes (separators to the words) in both.
WORDS = st.sampled_from(["a", "ab", "is", "not", "model", "x1", "_", "é", "Error", "9"])
SEPARATORS = st.sampled_from([" ", ": ", "'", ".", "\n", "(", "\u2502 ", " - ", ""])
TEXT = st.lists(st.tuples(WORDS, SEPARATORS), max_size=40).map(
    lambda parts: "".join(w + s for w, s in parts)
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    keys=st.lists(TEXT.filter(lambda t: 0 < len(t.encode()) < 60), min_size=1, max_size=12),
    noise=st.lists(TEXT, max_size=6),
    picks=st.lists(st.integers(min_value=0), max_size=8),
)
def test_the_words_of_a_text_find_every_occurrence_hyperscan_finds(
    keys: list[str], noise: list[str], picks: list[int]
) -> None:
    encoded = list(dict.fromkeys(k.encode("utf-8") for k in keys))
    # the text: noise with keys put in it (and keys glued to words, so anchors are not at
    # word starts of the key's own edges)
    pieces = [*noise]
    for n, pick in enumerate(picks):
        pieces.insert(pick % (len(pieces) + 1), keys[pick % len(keys)] + ("ab" if n % 2 else ""))
    data = "".join(pieces).encode("utf-8")
    assert by_anchors(encoded, data) == every_occurrence(encoded, data)


@pytest.mark.parametrize(
    ("key", "anchor"),
    [
        (b"Unrecognized model identifier '", b"model identifier"),
        (b"no whole word", b"whole"),  # the first and last words may be parts of words
        (b"Error", None),
        (b'File "', None),
        (b"('", None),
        (b": a: b: c: dd :", b"b: c: dd"),  # the longest window of up to three words
        (b"x a b c d e y", b"a b c"),  # of equal ones, the first
    ],
)
def test_the_anchor_is_the_longest_run_of_whole_words(key: bytes, anchor: bytes | None) -> None:
    assert MAX_RUNS == 3
    assert anchor_of(key) == anchor


def test_a_texts_windows_are_its_runs_of_one_to_three_words() -> None:
    assert windows(b"ab, cd ef gh") == {
        b"ab",
        b"ab, cd",
        b"ab, cd ef",
        b"cd",
        b"cd ef",
        b"cd ef gh",
        b"ef",
        b"ef gh",
        b"gh",
    }
    # a text that starts or ends with a separator also gives the windows that hold it
    assert windows(b"(a b)") == {b"a", b"a b", b"b", b"(a", b"(a b", b"b)", b"a b)"}


def test_the_bitmap_keeps_every_anchor_and_few_other_windows() -> None:
    anchors = {f"anchor {n} of {n * 7}".encode() for n in range(5000)}
    others = [f"window {n}".encode() for n in range(20000)]
    bits = bitmap_of(anchors)
    assert len(bits) * 8 >= 8 * len(anchors)
    assert set(may_be_anchors(bits, anchors)) == anchors
    assert len(may_be_anchors(bits, others)) < 0.15 * len(others)  # about 1 - e^(-1/8)


def _real_logs() -> list[Path]:
    return sorted(REALLOGS.glob("*.log")) + sorted(MATCHER.glob("*.log"))


@pytest.fixture(scope="module")
def real_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not (REALLOGS / "records.jsonl.gz").is_file():
        pytest.skip("tests/fixtures/reallogs is not generated")
    with gzip.open(REALLOGS / "records.jsonl.gz", "rt", encoding="utf-8") as fh:
        recs = [json.loads(line)["record"] for line in fh]
    cache = tmp_path_factory.mktemp("anchors")
    build_index(sources_from_records(recs), cache, "real").close()
    return cache


def _loaded(cache: Path, monkeypatch: pytest.MonkeyPatch, per_byte: int) -> MatcherIndex:
    monkeypatch.setattr(prefilter_module, "LOADED_PER_LOOKED_UP", per_byte)
    index = load_index(cache, "real")
    assert index is not None
    return index


def _report(index: MatcherIndex, log: Path) -> list[Any]:
    report = index.match(log.read_bytes())
    return [
        [(m.line, m.id, m.score, m.evidence) for m in report.matches],
        [(u.line, u.text) for u in report.unmatched],
        report.stats["candidates"],
        report.stats["verified"],
    ]


def test_every_real_log_gets_the_same_report_looked_up_as_scanned(
    real_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The development logs (tests/fixtures/reallogs and the matcher's fixtures) through a
    fresh index each, once looked up by their words and once scanned by the full databases."""
    logs = _real_logs()
    assert len(logs) > 50
    for log in logs:
        looked_up = _loaded(real_cache, monkeypatch, 1)  # any text up to LOOKUP_MAX_BYTES
        scanned = _loaded(real_cache, monkeypatch, 1 << 60)  # a lookup budget of 0 bytes
        try:
            assert _report(looked_up, log) == _report(scanned, log), log.name
            assert not looked_up._prefilter.loaded, log.name
            assert scanned._prefilter.loaded, log.name
        finally:
            looked_up.close()
            scanned.close()


def test_a_long_text_is_scanned_whatever_the_budget(
    real_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each key a text's windows find is searched for in the whole text: past
    LOOKUP_MAX_BYTES the databases are loaded, even with budget left."""
    log = (MATCHER / "paste.log").read_bytes()
    long = log * (prefilter_module.LOOKUP_MAX_BYTES // len(log) + 1)
    index = _loaded(real_cache, monkeypatch, 1)
    index.match(log)
    assert not index._prefilter.loaded
    index.match(long)
    assert index._prefilter.loaded
    index.close()


def test_keys_of_a_crowded_anchor_are_found_by_the_rest_shard(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With at most one key per anchor, every shared anchor's keys go to the rest shard: the
    answers stay the same."""
    from kb.matcher import build

    with open(MATCHER / "records.jsonl", encoding="utf-8") as fh:
        recs = [json.loads(line) for line in fh]
    paste = (MATCHER / "paste.log").read_bytes()
    monkeypatch.setattr(prefilter_module, "LOADED_PER_LOOKED_UP", 1 << 60)
    expected = build_index(sources_from_records(recs), tmp_path / "a", "r").match(paste)
    monkeypatch.setattr(build, "BUCKET_KEYS", 1)
    monkeypatch.setattr(prefilter_module, "LOADED_PER_LOOKED_UP", 1)
    crowded = build_index(sources_from_records(recs), tmp_path / "b", "r")
    got = crowded.match(paste)
    assert not crowded._prefilter.loaded
    assert [(m.line, m.id, m.score) for m in got.matches] == [
        (m.line, m.id, m.score) for m in expected.matches
    ]
    assert len(expected.matches) == 3
    # the fixtures share three anchors ("at", "version", "must be one"), two keys each
    assert _rest_keys(tmp_path / "b") == _rest_keys(tmp_path / "a") + 6


def _rest_keys(cache: Path) -> int:
    con = sqlite3.connect(cache / CACHE_FILE)
    try:
        (count,) = con.execute("SELECT COUNT(*) FROM keys WHERE anchor IS NULL").fetchone()
        return int(count)
    finally:
        con.close()


def test_the_databases_are_loaded_once_the_texts_looked_up_cost_more(
    real_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A process that matches many texts (kb serve) looks them up only until their bytes add
    up to what loading the databases costs; from then on it scans, with the same answers."""
    paste = (MATCHER / "paste.log").read_bytes()
    shard_bytes = sum(len(b) for b in _loaded(real_cache, monkeypatch, 1)._reader.shards())
    # a budget of two and a half pastes: two are looked up, the third is scanned
    index = _loaded(real_cache, monkeypatch, shard_bytes * 2 // (5 * len(paste)))
    reports = []
    for n in range(3):
        reports.append(_report(index, MATCHER / "paste.log"))
        assert index._prefilter.loaded == (n == 2)
    assert reports[0] == reports[1] == reports[2]
    index.close()


def test_a_server_loads_the_databases_before_the_first_paste(
    real_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    index = _loaded(real_cache, monkeypatch, 1)
    assert not index._prefilter.loaded
    index.preload()
    assert index._prefilter.loaded
    looked_up = _loaded(real_cache, monkeypatch, 1)
    assert _report(index, MATCHER / "paste.log") == _report(looked_up, MATCHER / "paste.log")
    assert not looked_up._prefilter.loaded
    index.close()
    looked_up.close()
