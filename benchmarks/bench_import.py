"""Time the `kb import` command (with its matcher build) against `sqlite-utils insert` of the
same records and against only parsing the file, in one run.

Each measurement is a new process (so peak memory is its own), and the commands take turns
within each run, so that a machine shared with other work slows them alike; medians are
reported with the speed ratio sqlite-utils / kb (at least 1: kb as fast). `--baseline DIR`
adds the `kb import` of another checkout (e.g. `git worktree add /tmp/base main`), run with
PYTHONPATH=DIR by this venv, for a before/after in the same run. Usage:

    python benchmarks/bench_import.py [--corpus ../shared/corpus] [--file records.jsonl.gz]
                                      [--runs 3] [--baseline DIR] [--no-reimport]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEFAULT_CORPUS = HERE.parent.parent / "shared" / "corpus"
SQLITE_UTILS = str(Path(sys.executable).with_name("sqlite-utils"))

PARSE_ONLY = """
import gzip, json, sys
n = 0
with gzip.open(sys.argv[1], "rt", encoding="utf-8") as f:
    for line in f:
        json.loads(line)
        n += 1
print(n)
"""


def run(
    argv: list[str],
    env: dict[str, str] | None = None,
    shell: bool = False,
    cwd: Path | None = None,
) -> tuple[float, float, float]:
    """Wall seconds, peak RSS (MB; the largest of its processes) and CPU seconds (user +
    system, its own processes' together) of one child process."""
    started = time.perf_counter()
    process = subprocess.Popen(
        argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, shell=shell, cwd=cwd
    )
    _, status, usage = os.wait4(process.pid, 0)
    elapsed = time.perf_counter() - started
    if os.waitstatus_to_exitcode(status) != 0:
        assert process.stderr is not None
        sys.exit(f"{argv} failed: {process.stderr.read().decode()[-2000:]}")
    return elapsed, usage.ru_maxrss / 1024, usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--file", default="records.jsonl.gz")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--baseline", type=Path, help="another checkout of kb to time too")
    parser.add_argument("--no-reimport", action="store_true", help="skip the re-import row")
    args = parser.parse_args()
    source = (args.corpus / args.file).resolve()  # an absolute --file stays itself
    if not source.exists():
        sys.exit(f"{source}: not found (use --corpus)")
    lines = sum(1 for _ in __import__("gzip").open(source, "rb"))

    samples: dict[str, list[tuple[float, float, float]]] = {}
    kinds = ["parse", "sqlite-utils", "kb"] + (["baseline"] if args.baseline else [])
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "XDG_CACHE_HOME": str(Path(tmp) / "cache")}
        for i in range(args.runs):
            for kind in kinds:
                db = Path(tmp) / f"{kind}.sqlite3"
                for leftover in Path(tmp).glob(f"{kind}.sqlite3*"):
                    leftover.unlink()
                shutil.rmtree(Path(tmp) / "cache", ignore_errors=True)
                print(f"run {i + 1}/{args.runs}: {kind}", file=sys.stderr, flush=True)
                if kind == "parse":
                    sample = run([sys.executable, "-c", PARSE_ONLY, str(source)])
                elif kind == "sqlite-utils":
                    command = f"gzip -dc {source} | {SQLITE_UTILS} insert {db} records - --nl"
                    sample = run([command], shell=True)
                else:
                    # `python -m` puts the working folder first on sys.path: each command runs
                    # in its own checkout, or the baseline would import this one's kb
                    checkout = (args.baseline if kind == "baseline" else HERE.parent).resolve()
                    kb_env = {**env, "PYTHONPATH": str(checkout)}
                    command = [sys.executable, "-m", "kb", "--db", str(db), "import", "--quiet"]
                    sample = run([*command, str(source)], env=kb_env, cwd=checkout)
                    if kind == "kb" and not args.no_reimport:
                        again = run([*command, str(source)], env=kb_env, cwd=checkout)
                        samples.setdefault("kb again", []).append(again)
                samples.setdefault(kind, []).append(sample)

    def med(name: str, i: int) -> float:
        return statistics.median(s[i] for s in samples[name])

    base = med("sqlite-utils", 0)
    print(f"# Import benchmark: {source.name}, {lines:,} records, {args.runs} runs, medians\n")
    print("| what | seconds | records/s | speed ratio to sqlite-utils | peak RSS MB | CPU s |")
    print("|---|---:|---:|---:|---:|---:|")
    names = {
        "parse": "parse only (gzip + json.loads)",
        "sqlite-utils": "gzip -dc \\| sqlite-utils insert --nl",
        "kb": "`kb import` (with the matcher build) into a new SQLite db",
        "baseline": f"`kb import` of {args.baseline}",
        "kb again": "`kb import` again (all unchanged)",
    }
    for name in [*kinds, "kb again"]:
        if name not in samples:
            continue
        seconds = med(name, 0)
        print(
            f"| {names[name]} | {seconds:.2f} | {lines / seconds:,.0f} | {base / seconds:.2f} "
            f"| {med(name, 1):.0f} | {med(name, 2):.1f} |"
        )
    every = ", ".join(f"{k}: {' '.join(f'{s[0]:.1f}' for s in v)}" for k, v in samples.items())
    print(f"\nEvery run's seconds: {every}")


if __name__ == "__main__":
    main()
