"""Time `kb search` on a fixed list of realistic queries against the full shared corpus.

Warm: library calls in one process (median and p95 per query, over repeats). Cold: a new
`kb search` process per query (median). The database is built once into benchmarks/out/.

    python benchmarks/bench_search.py [--corpus ../shared/corpus] [--repeats 20]
                                      [--db PATH] [--against PATH] [--baseline DIR]

`--db` searches an existing database (e.g. one `run.py` imported at 1M records); `--against`
a second one in the same process, the two taking turns query by query, so that a machine
shared with other work slows both alike (a before/after of an index change), with the ratio.
`--baseline DIR` searches the same database with another checkout's kb (a `git worktree` or
`git archive` of main, say) in a process of its own beside this checkout's, the two taking
turns query by query (which goes first alternates), and says which queries they answered
differently (total, method or the ids in order): a before/after of a change to the code.
`--first ROUNDS` with it times first searches instead: a new process per checkout and round,
no phrase counts kept, each query once.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import search_sealed

HERE = Path(__file__).resolve().parent
DEFAULT_CORPUS = HERE.parent.parent / "shared" / "corpus"

# What support engineers paste: half messages, identifiers, paths, classes, typos, ids.
QUERIES = [
    "Unrecognized model identifier",
    "None of are in the columns",
    "Can't load plugin sqlalchemy.dialects",
    "backend_per_kind",
    "torch.cuda out of memory",
    "vllm/config/attention.py",
    "pandas/core/frame.py set_index",
    "expected scalar type Float but found",
    "KeyError not in index",
    "connection refused redis",
    '"must be a positive integer"',
    "shape mismatch broadcast",
    "unknwn kv cache groop",
    "tokenizer padding side",
    "ValueError invalid literal",
    "migration revision not found alembic",
    "timeout waiting for worker",
    "46a1fcb95e0d367e",
    "dtype object is not supported",
    "deprecated argument will be removed",
]


def ensure_db(corpus: Path, out: Path) -> Path:
    db = out / "search-bench.sqlite3"
    if db.exists():
        return db
    out.mkdir(parents=True, exist_ok=True)
    source = corpus / "records.jsonl.gz"
    print(f"building {db} from {source} ...", file=sys.stderr)
    subprocess.run(
        [sys.executable, "-m", "kb", "--db", str(db), "import", "--quiet", str(source)],
        check=False,
    )
    return db


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--out", type=Path, default=HERE / "out")
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--cold-runs", type=int, default=5)
    parser.add_argument("--db", type=Path, help="an existing database to search")
    parser.add_argument("--against", type=Path, help="a second database, searched in turns")
    parser.add_argument(
        "--sealed",
        action="store_true",
        help="the sealed queries of search_sealed.py (made from --corpus) instead of QUERIES",
    )
    parser.add_argument("--seed", type=int, help="with --sealed: another sealed set")
    parser.add_argument("--baseline", type=Path, help="another checkout's kb, searched in turns")
    parser.add_argument(
        "--first",
        type=int,
        metavar="ROUNDS",
        help="with --baseline: each query searched once by a new process, no phrase counts kept",
    )
    args = parser.parse_args()
    db = args.db or ensure_db(args.corpus, args.out)
    seed = args.seed or search_sealed.DEFAULT_SEED
    made = search_sealed.sealed_queries(args.corpus, seed) if args.sealed else []
    queries = [q.text for q in made] if args.sealed else QUERIES
    if args.baseline and args.first:
        compare_first(db, args.baseline, args.first, queries)
        return
    if args.baseline:
        compare_code(db, args.baseline, args.repeats, queries)
        return
    if args.against:
        compare(db, args.against, args.repeats)
        return

    from kb.knowledge import KnowledgeBase

    kb = KnowledgeBase(str(db))
    records = kb.stats()["records"]
    # sealed query -> (its kind, its record's id)
    answers: dict[str, tuple[str, str]] = {q.text: (q.kind, q.record_id) for q in made}
    rows = []
    all_times: list[float] = []
    found_by_kind: dict[str, list[bool]] = {}
    for query in queries:
        kb.search(query)  # warm the page cache and the vocabulary path once
        times = []
        for _ in range(args.repeats):
            started = time.perf_counter()
            response = kb.search(query)
            times.append((time.perf_counter() - started) * 1000)
        all_times += times
        method = response.method
        if query in answers:
            kind, record_id = answers[query]
            found = record_id in [r.id for r in response.results[: search_sealed.FOUND_WITHIN]]
            found_by_kind.setdefault(kind, []).append(found)
            method = f"{method}, {kind}, own record {'found' if found else 'not found'}"
        rows.append((query, *median_p95(times), response.total, method))

    cold = []
    for query in queries[: args.cold_runs]:
        started = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "kb", "--db", str(db), "search", query],
            capture_output=True,
            check=False,
        )
        cold.append(time.perf_counter() - started)
    python_start = []
    for _ in range(args.cold_runs):
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        python_start.append(time.perf_counter() - started)

    title = f"the sealed set of seed {seed}" if args.sealed else "QUERIES"
    print(f"# Search benchmark: {records:,} records, {title}, {args.repeats} repeats a query\n")
    print("| query | median ms | p95 ms | total hits | method |")
    print("|---|---:|---:|---:|---|")
    for query, median, p95, total, method in rows:
        print(f"| `{query}` | {median:.1f} | {p95:.1f} | {total:,} | {method} |")
    overall_median, overall_p95 = median_p95(all_times)
    print(f"\nAll queries, warm: median {overall_median:.1f} ms, p95 {overall_p95:.1f} ms")
    if found_by_kind:
        found_in = ", ".join(
            f"{kind} {sum(found)}/{len(found)}" for kind, found in found_by_kind.items()
        )
        every = [f for found in found_by_kind.values() for f in found]
        within = search_sealed.FOUND_WITHIN
        print(f"Own record within the first {within}: {sum(every)} of {len(every)} ({found_in})")
    if cold:  # --cold-runs 0: warm figures alone
        print(
            f"Cold `kb search` (new process): median {statistics.median(cold):.3f} s; "
            f"`python -c pass` baseline {statistics.median(python_start):.3f} s "
            f"(ratio {statistics.median(cold) / statistics.median(python_start):.0f}x)"
        )


def median_p95(values: list[float]) -> tuple[float, float]:
    """The median and the 95th percentile (the value 95% of the way up the sorted list)."""
    ordered = sorted(values)
    return statistics.median(ordered), ordered[int(0.95 * len(ordered))]


def print_per_query(rows: list[tuple[str, float, float]]) -> None:
    """(query, this checkout's ms, the baseline's ms) as a table, with the ratio."""
    print("| query | this ms | baseline ms | ratio baseline / this |")
    print("|---|---:|---:|---:|")
    for query, this, base in rows:
        print(f"| `{query}` | {this:.1f} | {base:.1f} | {base / this:.1f}x |")


def compare(first: Path, second: Path, repeats: int) -> None:
    """Warm searches of two databases in turns: the medians and p95s, and their ratios."""
    from kb.knowledge import KnowledgeBase

    kbs = [KnowledgeBase(str(first)), KnowledgeBase(str(second))]
    times: list[list[float]] = [[], []]
    for query in QUERIES:
        for kb in kbs:
            kb.search(query)
        for _ in range(repeats):
            for kb, out in zip(kbs, times, strict=True):
                started = time.perf_counter()
                kb.search(query)
                out.append((time.perf_counter() - started) * 1000)
    stats = [median_p95(out) for out in times]
    print(f"# Search, warm, {len(QUERIES)} queries x {repeats}, in turns\n")
    print("| database | records | median ms | p95 ms |")
    print("|---|---:|---:|---:|")
    for path, kb, (median, p95) in zip((first, second), kbs, stats, strict=True):
        print(f"| {path} | {kb.count():,} | {median:.1f} | {p95:.1f} |")
    print(
        f"\nratio first / second: median {stats[0][0] / stats[1][0]:.2f}x, "
        f"p95 {stats[0][1] / stats[1][1]:.2f}x"
    )


# One kb's searches in a process of its own: a query (JSON) a line in, its time and answer out.
WORKER = """
import json, sys, time
from kb.knowledge import KnowledgeBase
kb = KnowledgeBase(sys.argv[1])
print(json.dumps({"records": kb.count(), "kb": __import__("kb").__file__}), flush=True)
for line in sys.stdin:
    query = json.loads(line)
    started = time.perf_counter()
    found = kb.search(query)
    ms = (time.perf_counter() - started) * 1000
    answer = [found.total, found.method, [r.id for r in found.results]]
    print(json.dumps({"ms": ms, "answer": answer}), flush=True)
"""


class Worker:
    def __init__(self, db: Path, source: Path) -> None:
        env = dict(os.environ, PYTHONPATH=str(source))
        if not db.is_file():  # kb would make an empty database, and find nothing in it
            raise SystemExit(f"bench_search: {db}: no such database")
        self.proc = subprocess.Popen(
            # resolved: the worker runs in the checkout's folder, where a relative path
            # named another (new, empty) database
            [sys.executable, "-c", WORKER, str(db.resolve())],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
            cwd=source,  # `python -c` puts the working folder first on sys.path
        )
        self.hello = self._read()

    def _read(self) -> dict[str, object]:
        assert self.proc.stdout is not None
        value: dict[str, object] = json.loads(self.proc.stdout.readline())
        return value

    def search(self, query: str) -> dict[str, object]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(query) + "\n")
        self.proc.stdin.flush()
        return self._read()

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait()


def compare_code(db: Path, baseline: Path, repeats: int, queries: list[str]) -> None:
    """Warm searches of one database by two checkouts' kb in turns: medians, p95s, ratios."""
    workers = [Worker(db, HERE.parent), Worker(db, baseline.resolve())]
    names = ("this checkout", f"baseline {baseline}")
    times: list[list[float]] = [[], []]
    per_query: list[tuple[str, float, float]] = []
    differ = []
    for query in queries:
        answers = [worker.search(query)["answer"] for worker in workers]  # warm once
        if answers[0] != answers[1]:
            differ.append((query, answers))
        mine: list[list[float]] = [[], []]
        for turn in range(repeats):
            order = (0, 1) if turn % 2 == 0 else (1, 0)
            for index in order:
                ms = float(workers[index].search(query)["ms"])  # type: ignore[arg-type]
                times[index].append(ms)
                mine[index].append(ms)
        per_query.append((query, statistics.median(mine[0]), statistics.median(mine[1])))
    for worker in workers:
        worker.close()
    print(f"# Search, warm, {len(queries)} queries x {repeats}, two kb versions in turns\n")
    print(f"database {db}, {workers[0].hello['records']:,} records\n")
    print_per_query(per_query)
    stats = [median_p95(out) for out in times]
    print("\n| kb | median ms | p95 ms |")
    print("|---|---:|---:|")
    for name, worker, (median, p95) in zip(names, workers, stats, strict=True):
        print(f"| {name} ({worker.hello['kb']}) | {median:.1f} | {p95:.1f} |")
    print(
        f"\nratio baseline / this: median {stats[1][0] / stats[0][0]:.2f}x, "
        f"p95 {stats[1][1] / stats[0][1]:.2f}x"
    )
    print(f"\nqueries answered differently (total, method, ids): {len(differ)}")
    for query, (this, base) in differ:
        print(f"- `{query}`: this {this}; baseline {base}")


def compare_first(db: Path, baseline: Path, rounds: int, queries: list[str]) -> None:
    """First searches: each round, each checkout (which goes first alternates) in a new
    process with no phrase counts kept in the cache folder (kb/query.py PhraseCounts), one
    search of an unrelated query to open the database, then each query once: what the first
    search of new words costs, where the warm figures are the searches after it."""
    from kb.config import cache_dir_for

    cache = cache_dir_for(f"sqlite:///{db.resolve()}")
    sources = (HERE.parent, baseline.resolve())
    times: list[dict[str, list[float]]] = [{}, {}]
    for turn in range(rounds):
        for index in (0, 1) if turn % 2 == 0 else (1, 0):
            for counts in cache.glob("phrase-counts-*.json"):
                counts.unlink()
            worker = Worker(db, sources[index])
            worker.search("opening the database first")
            for query in queries:
                ms = float(worker.search(query)["ms"])  # type: ignore[arg-type]
                times[index].setdefault(query, []).append(ms)
            worker.close()
    print(f"# Search, first time, {len(queries)} queries, {rounds} rounds, new processes\n")
    medians = [(statistics.median(times[0][q]), statistics.median(times[1][q])) for q in queries]
    print_per_query([(query, *pair) for query, pair in zip(queries, medians, strict=True)])
    stats = [median_p95([ms for values in t.values() for ms in values]) for t in times]
    print(
        f"\nthis: median {stats[0][0]:.1f} ms, p95 {stats[0][1]:.1f} ms; "
        f"baseline: median {stats[1][0]:.1f} ms, p95 {stats[1][1]:.1f} ms; "
        f"ratio baseline / this: median {stats[1][0] / stats[0][0]:.2f}x, "
        f"p95 {stats[1][1] / stats[0][1]:.2f}x"
    )


if __name__ == "__main__":
    main()
