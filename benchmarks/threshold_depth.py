"""How far a threshold algorithm would read to rank a query of common words (measurement only).

A query of several words that many records hold ranks every record it finds by bm25: FTS5
walks each word's records, so at a million records a class and two common words take 300-500
ms. FTS5's bm25 is a sum over the query's words, each word's part being the score of a query
of that word alone (the same weights, the same idf). So with each word's records stored in
order of that part (impact-ordered lists), Fagin's threshold algorithm could rank a query by
reading each list only as deep as it takes for the best `--limit` records found whole (looked
up by rowid, "random accesses") to score at least what any record not yet seen could: the sum
of the parts at the current depth of every list.

For each query this prints how many records hold every word, the depth at which the algorithm
would stop reading all lists in step, and the random accesses, beside each word's records and
their scores (best, median, worst). It reads each word's whole list from FTS5 to simulate the
stored one: seconds a word at a million records. Pure bm25 only: kb's search also ranks the
records whose message holds the query whole first (kb.broad), which an implementation would
have to keep.

    python benchmarks/threshold_depth.py --db benchmarks/out/kb-1000000.sqlite3 \
        "ValueError must be" "should be a"
"""

from __future__ import annotations

import argparse
import heapq
import sqlite3
from dataclasses import dataclass
from pathlib import Path

from kb.query import fts_phrase
from kb.ranking import BM25_WEIGHTS

RANK = f"bm25(records_fts, {', '.join(str(w) for w in BM25_WEIGHTS.values())})"


def word_list(con: sqlite3.Connection, word: str) -> list[tuple[int, float]]:
    """(rowid, the word's part of bm25) of every record holding the word, best first (FTS5's
    bm25 is negative: lower is better)."""
    rows = con.execute(
        f"SELECT rowid, {RANK} AS r FROM records_fts WHERE records_fts MATCH ? ORDER BY r",
        (fts_phrase(word),),
    ).fetchall()
    return [(int(rowid), float(score)) for rowid, score in rows]


@dataclass(frozen=True)
class Stop:
    """Where the threshold algorithm stopped: `depth` (every list read that deep in step), its
    random `accesses`, the records holding every word (`whole`), the best `found` scores (best
    first) and the true best, as ranking them all gives."""

    depth: int
    accesses: int
    whole: int
    found: list[float]
    best: list[float]


def stop_depth(lists: list[list[tuple[int, float]]], limit: int) -> Stop:
    """Fagin's threshold algorithm over the words' lists (each best first), reading them in
    step; a record seen in any list is looked up whole (here: summed from the lists). It stops
    when the limit-th best found scores at least the sum of the lists' parts at the depth read,
    or when the shortest list is read whole: every record holding every word is in it."""
    shortest = min(len(words) for words in lists)
    parts = [dict(words) for words in lists]
    whole = set(parts[0]).intersection(*parts[1:])
    total = {rowid: sum(part[rowid] for part in parts) for rowid in whole}
    best = sorted(total.values())[:limit]
    top: list[float] = []  # negated scores: the heap's top is the limit-th best found
    looked: set[int] = set()  # every record seen is looked up, holding every word or not
    depth = 0
    while depth < shortest:
        for words in lists:
            rowid = words[depth][0]
            if rowid in looked:
                continue
            looked.add(rowid)
            if rowid not in total:
                continue  # the look-up finds a word missing
            if len(top) < limit:
                heapq.heappush(top, -total[rowid])
            else:
                heapq.heappushpop(top, -total[rowid])
        depth += 1
        # no record unseen in every list can score better than its parts at this depth
        threshold = sum(words[depth - 1][1] for words in lists)
        if len(top) == limit and -top[0] <= threshold:
            break
    return Stop(depth, len(looked), len(whole), sorted(-score for score in top), best)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("queries", nargs="+", help="queries of plain words")
    parser.add_argument("--db", type=Path, required=True, help="a SQLite knowledge base")
    parser.add_argument("--limit", type=int, default=10, help="the records ranked (10)")
    args = parser.parse_args()
    con = sqlite3.connect(f"file:{args.db}?mode=ro", uri=True)
    for query in args.queries:
        words = query.split()
        lists = [word_list(con, word) for word in words]
        stop = stop_depth(lists, args.limit)
        last = f"{stop.best[-1]:.3f}" if stop.best else "-"
        print(
            f"{query!r}: {stop.whole} records hold every word; the {args.limit}th best {last}; "
            f"the algorithm stops at depth {stop.depth}, {stop.accesses} random accesses"
        )
        for word, found in zip(words, lists, strict=True):
            if found:
                print(
                    f"   {word:14s} {len(found):8d} records, part best {found[0][1]:.3f} "
                    f"median {found[len(found) // 2][1]:.3f} worst {found[-1][1]:.3f}"
                )


if __name__ == "__main__":
    main()
