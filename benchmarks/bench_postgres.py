"""SQLite and PostgreSQL side by side, on the shared corpus: one command, its own throw-away
PostgreSQL cluster (tests/pg_server.py: Debian's `postgresql` package, run as `postgres` when
root), both databases measured in the same run.

  import      `kb import` of the corpus into a new database (records, then the matcher index
              built and stored in the database), median of --repeat runs; on PostgreSQL both
              ways of sending a batch (kb.ingest.writers.PG_WRITE_METHOD: unnest arrays in one
              INSERT ... ON CONFLICT, or COPY into a staging table then INSERT ... SELECT)
  first match `kb match` of paste.log by a process whose cache folder is empty: the index
              fetched from the database, and (index rows deleted) rebuilt, at the corpus size
              and at --scale records (benchmarks/scale_corpus.py makes that corpus)
  cold match  a new `kb match` process with the index in its cache folder (median)
  warm match  the library's match() in one process, pooled as a `kb serve` worker (median)
  search      bench_search.py's queries through the library: median and p95 of every call
  8 at once   eight `kb match` processes started together: wall time, slowest, all answers
              checked against the single run's

    python benchmarks/bench_postgres.py [--repeat 3] [--scale 150000] [--skip-scale]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

from benchmarks.bench_search import QUERIES  # noqa: E402
from tests import pg_server  # noqa: E402

DEFAULT_CORPUS = ROOT.parent / "shared" / "corpus"
OUT = HERE / "out"

IMPORT_SNIPPET = """
import json, sys, time
import kb.ingest.writers as writers
writers.PG_WRITE_METHOD = sys.argv[3]
from kb import KnowledgeBase
base = KnowledgeBase(sys.argv[1])
started = time.perf_counter()
report = base.import_sources([sys.argv[2]])
imported = time.perf_counter() - started
started = time.perf_counter()
base.build_matcher()
print(json.dumps({"records": report.inserted, "import_s": imported,
                  "build_s": time.perf_counter() - started}))
"""

WARM_SNIPPET = """
import json, statistics, sys, time
from kb import KnowledgeBase
base = KnowledgeBase(sys.argv[1], pooled=True)  # as a kb serve worker holds it
log = open(sys.argv[2], "rb").read()
base.match(log)
match_s = []
for _ in range(int(sys.argv[3])):
    started = time.perf_counter(); base.match(log); match_s.append(time.perf_counter() - started)
search_s = []
queries = json.loads(sys.argv[4])
for _ in range(int(sys.argv[3])):
    for query in queries:
        started = time.perf_counter(); base.search(query)
        search_s.append(time.perf_counter() - started)
search_s.sort()
print(json.dumps({"match_s": statistics.median(match_s),
                  "search_median_s": statistics.median(search_s),
                  "search_p95_s": search_s[int(len(search_s) * 0.95)]}))
"""


def env_with_cache(cache: Path) -> dict[str, str]:
    env = dict(os.environ, XDG_CACHE_HOME=str(cache), NO_COLOR="1")
    env.pop("KB_DATABASE_URL", None)
    return env


def timed(args: list[str], env: dict[str, str]) -> tuple[float, str]:
    started = time.perf_counter()
    done = subprocess.run(args, env=env, capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - started
    if done.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(args[:6])}... failed ({done.returncode}):\n{done.stderr}")
    return elapsed, done.stdout


def kb_match(url: str, log: Path, env: dict[str, str]) -> tuple[float, list[str]]:
    elapsed, out = timed(
        [sys.executable, "-m", "kb", "--db", url, "match", str(log), "--json"], env
    )
    return elapsed, [m["id"] for m in json.loads(out)["matches"]]


def import_runs(url_of: Any, corpus: Path, method: str, repeat: int) -> dict[str, Any]:
    runs = []
    url = ""
    for n in range(repeat):
        url = url_of(n)  # a new database each run
        cache = Path(tempfile.mkdtemp(prefix="kb-bench-cache-"))
        started = time.perf_counter()
        _, out = timed(
            [sys.executable, "-c", IMPORT_SNIPPET, url, str(corpus), method], env_with_cache(cache)
        )
        figures = json.loads(out)
        figures["total_s"] = time.perf_counter() - started
        runs.append(figures)
        shutil.rmtree(cache, ignore_errors=True)
        print(f"  import {method} run {n + 1}: {figures}", file=sys.stderr)
    return {key: statistics.median(r[key] for r in runs) for key in ("import_s", "build_s")} | {
        "records": runs[-1]["records"],
        "url": url,  # the last run's database, with the corpus in it
    }


def first_match(url: str, log: Path, repeat: int) -> dict[str, float]:
    """A process with an empty cache folder: the index fetched; then, with the stored index
    deleted, rebuilt (and stored again)."""
    fetched = []
    for _ in range(repeat):
        cache = Path(tempfile.mkdtemp(prefix="kb-bench-cache-"))
        fetched.append(kb_match(url, log, env_with_cache(cache))[0])
        shutil.rmtree(cache, ignore_errors=True)
    delete_stored_index(url)
    cache = Path(tempfile.mkdtemp(prefix="kb-bench-cache-"))
    rebuilt = kb_match(url, log, env_with_cache(cache))[0]  # builds, and stores it again
    shutil.rmtree(cache, ignore_errors=True)
    return {"fetched_s": statistics.median(fetched), "rebuilt_s": rebuilt}


def delete_stored_index(url: str) -> None:
    from kb import db
    from kb.config import to_url

    engine = db.make_engine(to_url(url))
    with engine.begin() as conn:
        conn.exec_driver_sql("DELETE FROM matcher_index")
    engine.dispose()


def match_and_search(url: str, log: Path, repeat: int) -> dict[str, Any]:
    cache = Path(tempfile.mkdtemp(prefix="kb-bench-cache-"))
    env = env_with_cache(cache)
    _, expected = kb_match(url, log, env)  # fetches the index into this cache
    if not expected:
        raise SystemExit(f"nothing matched in {log}: is the database at {url} empty?")
    cold = [kb_match(url, log, env)[0] for _ in range(repeat)]
    _, out = timed(
        [
            sys.executable,
            "-c",
            WARM_SNIPPET,
            url,
            str(log),
            str(max(5, repeat)),
            json.dumps(QUERIES),
        ],
        env,
    )
    warm = json.loads(out)
    # Eight teammates at once (each index already cached: the steady state).
    started = time.perf_counter()
    processes = [
        subprocess.Popen(
            [sys.executable, "-m", "kb", "--db", url, "match", str(log), "--json"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(8)
    ]
    slowest = 0.0
    for process in processes:
        out, err = process.communicate()
        slowest = max(slowest, time.perf_counter() - started)
        found = [m["id"] for m in json.loads(out)["matches"]]
        if found != expected:
            raise SystemExit(f"a concurrent match answered {found}, not {expected}: {err}")
    shutil.rmtree(cache, ignore_errors=True)
    return {
        "cold_s": statistics.median(cold),
        "warm_s": warm["match_s"],
        "search_median_s": warm["search_median_s"],
        "search_p95_s": warm["search_p95_s"],
        "eight_wall_s": slowest,
        "matches": len(expected),
    }


AGREEMENT_SNIPPET = """
import json, sys
from kb import KnowledgeBase
out = {}
with KnowledgeBase(sys.argv[1]) as base:
    for query in json.loads(sys.argv[2]):
        found = base.search(query, limit=10)
        out[query] = [found.total, found.method, [r.id for r in found.results]]
print(json.dumps(out))
"""


def search_agreement(sqlite_url: str, pg_url: str) -> list[tuple[str, str, str, str]]:
    """Per query: the totals and methods on both, and how many of SQLite's top 10 PostgreSQL
    also returns in its top 10 (ranking is where the two engines may differ)."""
    answers = []
    for url in (sqlite_url, pg_url):
        _, out = timed(
            [sys.executable, "-c", AGREEMENT_SNIPPET, url, json.dumps(QUERIES)], dict(os.environ)
        )
        answers.append(json.loads(out))
    rows = []
    for query in QUERIES:
        (lite_total, lite_method, lite_ids), (pg_total, pg_method, pg_ids) = (
            answers[0][query],
            answers[1][query],
        )
        shared = len(set(lite_ids) & set(pg_ids))
        rows.append(
            (
                query,
                f"{lite_total} ({lite_method})",
                f"{pg_total} ({pg_method})",
                f"{shared}/{len(lite_ids)}" + (" same order" if lite_ids == pg_ids else ""),
            )
        )
    return rows


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.0f} ms" if seconds < 10 else f"{seconds:.0f} s"


def s(seconds: float) -> str:
    return f"{seconds:.1f} s"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--scale", type=int, default=150_000)
    parser.add_argument("--skip-scale", action="store_true", help="no first match at --scale")
    parser.add_argument("--import-repeat", type=int, help="imports per database (--repeat)")
    parser.add_argument("--skip-copy", action="store_true", help="no import through COPY")
    args = parser.parse_args()
    records = args.corpus / "records.jsonl.gz"
    log = args.corpus / "logs" / "paste.log"
    work = Path(tempfile.mkdtemp(prefix="kb-bench-pg-"))
    server = pg_server.start()
    try:
        names = iter(range(1000))

        def pg_url(_n: int) -> str:
            return server.create_database(f"bench_{next(names)}")

        def sqlite_url(n: int) -> str:
            return str(work / f"bench-{n}.sqlite3")

        print("importing (SQLite, PostgreSQL values, PostgreSQL copy) ...", file=sys.stderr)
        imports_each = args.import_repeat or args.repeat
        imports = {
            "SQLite": import_runs(sqlite_url, records, "values", imports_each),
            "PostgreSQL": import_runs(pg_url, records, "values", imports_each),
        }
        if not args.skip_copy:
            imports["PostgreSQL (COPY)"] = import_runs(pg_url, records, "copy", imports_each)
        agreement = search_agreement(imports["SQLite"]["url"], imports["PostgreSQL"]["url"])
        results: dict[str, dict[str, Any]] = {}
        for name in ("SQLite", "PostgreSQL"):
            url = imports[name]["url"]
            print(f"matching and searching on {name} ...", file=sys.stderr)
            results[name] = match_and_search(url, log, args.repeat)
            results[name] |= first_match(url, log, args.repeat)
        scaled: dict[str, dict[str, float]] = {}
        if not args.skip_scale:
            from benchmarks.scale_corpus import corpus_path

            big = corpus_path(OUT, args.scale)
            if not big.exists():
                subprocess.run(
                    [sys.executable, str(HERE / "scale_corpus.py"), str(args.scale)], check=True
                )
            for name, url_of in (("SQLite", sqlite_url), ("PostgreSQL", pg_url)):
                print(f"first match at {args.scale:,} records on {name} ...", file=sys.stderr)
                scaled_run = import_runs(lambda n, url_of=url_of: url_of(100 + n), big, "values", 1)
                scaled[name] = first_match(scaled_run["url"], log, args.repeat) | scaled_run
    finally:
        server.stop()
        shutil.rmtree(work, ignore_errors=True)
    count = imports["SQLite"]["records"]
    rows = [
        ("import of the corpus (records)", "import_s", imports, s),
        ("matcher index built and stored", "build_s", imports, s),
    ]
    print(f"\n{count:,} records, paste.log; medians of {args.repeat} runs\n")
    print("| | SQLite | PostgreSQL |\n|---|---:|---:|")
    for label, key, table, fmt in rows:
        print(f"| {label} | {fmt(table['SQLite'][key])} | {fmt(table['PostgreSQL'][key])} |")
    if "PostgreSQL (COPY)" in imports:
        copy = imports["PostgreSQL (COPY)"]["import_s"]
        print(f"| import with COPY into a staging table instead | | {s(copy)} |")
    for label, key in (
        ("first match, index fetched from the database", "fetched_s"),
        ("first match, index rebuilt (nothing stored)", "rebuilt_s"),
        ("cold match (index in the cache folder)", "cold_s"),
        ("warm match (library, same process)", "warm_s"),
        ("search median (library)", "search_median_s"),
        ("search p95 (library)", "search_p95_s"),
        ("8 concurrent `kb match`: all answered in", "eight_wall_s"),
    ):
        cells = " | ".join(ms(results[name][key]) for name in ("SQLite", "PostgreSQL"))
        print(f"| {label} | {cells} |")
    print("\n| query | SQLite: found (how) | PostgreSQL: found (how) | top 10 shared |")
    print("|---|---:|---:|---:|")
    for row in agreement:
        print("| " + " | ".join(row) + " |")
    for name, figures in scaled.items():
        print(
            f"\nAt {args.scale:,} records on {name}: import {s(figures['import_s'])}, "
            f"index build {s(figures['build_s'])}; first match {s(figures['fetched_s'])} "
            f"with the index fetched, {s(figures['rebuilt_s'])} rebuilding it."
        )


if __name__ == "__main__":
    main()
