"""benchmarks/threshold_depth.py: the threshold algorithm it simulates ranks exactly as ranking
every record does, and FTS5's bm25 of several words is the sum of each word's alone (the
premise that makes impact-ordered lists of words enough)."""

from __future__ import annotations

import random
import sqlite3

import pytest

from kb.ranking import BM25_WEIGHTS
from tests.benchmark_modules import load_benchmark

td = load_benchmark("threshold_depth")


def _lists(rng: random.Random, words: int, records: int) -> list[list[tuple[int, float]]]:
    """Each word's (rowid, part) best first; bm25 parts are negative, lower better."""
    out = []
    for _ in range(words):
        holders = rng.sample(range(records), rng.randint(1, records))
        parts = [(rowid, -rng.choice([rng.random() * 5, 1.0, 2.0])) for rowid in holders]
        out.append(sorted(parts, key=lambda item: item[1]))
    return out


@pytest.mark.parametrize("seed", range(40))
def test_the_algorithm_finds_the_best_scores_that_ranking_every_record_gives(seed: int) -> None:
    rng = random.Random(seed)
    lists = _lists(rng, rng.randint(1, 4), rng.randint(1, 300))
    limit = rng.randint(1, 12)
    stop = td.stop_depth(lists, limit)
    assert stop.found == stop.best
    assert 1 <= stop.depth <= min(len(words) for words in lists)


def test_it_stops_once_no_record_unseen_can_score_better() -> None:
    # record 1 is best in both lists: after one step it scores -10, and no record unseen
    # in both can score better than -4 + -4
    lists = [
        [(1, -5.0), (2, -4.0), (3, -1.0), (4, -0.5)],
        [(1, -5.0), (3, -4.0), (2, -1.0), (4, -0.5)],
    ]
    stop = td.stop_depth(lists, 1)
    assert (stop.depth, stop.accesses, stop.whole, stop.found) == (1, 1, 4, [-10.0])
    # two: after step 2 the second best found is -5 (records 2 and 3) against a threshold of
    # -4 + -4 = -8, so record 4, unseen, could still score better; after step 3 the threshold
    # is -2, and it stops before reading record 4
    stop = td.stop_depth(lists, 2)
    assert (stop.depth, stop.accesses, stop.found) == (3, 3, [-10.0, -5.0])


def test_bm25_of_several_words_is_the_sum_of_each_words_alone() -> None:
    columns = ", ".join(f"c{i}" for i in range(len(BM25_WEIGHTS)))
    con = sqlite3.connect(":memory:")
    con.execute(f"CREATE VIRTUAL TABLE records_fts USING fts5({columns})")
    rng = random.Random(7)
    vocabulary = ["must", "be", "value", "error", "the", "a", "graph", "plotly", "shape"]
    for _ in range(200):
        row = [" ".join(rng.choices(vocabulary, k=rng.randint(0, 12))) for _ in BM25_WEIGHTS]
        con.execute(f"INSERT INTO records_fts VALUES ({', '.join('?' * len(row))})", row)
    for query in (["must", "be"], ["value", "error", "the"], ["graph", "plotly"]):
        whole = dict(
            con.execute(
                f"SELECT rowid, {td.RANK} FROM records_fts WHERE records_fts MATCH ?",
                (" ".join(query),),
            ).fetchall()
        )
        parts = [dict(td.word_list(con, word)) for word in query]
        assert whole
        for rowid, score in whole.items():
            assert score == pytest.approx(sum(part[rowid] for part in parts), abs=1e-9)
