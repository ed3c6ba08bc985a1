"""Time `kb match` of one log, warm and cold, for this checkout and (with `--baseline DIR`)
another one, in turns, so that a noisy machine slows both alike.

*Warm*: a new process per checkout and round opens the knowledge base, matches the log once,
then times `--repeats` more matches (`KnowledgeBase.match`), and how long of each the main
thread waited for the prefilter's scan thread. *Cold*: `python -m kb --db DB match --json LOG`
as a new process, `--cold` times per checkout. Each command runs in its own checkout's folder
(`python -m` and `-c` put the working folder first on sys.path). The answers (line, id, score
of every match) of the two checkouts are compared. Usage:

    python benchmarks/bench_match.py --db benchmarks/out/kb-1000000.sqlite3
        [--log ../shared/corpus/logs/big.log] [--rounds 2] [--repeats 5] [--cold 9]
        [--baseline DIR]
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
from typing import Any

HERE = Path(__file__).resolve().parent
DEFAULT_LOG = HERE.parent.parent / "shared" / "corpus" / "logs" / "big.log"

WORKER = """
import hashlib, json, sys, time
from kb import KnowledgeBase

waited = [0.0]
try:  # the main thread's wait for the scan thread, where this checkout has one
    from kb.matcher import prefilter
    wait = prefilter.BlockScan.wait
    def timed_wait(self):
        started = time.perf_counter()
        wait(self)
        waited[0] += time.perf_counter() - started
    prefilter.BlockScan.wait = timed_wait
except (ImportError, AttributeError):
    pass
kb = KnowledgeBase(sys.argv[1])
data = open(sys.argv[2], "rb").read()
first = kb.match(data)
answers = [(m.line, m.id, round(m.score, 6)) for m in first.matches]
times = []
for _ in range(int(sys.argv[3])):
    waited[0] = 0.0
    started = time.perf_counter()
    kb.match(data)
    times.append((time.perf_counter() - started, waited[0]))
digest = hashlib.sha256(json.dumps(answers).encode()).hexdigest()[:16]
print(json.dumps({"times": times, "answers": digest, "matches": len(answers)}))
"""


def warm(checkout: Path, db: Path, log: Path, repeats: int) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    done = subprocess.run(
        [sys.executable, "-c", WORKER, str(db), str(log), str(repeats)],
        cwd=checkout,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def cold(checkout: Path, db: Path, log: Path) -> float:
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "kb", "--db", str(db), "match", "--json", str(log)],
        cwd=checkout,
        env=env,
        stdout=subprocess.DEVNULL,
        check=False,  # exit 1 (nothing found) is still a timing
    )
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--db", type=Path, required=True)
    parser.add_argument("--log", type=Path, default=DEFAULT_LOG)
    parser.add_argument("--rounds", type=int, default=2, help="warm processes per checkout")
    parser.add_argument("--repeats", type=int, default=5, help="timed matches per process")
    parser.add_argument("--cold", type=int, default=9, help="cold processes per checkout")
    parser.add_argument("--baseline", type=Path, help="another checkout of kb, timed in turns")
    args = parser.parse_args()
    db, log = args.db.resolve(), args.log.resolve()
    for path in (db, log):
        if not path.is_file():
            sys.exit(f"bench_match: {path}: no such file")
    checkouts = {"this checkout": HERE.parent}
    if args.baseline:
        checkouts[f"baseline {args.baseline}"] = args.baseline.resolve()
    warm_runs: dict[str, list[dict[str, Any]]] = {name: [] for name in checkouts}
    cold_runs: dict[str, list[float]] = {name: [] for name in checkouts}
    for turn in range(max(args.rounds, args.cold)):
        order = list(checkouts.items())
        if turn % 2:
            order.reverse()  # who goes first alternates
        for name, checkout in order:
            if turn < args.rounds:
                warm_runs[name].append(warm(checkout, db, log, args.repeats))
            if turn < args.cold:
                cold_runs[name].append(cold(checkout, db, log))
    size = log.stat().st_size / 1e6
    print(f"# kb match of {log.name} ({size:.1f} MB) against {db.name}\n")
    print(
        "| checkout | warm median s | warm MB/s | main thread waited for the scan, median s "
        "| cold median s | cold MB/s | answers |"
    )
    print("|---|---:|---:|---:|---:|---:|---|")
    medians: dict[str, tuple[float, float]] = {}
    for name in checkouts:
        times = [t for run in warm_runs[name] for t in run["times"]]
        warm_s = statistics.median(t[0] for t in times) if times else float("nan")
        wait_s = statistics.median(t[1] for t in times) if times else float("nan")
        cold_s = statistics.median(cold_runs[name]) if cold_runs[name] else float("nan")
        medians[name] = (warm_s, cold_s)
        answers = {f"{r['matches']} matches, {r['answers']}" for r in warm_runs[name]}
        print(
            f"| {name} | {warm_s:.3f} | {size / warm_s:.0f} | {wait_s:.3f} | {cold_s:.3f} "
            f"| {size / cold_s:.0f} | {', '.join(sorted(answers))} |"
        )
    if len(medians) == 2:
        (this_warm, this_cold), (base_warm, base_cold) = medians.values()
        print(
            f"\nratio baseline / this: warm {base_warm / this_warm:.2f}x, "
            f"cold {base_cold / this_cold:.2f}x"
        )
    every = "; ".join(
        f"{name}: {' '.join(f'{s:.3f}' for s in cold_runs[name])}" for name in checkouts
    )
    print(f"\nEvery cold run's seconds: {every}")


if __name__ == "__main__":
    main()
