"""Time `kb import` of a corpus against only parsing the same file, in one run.

Each measurement is a new process (so peak memory is its own), repeated; medians are
reported with the ratio kb/parse. Usage:

    python benchmarks/bench_import.py [--corpus ../shared/corpus] [--runs 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEFAULT_CORPUS = HERE.parent.parent / "shared" / "corpus"

PARSE_ONLY = """
import gzip, json, sys
n = 0
with gzip.open(sys.argv[1], "rt", encoding="utf-8") as f:
    for line in f:
        json.loads(line)
        n += 1
print(n)
"""


def run(argv: list[str], env: dict[str, str] | None = None) -> tuple[float, float]:
    """Wall seconds and peak RSS (MB) of one child process."""
    started = time.perf_counter()
    process = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(process.pid, 0)
    elapsed = time.perf_counter() - started
    if os.waitstatus_to_exitcode(status) != 0:
        assert process.stderr is not None
        sys.exit(f"{argv} failed: {process.stderr.read().decode()[-2000:]}")
    return elapsed, usage.ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--file", default="records.jsonl.gz")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    source = args.corpus / args.file
    if not source.exists():
        sys.exit(f"{source}: not found (use --corpus)")
    lines = sum(1 for _ in __import__("gzip").open(source, "rb"))

    parse: list[tuple[float, float]] = []
    kb: list[tuple[float, float]] = []
    reimport: list[tuple[float, float]] = []
    for _ in range(args.runs):
        parse.append(run([sys.executable, "-c", PARSE_ONLY, str(source)]))
        with tempfile.TemporaryDirectory() as tmp:
            db = str(Path(tmp) / "kb.sqlite3")
            command = [sys.executable, "-m", "kb", "--db", db, "import", "--quiet", str(source)]
            kb.append(run(command))
            reimport.append(run(command))  # every record unchanged: the upsert's read path

    def med(samples: list[tuple[float, float]], i: int) -> float:
        return statistics.median(s[i] for s in samples)

    base = med(parse, 0)
    print(f"# Import benchmark: {source.name}, {lines:,} records, {args.runs} runs, medians\n")
    print("| what | seconds | records/s | ratio to parse | peak RSS MB |")
    print("|---|---:|---:|---:|---:|")
    for name, samples in [
        ("parse only (gzip + json.loads)", parse),
        ("kb import into a new SQLite db", kb),
        ("kb import again (all unchanged)", reimport),
    ]:
        seconds = med(samples, 0)
        print(
            f"| {name} | {seconds:.2f} | {lines / seconds:,.0f} | {seconds / base:.1f}x "
            f"| {med(samples, 1):.0f} |"
        )


if __name__ == "__main__":
    main()
