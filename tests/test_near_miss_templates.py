"""The near-miss templates stored by length (kb.matcher.templates): the length windows hold
every template that can reach a score, a stretch of text read in any order is the stretch,
and the closest templates found window by window are those of one comparison with every
template."""

from __future__ import annotations

import itertools
import json
import random
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from rapidfuzz import fuzz, process

from kb.matcher.templates import TEMPLATE_SEPARATOR, TemplateStore, length_window

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "data" / "records.jsonl"
DRIFT_LOGS = ROOT / "tests" / "fixtures" / "drift" / "dev" / "logs"


def reachable(query_chars: int, length: int, prefix_chars: int | None) -> float:
    """The most similarity fuzz.ratio can give a template of `length` characters."""
    if prefix_chars is not None:
        length = min(length, prefix_chars)
    total = query_chars + length
    return 200 * min(query_chars, length) / total if total else 100.0


@pytest.mark.parametrize("score", [55.0, 70.0, 80.0, 90.0, 99.0])
@pytest.mark.parametrize("cut", [False, True])
def test_a_length_window_holds_every_length_that_can_reach_the_score(
    score: float, cut: bool
) -> None:
    for query_chars in range(1, 160):
        prefix = round(query_chars * 1.1) if cut else None
        shortest, longest = length_window(query_chars, score, prefix)
        for length in range(0, 700):
            inside = length >= shortest and (longest is None or length <= longest)
            if reachable(query_chars, length, prefix) >= score:
                assert inside, (query_chars, length, shortest, longest)
            # rounded outwards by a character at most: the window leaves out what it can
            elif length < shortest - 1 or (longest is not None and length > longest + 1):
                assert not inside
        if not cut:
            assert longest is not None and longest < 3 * query_chars + 2


def store_of(templates: list[str]) -> tuple[TemplateStore, list[tuple[int, int]]]:
    """A store as the cache would hold these templates (their places: their order here),
    and the reads it made, (begin, end) in bytes."""
    order = sorted(range(len(templates)), key=lambda place: (len(templates[place]), place))
    encoded = [templates[place].encode() for place in order]
    text = TEMPLATE_SEPARATOR.encode().join(encoded)
    ends, end = [], -1
    for piece in encoded:
        end += 1 + len(piece)
        ends.append(end)
    reads: list[tuple[int, int]] = []

    def read(begin: int, stop: int, count: int) -> list[str]:
        reads.append((begin, stop))
        found = text[begin:stop].decode().split(TEMPLATE_SEPARATOR)
        assert len(found) == count
        return found

    store = TemplateStore(
        patterns=list(range(len(templates))),
        lengths=[len(template) for template in templates],
        by_length=order,
        ends=ends,
        chars=sum(map(len, templates)),
        read=read,
    )
    return store, reads


def test_a_stretch_read_in_any_order_is_that_stretch_and_each_byte_is_read_once() -> None:
    rng = random.Random(7)
    templates = [
        " ".join(rng.choice(["käse", "value", "x", "must be", "dtype"]) for _ in range(n))
        for n in rng.choices(range(1, 30), k=300)
    ]
    store, reads = store_of(templates)
    whole = sorted(templates, key=len)  # ties in place order: sorted is stable
    for _ in range(200):
        start = rng.randrange(len(templates) + 1)
        stop = rng.randrange(start, len(templates) + 1)
        assert store.texts(start, stop) == whole[start:stop]
    spans = sorted(reads)
    assert all(a[1] < b[0] for a, b in itertools.pairwise(spans))  # none read twice
    for shortest, longest in [(0, None), (5, 40), (41, 41), (1000, None), (30, 10)]:
        start, stop = store.positions(shortest, longest)
        lengths = [len(template) for template in whole]
        assert lengths[start:stop] == [
            n for n in lengths if n >= shortest and (longest is None or n <= longest)
        ]


def data_templates() -> list[str]:
    from kb.matcher.build import fuzzy_template

    templates: dict[str, None] = {}
    for line in DATA.read_text().splitlines():
        record = json.loads(line)["record"]
        templates[fuzzy_template(record.get("errorMessage") or "")] = None
    return [template for template in templates if len(template) >= 16]


def queries() -> Iterator[str]:
    """Log lines as a near miss gets them: the drift development set's, and reworded ones."""
    from kb.matcher.cache import normalize_template

    for path in sorted(DRIFT_LOGS.glob("*.log"))[:60]:
        for line in path.read_text(errors="replace").splitlines():
            query = normalize_template(line)
            if len(query) >= 16:
                yield query
    rng = random.Random(11)
    for template in rng.sample(data_templates(), 60):
        words = template.split()
        words[rng.randrange(len(words))] = "reworded"
        yield " ".join(words[: rng.randint(2, len(words))])


def every_closest(templates: list[str], query: str, limit: int, cut: bool) -> list[int]:
    """The closest templates' places as one comparison with every template gives them (the
    code before the windows)."""
    from kb.matcher.fuzzy import CUT_PREFIX_SHARE
    from kb.matcher.scoring import DEFAULT_SCORING

    width = round(len(query) * CUT_PREFIX_SHARE)
    return [
        place
        for _choice, _score, place in process.extract(
            query,
            [template[:width] for template in templates] if cut else templates,
            scorer=fuzz.ratio,
            score_cutoff=DEFAULT_SCORING.fuzzy_shortlist_cutoff,
            limit=limit,
        )
    ]


def reworded(template: str, rng: random.Random) -> str:
    words = template.split()
    words[rng.randrange(len(words))] = rng.choice(["reworded", "other", "new", "changed"])
    return " ".join(words)


@pytest.mark.parametrize("limit", [12, 3, 1])
@pytest.mark.parametrize("cut", [False, True])
def test_the_closest_templates_window_by_window_are_those_of_one_comparison_with_all(
    limit: int, cut: bool
) -> None:
    """Families of templates a word apart (as a dataset's versions of a message are) beside
    the bundled dataset's: for lines reworded from them, whole or cut short, the closest are
    the ones, in the order, that comparing each line with every template gives; and for many
    of the lines enough templates reach a window's score that the windows stop early."""
    from kb.matcher.fuzzy import WINDOW_SCORES, closest
    from kb.matcher.scoring import DEFAULT_SCORING

    rng = random.Random(limit * 2 + cut)
    real = data_templates()
    families = [reworded(base, rng) for base in rng.sample(real, 40) for _ in range(20)]
    templates = list(dict.fromkeys(real + families))
    rng.shuffle(templates)
    store, _reads = store_of(templates)
    cutoff = DEFAULT_SCORING.fuzzy_shortlist_cutoff
    lines = [*queries(), *(reworded(rng.choice(families), rng) for _ in range(150))]
    early = 0
    for line in lines:
        if cut:
            line = line[: rng.randint(16, max(16, len(line)))]
        expected = every_closest(templates, line, limit, cut)
        assert closest(store, line, limit=limit, cutoff=cutoff, cut=cut) == expected, line
        scores = [
            fuzz.ratio(
                line, templates[place][: round(len(line) * 1.1)] if cut else templates[place]
            )
            for place in expected
        ]
        early += len(expected) == limit and scores[-1] >= WINDOW_SCORES[-1]
    assert early > 30


def test_a_near_miss_finds_the_closest_templates_of_the_cache_the_build_wrote(
    tmp_path: Path,
) -> None:
    """The same, through the cache's reader, on the bundled dataset as the build wrote it."""
    from kb.matcher.build import sources_from_records, write_cache_file
    from kb.matcher.cache import CacheReader
    from kb.matcher.fuzzy import NearMissSearch
    from kb.matcher.scoring import DEFAULT_SCORING

    records = [json.loads(line)["record"] for line in DATA.read_text().splitlines()]
    path = tmp_path / "cache.sqlite3"
    write_cache_file(sources_from_records(records), path, "r1")
    con = sqlite3.connect(path)
    try:
        search = NearMissSearch(CacheReader(con, [], path=path, identity=None))
        store = search._store
        templates = [""] * len(store)
        for position, template in enumerate(store.texts(0, len(store))):
            templates[store.place(position)] = template
        assert set(templates) <= set(data_templates())
        limit = DEFAULT_SCORING.fuzzy_shortlist
        found = 0
        for query in queries():
            for cut in (False, True):
                expected = every_closest(templates, query, limit, cut)
                assert search._shortlist(query, DEFAULT_SCORING, cut)[: len(expected)] == expected
                found += bool(expected)
        assert found > 100
    finally:
        con.close()


def test_a_lazy_list_gives_its_items_and_stretches_reading_each_row_once() -> None:
    from kb.matcher.templates import ROW_ITEMS, LazyInts

    values = list(range(7, 7 + 3 * ROW_ITEMS + 5))
    reads: list[tuple[int, int]] = []

    def read(start: int, stop: int) -> list[int]:
        reads.append((start, stop))
        return values[start:stop]

    items = LazyInts(len(values), read)
    assert len(items) == len(values)
    assert [items[i] for i in (0, 1, ROW_ITEMS, -1, len(values) - 1)] == [
        values[i] for i in (0, 1, ROW_ITEMS, -1, len(values) - 1)
    ]
    assert reads == [(0, ROW_ITEMS), (ROW_ITEMS, 2 * ROW_ITEMS), (3 * ROW_ITEMS, len(values))]
    assert list(items[5:900]) == values[5:900] and list(items[900:5]) == []
    with pytest.raises(IndexError):
        items[len(values)]
    assert list(items) == values
