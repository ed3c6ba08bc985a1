"""Time `kb search` on a fixed list of realistic queries against the full shared corpus.

Warm: library calls in one process (median and p95 per query, over repeats). Cold: a new
`kb search` process per query (median). The database is built once into benchmarks/out/.

    python benchmarks/bench_search.py [--corpus ../shared/corpus] [--repeats 20]
                                      [--db PATH] [--against PATH]

`--db` searches an existing database (e.g. one `run.py` imported at 1M records); `--against`
a second one in the same process, the two taking turns query by query, so that a machine
shared with other work slows both alike (a before/after of an index change), with the ratio.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

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
    args = parser.parse_args()
    db = args.db or ensure_db(args.corpus, args.out)
    if args.against:
        compare(db, args.against, args.repeats)
        return

    from kb.knowledge import KnowledgeBase

    kb = KnowledgeBase(str(db))
    records = kb.stats()["records"]
    rows = []
    all_times: list[float] = []
    for query in QUERIES:
        kb.search(query)  # warm the page cache and the vocabulary path once
        times = []
        for _ in range(args.repeats):
            started = time.perf_counter()
            response = kb.search(query)
            times.append((time.perf_counter() - started) * 1000)
        all_times += times
        times.sort()
        p95 = times[min(len(times) - 1, int(0.95 * len(times)))]
        rows.append((query, statistics.median(times), p95, response.total, response.method))

    cold = []
    for query in QUERIES[: args.cold_runs]:
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

    all_times.sort()
    print(f"# Search benchmark: {records:,} records, {args.repeats} repeats a query\n")
    print("| query | median ms | p95 ms | total hits | method |")
    print("|---|---:|---:|---:|---|")
    for query, median, p95, total, method in rows:
        print(f"| `{query}` | {median:.1f} | {p95:.1f} | {total:,} | {method} |")
    overall_p95 = all_times[int(0.95 * len(all_times))]
    print(
        f"\nAll queries, warm: median {statistics.median(all_times):.1f} ms, "
        f"p95 {overall_p95:.1f} ms"
    )
    print(
        f"Cold `kb search` (new process): median {statistics.median(cold):.3f} s; "
        f"`python -c pass` baseline {statistics.median(python_start):.3f} s "
        f"(ratio {statistics.median(cold) / statistics.median(python_start):.0f}x)"
    )


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
    stats = []
    for out in times:
        out.sort()
        stats.append((statistics.median(out), out[int(0.95 * len(out))]))
    print(f"# Search, warm, {len(QUERIES)} queries x {repeats}, in turns\n")
    print("| database | records | median ms | p95 ms |")
    print("|---|---:|---:|---:|")
    for path, kb, (median, p95) in zip((first, second), kbs, stats, strict=True):
        print(f"| {path} | {kb.count():,} | {median:.1f} | {p95:.1f} |")
    print(
        f"\nratio first / second: median {stats[0][0] / stats[1][0]:.2f}x, "
        f"p95 {stats[0][1] / stats[1][1]:.2f}x"
    )


if __name__ == "__main__":
    main()
