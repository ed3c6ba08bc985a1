"""Time kb's matcher against the naive loop on the shared corpus, in one run.

    .venv/bin/python benchmarks/bench_engines.py [--corpus ../shared/corpus] [--repeat 5]

Measures, against every record of records.jsonl.gz: preparing the patterns, building the index
(Hyperscan literal database + SQLite cache), the cache's size, a cold load and a cold
`match(paste.log)` in a new process (interpreter start included), warm matches of paste.log and
big.log (MB/s, peak RSS of a process that streams big.log), and the naive loop (every pattern
over every line with Python `re`, and with google-re2) on a random sample of patterns, scaled
linearly to the whole corpus. Prints a table of medians and ratios; benchmarks/ENGINES.md keeps
the figures of one run.
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


NAIVE_SNIPPET = """
import json, re, sys, time
patterns = json.load(open(sys.argv[1]))
lines = open(sys.argv[2], encoding="utf-8", errors="replace").read().splitlines()
engine = sys.argv[3]
if engine == "re2":
    import re2
    sys.path.insert(0, sys.argv[4])
    from kb.patterns import prepare
    compiled = [re2.compile(prepare(p, "").regex or re.escape(p)) for p in patterns]
else:
    compiled = [re.compile(p) for p in patterns]
started = time.perf_counter()
for done, regex in enumerate(compiled, 1):
    search = regex.search
    for line in lines:
        search(line)
    print(done, time.perf_counter() - started, flush=True)
"""


def naive(
    patterns: list[str], log: Path, engine: str, budget: float
) -> tuple[float, int, bool, list[float]]:
    """Every pattern over every line, in a child process stopped after `budget` seconds (one
    backtracking pattern can take hours on a long line and `re` cannot be interrupted).
    Returns (seconds, patterns done, finished, seconds of each finished pattern)."""
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as fh:
        json.dump(patterns, fh)
    args = [sys.executable, "-c", NAIVE_SNIPPET, fh.name, str(log), engine, str(ROOT)]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, text=True)
    done, elapsed = 0, 0.0
    each: list[float] = []
    started = time.perf_counter()
    assert proc.stdout is not None
    import selectors

    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    while True:
        left = budget - (time.perf_counter() - started)
        if left <= 0 or not sel.select(timeout=left):
            proc.kill()
            proc.wait()
            Path(fh.name).unlink()
            # the pattern that was running when we stopped counts as taking the whole wait
            return time.perf_counter() - started, done + 1, False, each
        line = proc.stdout.readline()
        if not line:
            break
        done_s, elapsed_s = line.split()
        each.append(float(elapsed_s) - elapsed)
        done, elapsed = int(done_s), float(elapsed_s)
    proc.wait()
    Path(fh.name).unlink()
    return elapsed, done, True, each


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

    rng = random.Random(20261129)
    patterns = sorted({r["messagePattern"] for r in recs})
    sample = rng.sample(patterns, min(args.sample, len(patterns)))

    def naive_row(label: str, pats: list[str], log: Path, engine: str) -> float:
        seconds, done, finished, each = naive(pats, log, engine, args.budget)
        scaled = seconds * len(patterns) / done
        bound = "" if finished else f" at least (stopped after {done} patterns)"
        typical = statistics.median(each) * len(patterns) if each else float("nan")
        row(
            f"{label} ({done} patterns, scaled to {len(patterns):,})",
            f"{scaled:,.1f} s{bound}; median pattern x N: {typical:,.1f} s",
        )
        return scaled

    naive_re = naive_row("naive re, paste.log", sample, paste, "re")
    naive_row("naive re2 per pattern, paste.log", sample, paste, "re2")
    naive_big = naive_row("naive re, big.log", sample[: args.big_sample], big, "re")
    print()
    print(f"ratio naive re / kb warm, paste.log: {naive_re / paste_warm:,.0f}x")
    print(f"ratio naive re / kb cold process, paste.log: {naive_re / c_paste['wall']:,.0f}x")
    print(f"ratio naive re / kb, big.log: {naive_big / c_big['match']:,.0f}x")


if __name__ == "__main__":
    main()
