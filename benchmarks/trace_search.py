"""Where a search's time goes: each statement it runs, with its time and rows, query by query.

The searcher's statements are timed where they run (kb.sql's runner, kb.ranking's ranker for
kb_bm25), in one warm process; every query is searched once first, so that the phrase counts
and common-word shares a first search keeps are kept, and then `--repeats` times, the last
repeat's statements printed with the median time. Queries: the arguments, else the sealed set
of `--seed` (benchmarks/search_sealed.py; the set is a development set once code is changed
for what this shows), else bench_search.QUERIES.

    python benchmarks/trace_search.py --db benchmarks/out/kb-1000000.sqlite3 --seed 20261205
    python benchmarks/trace_search.py --db DB "to but source" "inuts_embeds" --slower 0
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import bench_search
import search_sealed

import kb.ranking
import kb.sql
from kb.knowledge import KnowledgeBase

SQL_CHARS = 150  # a statement's opening, enough to tell which it is
PARAM_CHARS = 90


def _timed(
    rows: Callable[..., Any], kind: str, log: list[tuple[str, float, str, str, str]]
) -> Callable[..., Any]:
    def run(self: Any, sql: str, params: Sequence[Any] = ()) -> Any:
        start = time.perf_counter()
        found = rows(self, sql, params)
        took = (time.perf_counter() - start) * 1000
        count = "gave up" if found is None else str(len(found))
        statement = " ".join(sql.split())[:SQL_CHARS]
        log.append((kind, took, count, statement, repr(params)[:PARAM_CHARS]))
        return found

    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("queries", nargs="*", help="queries (default: a sealed set or QUERIES)")
    parser.add_argument("--db", type=Path, required=True, help="a SQLite knowledge base")
    parser.add_argument("--seed", type=int, help="the sealed set of this seed")
    parser.add_argument("--corpus", type=Path, default=bench_search.DEFAULT_CORPUS)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument(
        "--slower", type=float, default=50.0, help="print the statements of queries slower (ms)"
    )
    args = parser.parse_args()
    if args.queries:
        queries = list(args.queries)
    elif args.seed is not None:
        queries = [q.text for q in search_sealed.sealed_queries(args.corpus, args.seed)]
    else:
        queries = list(bench_search.QUERIES)

    log: list[tuple[str, float, str, str, str]] = []
    kb.sql.SqlAlchemyRunner.rows = _timed(kb.sql.SqlAlchemyRunner.rows, "sql", log)  # type: ignore[method-assign]
    kb.ranking.Ranker.rows = _timed(kb.ranking.Ranker.rows, "kb_bm25", log)  # type: ignore[method-assign]
    knowledge = KnowledgeBase(f"sqlite:///{args.db.resolve()}")
    for query in queries:
        knowledge.search(query)
    medians: list[tuple[float, str, int, str]] = []
    for query in queries:
        times = []
        for _ in range(args.repeats):
            log.clear()
            start = time.perf_counter()
            found = knowledge.search(query)
            times.append((time.perf_counter() - start) * 1000)
        median = statistics.median(times)
        medians.append((median, query, found.total, found.method))
        if median >= args.slower:
            print(f"== {median:.1f} ms  {query!r}  total {found.total:,}  {found.method}")
            for kind, took, count, sql, params in log:
                print(f"   {took:7.1f} ms  {kind:7}  rows {count:>7}  {sql}  {params}")
    print("\nslowest (median ms, records found, method, query):")
    for median, query, total, method in sorted(medians, reverse=True)[:10]:
        print(f"  {median:8.1f}  {total:>9,}  {method:12}  {query!r}")


if __name__ == "__main__":
    main()
