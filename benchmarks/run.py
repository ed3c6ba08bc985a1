"""The one benchmark command: kb at the real dataset's scale and beyond, against its peers.

    .venv/bin/python benchmarks/run.py [--sizes 69652,150000] [--with-1m] [--runs 3]

For each size it derives the corpus (benchmarks/scale_corpus.py; the first size is the shared
corpus itself, written flat), then measures, each as the median of --runs new processes with
the baselines in the same run:
  import   parse only (gzip + json.loads) | `sqlite-utils insert --nl` of the same records |
           kb import (validation, upsert, FTS5) | kb's matcher index build | kb re-import of
           the same file (every record unchanged); seconds, records/s, peak RSS
  indexes  size of the database, its full-text index, the matcher cache and its Hyperscan blob
  match    cold `kb match --json` (new process) and warm (library call) of paste.log and big.log,
           against the naive loop (every pattern with `re` on a sample, scaled linearly),
           `rg -f` with the same patterns, and a raw Hyperscan scan of the patterns (no
           verification, compile excluded)
  search   warm library calls and cold `kb search` on bench_search.QUERIES
and writes benchmarks/RESULTS.md with the machine, date and commit. Everything big lives in
benchmarks/out/ (gitignored). Peak RSS comes from /usr/bin/time (%M) so that the parent's own
memory never counts.
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

import bench_search  # noqa: E402
import scale_corpus  # noqa: E402
from bench_engines import naive  # noqa: E402
from bench_import import PARSE_ONLY  # noqa: E402

CORPUS = ROOT.parent / "shared" / "corpus"
PY = sys.executable
KB = [PY, "-m", "kb"]
SQLITE_UTILS = str(Path(PY).with_name("sqlite-utils"))
MILLION = 1_000_000
# rg's and Hyperscan's compile time grows with the pattern count; past these they are cut off.
RG_TIMEOUT_S = 180
RG_MAX_BYTES = 12 << 30  # address space for rg: at 50k patterns it used 2 GB on a 25 KB paste
# rg's default 100 MB regex size limit refuses even the 70k-record pattern set.
RG_LIMITS = ("--regex-size-limit", "64G", "--dfa-size-limit", "4G")
HS_MAX_PATTERNS = 160_000
NAIVE_SAMPLE = 60
NAIVE_BUDGET_S = 20.0

IMPORT_ONLY = """
import sys
from kb.knowledge import KnowledgeBase
kb = KnowledgeBase(sys.argv[1])
report = kb.import_sources([sys.argv[2]])
assert report.rejected == 0, report.errors[:3]
print(report.inserted, report.updated, report.unchanged)
"""

BUILD_ONLY = """
import sys
from kb.knowledge import KnowledgeBase
import shutil
kb = KnowledgeBase(sys.argv[1])
shutil.rmtree(kb.cache_dir(), ignore_errors=True)
kb.build_matcher()  # as `kb import` runs it
"""

WARM = """
import json, statistics, sys, time
from pathlib import Path
from kb.knowledge import KnowledgeBase
kb = KnowledgeBase(sys.argv[1])
kb.matcher()
out = {}
for name, runs in (("paste", 15), ("big", 3)):
    path = Path(sys.argv[2 if name == "paste" else 3])
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        report = kb.match(path)
        times.append(time.perf_counter() - t)
    out[name] = [statistics.median(times), len(report.matches)]
queries = json.loads(sys.argv[4])
times = []
for q in queries:
    kb.search(q)
    for _ in range(10):
        t = time.perf_counter()
        kb.search(q)
        times.append(time.perf_counter() - t)
times.sort()
out["search"] = [statistics.median(times), times[int(0.95 * len(times))]]
print(json.dumps(out))
"""

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


@dataclass
class Sample:
    seconds: list[float] = field(default_factory=list)
    rss_mb: list[float] = field(default_factory=list)
    stdout: str = ""

    @property
    def s(self) -> float:
        return statistics.median(self.seconds)

    @property
    def mb(self) -> float:
        return statistics.median(self.rss_mb) if self.rss_mb else float("nan")


def timed(
    argv: list[str],
    *,
    shell: bool = False,
    timeout: float | None = None,
    limit_as: int | None = None,
    may_fail: bool = False,
) -> Sample:
    """One new process under /usr/bin/time: wall seconds, peak RSS (MB), stdout. A timeout
    gives inf seconds; a failure allowed by may_fail gives nan seconds."""

    def limit() -> None:
        if limit_as is not None:
            import resource

            resource.setrlimit(resource.RLIMIT_AS, (limit_as, limit_as))

    with tempfile.NamedTemporaryFile("r", suffix=".rss") as rss:
        cmd = ["/usr/bin/time", "-f", "%M", "-o", rss.name]
        cmd += ["sh", "-c", argv[0]] if shell else argv
        started = time.perf_counter()
        try:
            done = subprocess.run(
                cmd,
                capture_output=True,
                text=True,
                cwd=ROOT,
                timeout=timeout,
                check=False,
                preexec_fn=limit if limit_as is not None else None,
            )
        except subprocess.TimeoutExpired:
            return Sample([float("inf")], [])
        elapsed = time.perf_counter() - started
        if done.returncode not in (0, 1) and may_fail:
            return Sample([float("nan")], [], done.stderr.strip().splitlines()[-1][:200])
        if done.returncode not in (0, 1):
            sys.exit(f"{argv} failed ({done.returncode}): {done.stderr[-2000:]}")
        text = Path(rss.name).read_text().split()
        kb_max = float(text[-1]) / 1024 if text else float("nan")
        return Sample([elapsed], [kb_max], done.stdout)


def repeat(
    runs: int, make: Callable[[], Sample], before: Callable[[], None] | None = None
) -> Sample:
    out = Sample()
    for _ in range(runs):
        if before is not None:
            before()
        one = make()
        out.seconds += one.seconds
        out.rss_mb += one.rss_mb
        out.stdout = one.stdout
    return out


def rm_db(path: Path) -> None:
    for suffix in ("", "-wal", "-shm", "-journal"):
        Path(str(path) + suffix).unlink(missing_ok=True)


def cache_dir(db: Path) -> Path:
    from kb.config import cache_dir_for, resolve_database_url

    return cache_dir_for(resolve_database_url(str(db)))


def fmt_s(x: float) -> str:
    if x == float("inf"):
        return "killed"
    return f"{x:.3f}" if x < 1 else f"{x:.2f}" if x < 100 else f"{x:,.0f}"


def rg_s(sample: Sample) -> str:
    x = sample.s
    if x != x:
        return f"failed ({sample.stdout})"
    if x == float("inf"):
        return f"> {RG_TIMEOUT_S} s (killed, or cut off at a smaller size)"
    return fmt_s(x)


def ratio(a: float, b: float) -> str:
    if a != a:
        return "-"
    if a == float("inf"):
        return f"> {RG_TIMEOUT_S / b:,.0f}×"
    return f"{a / b:,.0f}×"


def fmt_mb(x: float) -> str:
    return "-" if x != x else f"{x:,.0f}"


def machine() -> str:
    cpu = "unknown CPU"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    mem = ""
    with open("/proc/meminfo") as f:
        mem = f"{int(f.readline().split()[1]) / 1024 / 1024:.0f} GB RAM"
    with open("/proc/loadavg") as f:
        load = f.read().split()[:3]
    return (
        f"{os.cpu_count()} cores ({cpu}), {mem}, Linux {platform.release()}, "
        f"Python {platform.python_version()}, SQLite {__import__('sqlite3').sqlite_version}; "
        f"load average at start {' '.join(load)}"
    )


def commit() -> str:
    def git(*args: str) -> str:
        return subprocess.run(
            ["git", *args], capture_output=True, text=True, cwd=ROOT, check=False
        ).stdout.strip()

    # Tracked files only: RESULTS.md itself is untracked while the run writes it.
    dirty = git("status", "--porcelain", "--untracked-files=no", "--", "kb", "migrations")
    return git("rev-parse", "--short", "HEAD") + (" (+ uncommitted changes)" if dirty else "")


def db_sizes(db: Path) -> dict[str, float]:
    import sqlite3

    con = sqlite3.connect(db)
    out = {"db": db.stat().st_size / 1e6}
    try:
        rows = con.execute(
            "SELECT name LIKE 'records_fts%', SUM(pgsize) FROM dbstat GROUP BY 1"
        ).fetchall()
        out.update({("fts" if k else "rest"): v / 1e6 for k, v in rows})
    except sqlite3.Error:
        pass
    con.close()
    cache = cache_dir(db)
    matcher = cache / "matcher.sqlite3"
    if matcher.exists():
        out["matcher"] = matcher.stat().st_size / 1e6
        con = sqlite3.connect(matcher)
        meta = dict(con.execute("SELECT k, v FROM meta WHERE k != 'fuzzy'"))
        (blob, shards) = con.execute("SELECT SUM(length(hsdb)), COUNT(*) FROM shards").fetchone()
        con.close()
        out["hsdb"] = blob / 1e6
        out["shards"] = float(shards)
        out["patterns"] = float(meta["patterns"])
        out["built_s"] = float(meta["built_s"])
    other = sum(
        p.stat().st_size for p in cache.glob("*") if p.is_file() and p.name != "matcher.sqlite3"
    )
    out["other_cache"] = other / 1e6
    return out


def bench_size(count: int, args: argparse.Namespace, log: Callable[[str], None]) -> dict[str, Any]:
    out_dir: Path = args.out
    corpus = scale_corpus.write(
        CORPUS / "records.jsonl.gz", count, scale_corpus.DEFAULT_SEED, out_dir
    )
    runs = 1 if count >= MILLION else args.runs
    res: dict[str, Any] = {"count": count, "runs": runs, "gz_mb": corpus.stat().st_size / 1e6}
    db = out_dir / f"kb-{count}.sqlite3"
    su_db = out_dir / f"sqlite-utils-{count}.sqlite3"

    log(f"{count}: parse only")
    res["parse"] = repeat(runs, lambda: timed([PY, "-c", PARSE_ONLY, str(corpus)]))
    log(f"{count}: sqlite-utils insert --nl")
    res["sqlite_utils"] = repeat(
        runs,
        lambda: timed(
            [f"gzip -dc {corpus} | {SQLITE_UTILS} insert {su_db} records - --nl"], shell=True
        ),
        before=lambda: rm_db(su_db),
    )
    rm_db(su_db)

    def fresh() -> None:
        rm_db(db)
        shutil.rmtree(cache_dir(db), ignore_errors=True)

    imports, builds = Sample(), Sample()
    for i in range(runs):
        log(f"{count}: kb import, run {i + 1}/{runs}")
        fresh()
        one = timed([PY, "-c", IMPORT_ONLY, str(db), str(corpus)])
        imports.seconds += one.seconds
        imports.rss_mb += one.rss_mb
        log(f"{count}: kb matcher build, run {i + 1}/{runs}")
        one = timed([PY, "-c", BUILD_ONLY, str(db)])
        builds.seconds += one.seconds
        builds.rss_mb += one.rss_mb
    res["kb_import"], res["kb_build"] = imports, builds
    log(f"{count}: kb import, the CLI (import, then the matcher build, in one process)")
    fresh()
    res["kb_cli_import"] = timed([*KB, "--db", str(db), "import", "--quiet", str(corpus)])
    log(f"{count}: kb re-import (all unchanged)")
    res["kb_reimport"] = timed([PY, "-c", IMPORT_ONLY, str(db), str(corpus)])
    res["sizes"] = db_sizes(db)

    paste = CORPUS / "logs" / "paste.log"
    big = CORPUS / "logs" / "big.log"
    log(f"{count}: cold kb match")
    match = [*KB, "--db", str(db), "match", "--json"]
    res["cold_paste"] = repeat(max(5, runs), lambda: timed([*match, str(paste)]))
    res["cold_big"] = repeat(runs, lambda: timed([*match, str(big)]))
    res["found_paste"] = len(json.loads(res["cold_paste"].stdout)["matches"])
    res["found_big"] = len(json.loads(res["cold_big"].stdout)["matches"])
    log(f"{count}: warm kb match and search")
    warm = timed([PY, "-c", WARM, str(db), str(paste), str(big), json.dumps(bench_search.QUERIES)])
    res["warm"] = json.loads(warm.stdout)
    res["warm_rss"] = warm.mb
    res["cold_search"] = repeat(
        1,
        lambda: Sample(
            [
                statistics.median(
                    timed([*KB, "--db", str(db), "search", q]).s for q in bench_search.QUERIES[:5]
                )
            ]
        ),
    )

    log(f"{count}: patterns for the peers")
    pats_file = out_dir / f"patterns-{count}.json"
    timed([PY, "-c", PATTERNS_OUT, str(db), str(pats_file)])
    pairs = json.loads(pats_file.read_text())
    res["peer_patterns"] = len(pairs)
    rg_file = out_dir / f"patterns-{count}.rg"
    # rg refuses a newline in a pattern unless multi-line; those few (messages that span lines) are
    # left out of its set.
    rg_pats = [r for r, _ in pairs if "\n" not in r and "\\n" not in r]
    res["rg_patterns"] = len(rg_pats)
    rg_file.write_text("".join(r + "\n" for r in rg_pats))
    for name, path in (("rg_paste", paste), ("rg_big", big)):
        if name in args.rg_gave_up:
            # More patterns only take longer: it was cut off at a smaller size already.
            res[name] = Sample([float("inf")], [])
            continue
        log(f"{count}: ripgrep {path.name}")
        res[name] = timed(
            ["rg", "-c", *RG_LIMITS, "-f", str(rg_file), str(path)],
            timeout=RG_TIMEOUT_S,
            limit_as=RG_MAX_BYTES,
            may_fail=True,
        )
        if res[name].s != res[name].s or res[name].s == float("inf"):
            args.rg_gave_up.add(name)
    log(f"{count}: hyperscan raw scan")
    hs = timed(
        [PY, "-c", HS_SCAN, str(pats_file), f"{paste},{big}", str(HS_MAX_PATTERNS)], timeout=1800
    )
    res["hs"] = json.loads(hs.stdout) if hs.stdout else None
    res["hs_paths"] = (str(paste), str(big))
    log(f"{count}: naive loop on a sample")
    import random

    sample = random.Random(count).sample([p for _, p in pairs], min(NAIVE_SAMPLE, len(pairs)))
    for name, path in (("naive_paste", paste), ("naive_big", big)):
        secs, done, finished, each = naive(sample, path, "re", NAIVE_BUDGET_S)
        res[name] = {
            "seconds": secs,
            "done": done,
            "finished": finished,
            "median_each": statistics.median(each) if each else secs,
            "total_patterns": len(pairs),
        }
    rm_db(su_db)
    return res


def render(results: list[dict[str, Any]], started: datetime, wall: float) -> str:
    big_mb = (CORPUS / "logs" / "big.log").stat().st_size / 1e6
    head = " | ".join(f"{r['count']:,} records" for r in results)
    sep = "|".join("---:" for _ in results)
    lines = [
        "# kb benchmarks: import, match and search at 70k, 150k and 1M records",
        "",
        "Written by `.venv/bin/python benchmarks/run.py"
        + (" --with-1m" if any(r["count"] >= MILLION for r in results) else "")
        + "` (the whole run took "
        + f"{wall / 60:.0f} min).",
        "",
        f"- **Date:** {started:%Y-%m-%d %H:%M} UTC; **commit:** `{commit()}`",
        f"- **Machine:** {machine()}",
        "- **Corpora:** benchmarks/scale_corpus.py, seed "
        f"{scale_corpus.DEFAULT_SEED}: the 69,652 real records, then variants (new id, one word "
        "of the message replaced by a made-up word of the same length) until the count; flat "
        "JSONL, gzipped. " + "; ".join(f"{r['count']:,}: {r['gz_mb']:.0f} MB gz" for r in results),
        "- **Runs:** medians of "
        + ", ".join(f"{r['runs']}" for r in results)
        + " new processes per size (cold match of paste.log: at least 5); wall seconds; peak "
        "RSS from `/usr/bin/time -f %M`. kb's bytecode is compiled before the runs, as `pip "
        "install` does (this machine sets PYTHONDONTWRITEBYTECODE, so an editable checkout "
        "would otherwise compile kb's sources in every new process).",
        "",
        "## Import",
        "",
        "What each does: *parse only* is gzip + `json.loads` per line. *sqlite-utils* is "
        "`gzip -dc FILE | sqlite-utils insert DB records - --nl` (no validation, no upsert, no "
        "full-text index, no matcher index; gzip runs in its own process). *kb import* validates "
        "every field, upserts by id with a content hash, keeps tags and the FTS5 index, in one "
        "transaction (the library call, as `kb import` runs it). *matcher build* prepares every "
        "pattern and compiles the Hyperscan prefilter and its cache (what `kb import` does next).",
        "",
        f"| what | {head} |",
        f"|---|{sep}|",
    ]

    def row(label: str, cells: list[str]) -> None:
        lines.append(f"| {label} | " + " | ".join(cells) + " |")

    for key, label in (
        ("parse", "parse only"),
        ("sqlite_utils", "sqlite-utils insert --nl"),
        ("kb_import", "**kb import**"),
        ("kb_build", "kb matcher build"),
    ):
        row(f"{label}: s", [fmt_s(r[key].s) for r in results])
        row(f"{label}: records/s", [f"{r['count'] / r[key].s:,.0f}" for r in results])
        row(f"{label}: peak RSS MB", [fmt_mb(r[key].mb) for r in results])
    row(
        "**kb import + matcher build: s**",
        [fmt_s(r["kb_import"].s + r["kb_build"].s) for r in results],
    )
    row(
        "`kb import` CLI, import + matcher build in one process: s",
        [fmt_s(r["kb_cli_import"].s) for r in results],
    )
    row(
        "`kb import` CLI: peak RSS MB (target < 300 at 1M)",
        [fmt_mb(r["kb_cli_import"].mb) for r in results],
    )
    row("kb re-import, all unchanged: s", [fmt_s(r["kb_reimport"].s) for r in results])
    row(
        "**speed ratio kb import / sqlite-utils** (target ≥ 0.5)",
        [f"{r['sqlite_utils'].s / r['kb_import'].s:.2f}" for r in results],
    )
    row(
        "speed ratio kb import + build / sqlite-utils",
        [f"{r['sqlite_utils'].s / (r['kb_import'].s + r['kb_build'].s):.2f}" for r in results],
    )
    row(
        "time ratio kb import / parse only",
        [f"{r['kb_import'].s / r['parse'].s:.1f}×" for r in results],
    )

    lines += ["", "## Derived indexes", "", f"| what | {head} |", f"|---|{sep}|"]
    row("database file MB (records, tags, FTS5)", [f"{r['sizes']['db']:,.0f}" for r in results])
    row(
        "of which the FTS5 index MB",
        [f"{r['sizes'].get('fts', float('nan')):,.0f}" for r in results],
    )
    row("matcher cache MB", [f"{r['sizes']['matcher']:,.0f}" for r in results])
    row(
        "of which the Hyperscan databases MB (shards)",
        [f"{r['sizes']['hsdb']:,.1f} ({r['sizes'].get('shards', 1):.0f})" for r in results],
    )
    row("distinct patterns in the matcher", [f"{r['sizes']['patterns']:,.0f}" for r in results])
    row("matcher build time s (inside build)", [fmt_s(r["sizes"]["built_s"]) for r in results])
    row(
        "other caches MB (search vocabulary)",
        [f"{r['sizes']['other_cache']:,.1f}" for r in results],
    )

    lines += [
        "",
        "## Match",
        "",
        f"paste.log is 207 lines (3 planted errors); big.log {big_mb:.1f} MB (200 planted). "
        "*Cold* is a new `kb --db DB match --json LOG` process, the whole CLI; *warm* is "
        "`KnowledgeBase.match` in a process that has loaded the index. The peers get the "
        "distinct patterns RE2 can run (the prepared regex; see the count): *naive* runs every "
        "pattern with Python `re` over every line, timed on a random sample and scaled "
        f"linearly (cut off after {NAIVE_BUDGET_S:.0f} s; pathological patterns make it a lower "
        f"bound); *rg* is `rg -c -f PATTERNS LOG` (Debian ripgrep 13; its regex and DFA size "
        "limits raised, since the default refuses the 70k set; killed after "
        f"{RG_TIMEOUT_S} s or {RG_MAX_BYTES >> 30} GB of address space; patterns that span lines "
        "left out); *Hyperscan raw* is one scan of all those regexes compiled together "
        f"(up to {HS_MAX_PATTERNS:,}), compile excluded, no captures and no verification: the "
        "speed anchor.",
        "",
        f"| what | {head} |",
        f"|---|{sep}|",
    ]
    row(
        "**cold kb match paste.log: s** (target < 0.5; < 1 at 1M)",
        [fmt_s(r["cold_paste"].s) for r in results],
    )
    row("cold kb match paste.log: peak RSS MB", [fmt_mb(r["cold_paste"].mb) for r in results])
    row("warm kb match paste.log: ms", [f"{r['warm']['paste'][0] * 1000:.1f}" for r in results])
    row("**cold kb match big.log: s**", [fmt_s(r["cold_big"].s) for r in results])
    row(
        "**cold kb match big.log: MB/s** (target ≥ 50)",
        [f"{big_mb / r['cold_big'].s:.0f}" for r in results],
    )
    row(
        "cold kb match big.log: peak RSS MB (target < 400)",
        [fmt_mb(r["cold_big"].mb) for r in results],
    )
    row(
        "warm kb match big.log: s (MB/s)",
        [f"{r['warm']['big'][0]:.2f} ({big_mb / r['warm']['big'][0]:.0f})" for r in results],
    )
    row(
        "matches reported: paste.log / big.log",
        [f"{r['found_paste']} / {r['found_big']}" for r in results],
    )
    row("peer patterns (distinct, RE2-runnable)", [f"{r['peer_patterns']:,}" for r in results])

    def naive_cell(r: dict[str, Any], key: str) -> str:
        n = r[key]
        scaled = n["seconds"] / max(1, n["done"]) * n["total_patterns"]
        median_scaled = n["median_each"] * n["total_patterns"]
        bound = "" if n["finished"] else "≥ "
        return (
            f"{bound}{scaled:,.0f} s ({n['done']} of {NAIVE_SAMPLE} sampled; "
            f"median pattern × N: {median_scaled:,.0f} s)"
        )

    row("naive `re` loop paste.log (scaled)", [naive_cell(r, "naive_paste") for r in results])
    row("naive `re` loop big.log (scaled)", [naive_cell(r, "naive_big") for r in results])
    row("rg -f paste.log: s", [rg_s(r["rg_paste"]) for r in results])
    row("rg -f paste.log: peak RSS MB", [fmt_mb(r["rg_paste"].mb) for r in results])
    row("rg -f big.log: s", [rg_s(r["rg_big"]) for r in results])
    row("rg -f big.log: peak RSS MB", [fmt_mb(r["rg_big"].mb) for r in results])

    def hs_cell(r: dict[str, Any], which: int) -> str:
        hs = r["hs"]
        if not hs:
            return "-"
        path = r["hs_paths"][which]
        secs = hs[path][0]
        note = "" if hs["patterns"] == r["peer_patterns"] else f", {hs['patterns']:,} patterns"
        return f"{secs * 1000:.2f} ms (compile {hs['compile']:.0f} s{note})"

    row("Hyperscan raw scan paste.log", [hs_cell(r, 0) for r in results])
    row("Hyperscan raw scan big.log", [hs_cell(r, 1) for r in results])
    row(
        "ratio rg / cold kb, paste.log",
        [ratio(r["rg_paste"].s, r["cold_paste"].s) for r in results],
    )
    row(
        "ratio rg / cold kb, big.log",
        [ratio(r["rg_big"].s, r["cold_big"].s) for r in results],
    )
    row(
        "ratio warm kb / Hyperscan raw, big.log",
        [
            f"{r['warm']['big'][0] / r['hs'][r['hs_paths'][1]][0]:.1f}×" if r["hs"] else "-"
            for r in results
        ],
    )

    lines += ["", "## Search", "", f"| what | {head} |", f"|---|{sep}|"]
    row(
        f"warm, {len(bench_search.QUERIES)} queries × 10: median ms",
        [f"{r['warm']['search'][0] * 1000:.1f}" for r in results],
    )
    row("warm: p95 ms", [f"{r['warm']['search'][1] * 1000:.1f}" for r in results])
    row(
        "cold `kb search` (new process), median of 5 queries: s",
        [fmt_s(r["cold_search"].s) for r in results],
    )
    row("warm process peak RSS MB (index + searches)", [fmt_mb(r["warm_rss"]) for r in results])
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--sizes", default="69652,150000", help="record counts, comma-separated")
    parser.add_argument("--with-1m", action="store_true", help="add 1,000,000 records (~25 min)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--out", type=Path, default=HERE / "out")
    parser.add_argument("--results", type=Path, default=HERE / "RESULTS.md")
    args = parser.parse_args()
    args.rg_gave_up = set()
    sizes = [int(s) for s in args.sizes.split(",") if s]
    if args.with_1m and MILLION not in sizes:
        sizes.append(MILLION)
    started = datetime.now(UTC)
    t0 = time.perf_counter()
    compileall.compile_dir(ROOT / "kb", quiet=1, force=True)

    def log(message: str) -> None:
        print(f"[{time.perf_counter() - t0:7.0f} s] {message}", file=sys.stderr, flush=True)

    results = []
    for count in sizes:
        results.append(bench_size(count, args, log))
        partial = render(results, started, time.perf_counter() - t0)
        args.results.write_text(partial)
    log(f"wrote {args.results}")


if __name__ == "__main__":
    main()
