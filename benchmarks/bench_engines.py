"""Time kb's matcher against the naive loop on the shared corpus, in one run.

    .venv/bin/python benchmarks/bench_engines.py [--corpus ../shared/corpus] [--repeat 5]

Measures, against every record of records.jsonl.gz: preparing the patterns, building the index
(Hyperscan literal database + SQLite cache), the cache's size, a cold load and a cold
`match(paste.log)` in a new process (interpreter start included), warm matches of paste.log and
big.log (MB/s, peak RSS of a process that streams big.log), and the naive loop (every pattern
over every line with Python `re`, and with google-re2) on a random sample of the prepared
patterns (and, labelled, the raw ones), scaled linearly to the whole corpus. Prints a table of
medians and ratios: a quick loop while working on the matcher. The reference figures, against
every peer and at every size, are benchmarks/run.py's, in benchmarks/RESULTS.md.
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from peers import NaiveRun, naive  # noqa: E402

from kb.matcher import CACHE_FILE, build_index, load_index, sources_from_records  # noqa: E402
from kb.patterns import prepare  # noqa: E402

COLD_SNIPPET = """
import sys, time
t0 = time.perf_counter()
from pathlib import Path
from kb.matcher import load_index
index = load_index(Path(sys.argv[1]), "bench")
t1 = time.perf_counter()
report = index.match(Path(sys.argv[2])) if len(sys.argv) > 2 else None
t2 = time.perf_counter()
# VmHWM, not ru_maxrss: Linux keeps ru_maxrss across exec, so it would report the parent's.
rss = next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM"))
print(t1 - t0, t2 - t1, len(report.matches) if report else 0, rss)
"""


def records(corpus: Path) -> list[dict[str, Any]]:
    with gzip.open(corpus / "records.jsonl.gz", "rt", encoding="utf-8") as fh:
        return [json.loads(line)["record"] for line in fh]


def cold(cache: Path, log: Path | None, repeat: int) -> dict[str, float]:
    """New processes: wall time (interpreter start included), load and match inside."""
    walls, loads, matches, rss = [], [], [], []
    for _ in range(repeat):
        args = [sys.executable, "-c", COLD_SNIPPET, str(cache)] + ([str(log)] if log else [])
        started = time.perf_counter()
        out = subprocess.run(args, check=True, capture_output=True, text=True, cwd=ROOT)
        walls.append(time.perf_counter() - started)
        load_s, match_s, _n, rss_kb = out.stdout.split()
        loads.append(float(load_s))
        matches.append(float(match_s))
        rss.append(float(rss_kb))
    return {
        "wall": statistics.median(walls),
        "load": statistics.median(loads),
        "match": statistics.median(matches),
        "rss_mb": statistics.median(rss) / 1024,
    }


def python_baseline(repeat: int) -> float:
    walls = []
    for _ in range(repeat):
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        walls.append(time.perf_counter() - started)
    return statistics.median(walls)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, default=ROOT.parent / "shared" / "corpus")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--sample", type=int, default=200, help="patterns for the naive loop")
    parser.add_argument("--big-sample", type=int, default=20, help="patterns for naive on big.log")
    parser.add_argument("--budget", type=float, default=60.0, help="seconds per naive run")
    args = parser.parse_args()
    corpus: Path = args.corpus
    paste = corpus / "logs" / "paste.log"
    big = corpus / "logs" / "big.log"
    rows: list[tuple[str, str]] = []

    def row(name: str, value: str) -> None:
        rows.append((name, value))
        print(f"{name:<58} {value}", flush=True)

    recs = records(corpus)
    row("records", f"{len(recs):,}")
    started = time.perf_counter()
    for rec in recs:
        prepare(rec["messagePattern"], rec["errorMessage"])
    prep_s = time.perf_counter() - started
    row("prepare() per record", f"{prep_s / len(recs) * 1e6:.1f} µs")

    with tempfile.TemporaryDirectory() as tmp:
        cache = Path(tmp)
        started = time.perf_counter()
        index = build_index(sources_from_records(recs), cache, "bench")
        build_s = time.perf_counter() - started
        row("build_index (prepare + Hyperscan compile + cache write)", f"{build_s:.1f} s")
        row("cache file size", f"{(cache / CACHE_FILE).stat().st_size / 1e6:.1f} MB")
        started = time.perf_counter()
        load_index(cache, "bench")
        row("load_index, warm process", f"{(time.perf_counter() - started) * 1000:.1f} ms")

        base = python_baseline(args.repeat)
        row("python -c pass (cold interpreter)", f"{base * 1000:.0f} ms")
        c_load = cold(cache, None, args.repeat)
        row("cold: import kb.matcher + load_index", f"{c_load['load'] * 1000:.0f} ms")
        c_paste = cold(cache, paste, args.repeat)
        row(
            "cold: whole process, load + match paste.log",
            f"{c_paste['wall'] * 1000:.0f} ms (match {c_paste['match'] * 1000:.0f} ms)",
        )

        warm_paste = []
        for _ in range(args.repeat):
            started = time.perf_counter()
            index.match(paste)
            warm_paste.append(time.perf_counter() - started)
        paste_warm = statistics.median(warm_paste)
        row("warm: match paste.log", f"{paste_warm * 1000:.1f} ms")

        c_big = cold(cache, big, max(3, args.repeat // 2))
        big_mb = big.stat().st_size / 1e6
        row(
            "big.log, new process: match (streamed)",
            f"{c_big['match']:.2f} s = {big_mb / c_big['match']:.0f} MB/s, "
            f"peak RSS {c_big['rss_mb']:.0f} MB",
        )
        c_none = cold(cache, None, 3)
        row("  (peak RSS of the same process without a log)", f"{c_none['rss_mb']:.0f} MB")

    # The naive loop gets the patterns prepared as kb prepares them (what a careful user of
    # `re` would run: the quadratic leading `(.+?)` anchored), and, labelled, the raw ones.
    rng = random.Random(20261129)
    patterns = sorted({r["messagePattern"] for r in recs})
    prepared = {p: prepare(p, "").regex for p in patterns}
    runnable = [p for p in patterns if prepared[p] is not None]
    raw = rng.sample(runnable, min(args.sample, len(runnable)))
    ready = [prepared[p] or "" for p in raw]
    total = len(runnable)
    kb_figures = {"paste.log warm": paste_warm, "paste.log cold process": c_paste["wall"]}

    def naive_row(label: str, pats: list[str], log: Path, engine: str) -> NaiveRun:
        run = naive(pats, log, args.budget, total, engine)
        name = f"{label} ({run.ran} patterns, scaled to {total:,})"
        if run.error is not None:
            row(name, f"failed: {run.error}")  # a crashed child is no figure, never 0 s
        elif run.finished:
            row(name, f"{run.scaled:,.1f} s; median pattern x N: {run.median_scaled:,.1f} s")
        else:
            row(name, f">= {run.scaled:,.1f} s (cut off after {run.done} patterns)")
        return run

    def ratio(label: str, run: NaiveRun, kb_s: float) -> None:
        if run.error is not None:
            print(f"ratio {label}: none (the naive run failed)")
        elif run.finished:
            print(f"ratio {label}: {run.scaled / kb_s:,.0f}x (estimate)")
        else:
            # Cut off: only the sample's own measured time is a real lower bound.
            print(f"ratio {label}: >= {run.seconds / kb_s:,.0f}x (lower bound: the sample alone)")

    naive_re = naive_row("naive re, prepared, paste.log", ready, paste, "re")
    naive_row("naive re, raw JavaScript patterns, paste.log", raw, paste, "re")
    naive_row("naive re2 per pattern, prepared, paste.log", ready, paste, "re2")
    naive_big = naive_row("naive re, prepared, big.log", ready[: args.big_sample], big, "re")
    print()
    for label, kb_s in kb_figures.items():
        ratio(f"naive re (prepared) / kb, {label}", naive_re, kb_s)
    ratio("naive re (prepared) / kb, big.log", naive_big, c_big["match"])


if __name__ == "__main__":
    main()
