"""Prove a matcher change kept `kb match --json` byte for byte: record the output, then compare.

    .venv/bin/python benchmarks/compare_match_json.py --out /tmp/before --kb OTHER/.venv/bin/kb
    .venv/bin/python benchmarks/compare_match_json.py --against /tmp/before

Imports the shared corpus (`../shared/corpus/records.jsonl.gz`) into `--db` once (kept when it
exists), then runs `kb --db DB match LOG --json` as a user would, a new process per log, on
paste.log and big.log of the shared corpus and on every `*.log` under tests/fixtures/ and
data/logs/. The timing field (`elapsed_ms`) is masked; everything else, the exit status
included, must be equal. `--cache` gives the matcher cache its own folder (XDG_CACHE_HOME), so
two versions of kb never read each other's cache. Exit 0 when every log matched, 1 otherwise.
"""

from __future__ import annotations

import argparse
import difflib
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT.parent / "shared" / "corpus"
# Wall-clock figures (matching, and getting the index) differ on every run; they are the only
# part of the output that may.
TIMING_RE = re.compile(rb'("(?:elapsed|index)_ms": )[0-9.eE+-]+')


def logs() -> list[Path]:
    """Every log compared, in a fixed order."""
    found = [CORPUS / "logs" / "paste.log", CORPUS / "logs" / "big.log"]
    for folder in (ROOT / "tests" / "fixtures", ROOT / "data" / "logs"):
        found += sorted(folder.rglob("*.log"))
    return found


def name_of(log: Path) -> str:
    """A flat file name for a log's output: its path under the repository (or the corpus)."""
    base = CORPUS if log.is_relative_to(CORPUS) else ROOT
    return str(log.relative_to(base)).replace("/", "__") + ".out"


def run_match(kb: str, db: Path, log: Path, env: dict[str, str]) -> bytes:
    done = subprocess.run(
        [kb, "--db", str(db), "match", str(log), "--json"],
        capture_output=True,
        env=env,
        check=False,
    )
    if done.returncode not in (0, 1):
        sys.exit(f"{log}: kb exited {done.returncode}: {done.stderr.decode(errors='replace')}")
    masked = TIMING_RE.sub(rb'\1"masked"', done.stdout)
    return b"exit %d\n" % done.returncode + masked


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--out", type=Path, help="write each log's masked output to this folder")
    mode.add_argument("--against", type=Path, help="compare with the outputs in this folder")
    parser.add_argument("--db", type=Path, default=Path("/tmp/kb-compare.sqlite3"))
    parser.add_argument(
        "--kb", default=str(Path(sys.executable).with_name("kb")), help="the kb to run"
    )
    parser.add_argument("--cache", type=Path, help="XDG_CACHE_HOME for kb (its matcher cache)")
    args = parser.parse_args()

    env = dict(os.environ, NO_COLOR="1")
    if args.cache is not None:
        env["XDG_CACHE_HOME"] = str(args.cache)
    if not args.db.exists():
        print(f"importing the corpus into {args.db} ...", file=sys.stderr)
        subprocess.run(
            [args.kb, "--db", str(args.db), "import", "--quiet", str(CORPUS / "records.jsonl.gz")],
            env=env,
            check=True,
        )
    target = args.out or args.against
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
    differ: list[str] = []
    all_logs = logs()
    for log in all_logs:
        output = run_match(args.kb, args.db, log, env)
        path = target / name_of(log)
        if args.out is not None:
            path.write_bytes(output)
            continue
        # masked again: outputs written by an older version of this script kept index_ms
        expected = (
            TIMING_RE.sub(rb'\1"masked"', path.read_bytes()) if path.exists() else b"(missing)\n"
        )
        if output != expected:
            differ.append(name_of(log))
            diff = difflib.unified_diff(
                expected.decode(errors="replace").splitlines(),
                output.decode(errors="replace").splitlines(),
                "before",
                "after",
                lineterm="",
                n=2,
            )
            print(f"--- {log}", *list(diff)[:40], sep="\n")
    if args.out is not None:
        print(f"wrote {len(all_logs)} outputs to {args.out}")
        return 0
    print(f"{len(all_logs) - len(differ)} of {len(all_logs)} logs byte-identical (timing masked)")
    return 1 if differ else 0


if __name__ == "__main__":
    raise SystemExit(main())
