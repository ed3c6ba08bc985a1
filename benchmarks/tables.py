"""benchmarks/RESULTS.md from the figures benchmarks/run.py measured: one column a size.

Every cell is a figure of a run that happened, or says what happened instead (timed out, out
of memory, failed, not run); a ratio is printed only between two runs that finished, or as a
labelled lower bound.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Final

import scale_corpus
from answers import Check
from bench_search import QUERIES
from harness import Sample, commit, machine
from peers import (
    HS_MAX_PATTERNS,
    NAIVE_BUDGET_S,
    NAIVE_SAMPLE,
    RG_MAX_BYTES,
    RG_TIMEOUT_S,
    NaiveRun,
    Rg,
)
from targets import verdicts


@dataclass
class RunInfo:
    """What the whole run was: its command, start, length and the peers' versions."""

    command: str
    started: datetime
    wall_s: float
    rg: Rg | None
    sqlite_utils: str
    hyperscan: str
    big_log: Path
    search_seed: int  # the sealed search queries' (benchmarks/search_sealed.py)
    search_sealed: int  # how many there are


def fmt_s(x: float) -> str:
    return f"{x:.3f}" if x < 1 else f"{x:.2f}" if x < 100 else f"{x:,.0f}"


NAN: Final = float("nan")


def fmt_mb(x: float) -> str:
    return "-" if x != x else f"{x:,.0f}"


def secs(sample: Sample) -> str:
    """A measurement's median seconds, or what happened instead."""
    return fmt_s(sample.s) if sample.ok else sample.status


def rss(sample: Sample) -> str:
    return fmt_mb(sample.mb) if sample.ok else "-"


def _reworded(r: dict[str, Any]) -> str:
    sample = r.get("cold_reworded")
    if sample is None or not sample.ok:
        return "-" if sample is None else sample.status
    found = f"; {r['reworded_fuzzy']} of {len(sample.seconds)} answered by a near miss"
    return f"{fmt_s(sample.s)} ({fmt_s(max(sample.seconds))}{found})"


def _big_ceiling(big_mb: float) -> Any:
    """What a cold match of big.log could reach with no work a line or a hit: the time of a
    cold match that loads no shard, plus loading them and the fastest scan of the log."""

    def cell(r: dict[str, Any]) -> str:
        quiet, keys = r.get("cold_quiet"), r.get("key_scan")
        if quiet is None or keys is None or not quiet.ok:
            return "-"
        return f"{big_mb / (quiet.s + keys['load_s'] + keys['fastest_scan_s']):.0f}"

    return cell


def _memory(r: dict[str, Any], who: str) -> str:
    """The import's in-memory run of `who` (run.py's measure_import_in_memory), if any."""
    sample = r.get(f"memory_{who}")
    return "-" if sample is None else secs(sample)


def _memory_ratio(r: dict[str, Any]) -> str:
    peer, kb = r.get("memory_sqlite_utils"), r.get("memory_kb")
    if peer is None or kb is None or not (peer.ok and kb.ok):
        return "-"
    return f"{peer.s / kb.s:.2f} ({_rounds(r, 'memory_rounds')})"


def _rounds(r: dict[str, Any], key: str) -> str:
    """Each round's speed ratio (run.py's in_turns), as written beside a figure."""
    return ", ".join(f"{x:.2f}" for x in r.get(key, []))


def cpu(sample: Sample) -> str:
    return "-" if not sample.ok or sample.cpu != sample.cpu else f"{sample.cpu:,.1f}"


def times(x: float) -> str:
    return f"{x:,.0f}×" if x >= 10 else f"{x:.1f}×"


def ratio(slow: Sample, fast: Sample) -> str:
    """slow / fast, only when both ran to the end."""
    if not slow.ok:
        return f"none: {slow.status}"
    return times(slow.s / fast.s)


def naive_cell(n: NaiveRun) -> str:
    if n.error is not None:
        return f"failed ({n.error})"
    refused = f"; {n.refused} refused by the engine" if n.refused else ""
    if n.finished:
        return (
            f"{fmt_s(n.scaled)} s est. ({n.ran} sampled patterns took {fmt_s(n.seconds)} s, "
            f"scaled to {n.total:,}; median pattern × N: {fmt_s(n.median_scaled)} s{refused})"
        )
    return (
        f"≥ {fmt_s(n.scaled)} s est. (cut off at {NAIVE_BUDGET_S:.0f} s after {n.done} of "
        f"{n.ran} sampled patterns{refused})"
    )


def naive_ratio(n: NaiveRun, kb: Sample) -> str:
    """The naive loop against kb: an estimate when the sample finished; when it was cut off,
    only the real lower bound (the sampled patterns' own measured time is part of the loop)."""
    if n.error is not None:
        return "none: the naive run failed"
    if n.finished:
        return f"{times(n.scaled / kb.s)} (estimate)"
    return f"≥ {times(n.seconds / kb.s)} (lower bound: the sample's own {fmt_s(n.seconds)} s)"


class Table:
    def __init__(self, lines: list[str], results: list[dict[str, Any]]) -> None:
        self.lines, self.results = lines, results
        head = " | ".join(f"{r['count']:,} records" for r in results)
        lines += [f"| what | {head} |", "|---|" + "|".join("---:" for _ in results) + "|"]

    def row(self, label: str, cell: Any) -> None:
        self.lines.append(f"| {label} | " + " | ".join(cell(r) for r in self.results) + " |")


def render(results: list[dict[str, Any]], info: RunInfo, failures: list[str]) -> str:
    big_mb = info.big_log.stat().st_size / 1e6
    rg = info.rg
    rg_text = f"`{rg.version}` ({rg.where}: `{rg.path}`)" if rg else "not installed"
    sizes = ", ".join(f"{r['count']:,}" for r in results)
    lines = [
        f"# kb benchmarks: import, match and search at {sizes} records",
        "",
        f"Written by `{info.command}` (the whole run took {info.wall_s / 60:.0f} min).",
        "",
    ]
    if failures:
        lines += [
            "**RUN FAILED: kb's answers differ from the answer keys.** " + "; ".join(failures),
            "",
        ]
    else:
        lines += [
            "**Correctness: every size found every planted error of paste.log and big.log at "
            "its line, and nothing else** (see *Correctness*).",
            "",
        ]
    lines += [
        f"- **Date:** {info.started:%Y-%m-%d %H:%M} UTC; **commit:** `{commit()}`",
        f"- **Machine:** {machine()}",
        f"- **Peers:** {info.sqlite_utils}; ripgrep {rg_text}; hyperscan {info.hyperscan} "
        "(Python bindings); Python's `re`.",
        "- **Corpora:** benchmarks/scale_corpus.py, seed "
        f"{scale_corpus.DEFAULT_SEED}: the 69,652 real records, then variants (new id, one word "
        "of the message replaced by a made-up word of the same length) until the count; flat "
        "JSONL, gzipped"
        + (
            " (below 69,652: the records planted in the logs and those sharing their patterns "
            "first, then the others in order). "
            if any(r["count"] < 69_652 for r in results)
            else ". "
        )
        + "; ".join(f"{r['count']:,}: {r['gz_mb']:.0f} MB gz" for r in results),
        "- **Runs:** medians of "
        + ", ".join(f"{r['runs']}" for r in results)
        + " new processes per size (cold match of paste.log: at least 5; of big.log: at least "
        "7, the slowest shown beside the median; `kb import` and sqlite-utils: at least 5 "
        "rounds where a size has more than one run); wall seconds; peak "
        "RSS from `/usr/bin/time -f %M`. kb's bytecode is compiled before the runs, as `pip "
        "install` does (this machine sets PYTHONDONTWRITEBYTECODE, so an editable checkout "
        "would otherwise compile kb's sources in every new process).",
        "",
        "## Correctness",
        "",
        "The (id, line) pairs of the cold `kb match --json` of each log against its answer key "
        "(`logs/*.expected.json`), by the full-corpus test's rules: each planted error is the "
        "best record of a match at its line, or ties with it on an identical messagePattern; "
        "a match off the planted lines is an extra. The first match after another process's "
        "import (index built in the process) must give the same pairs.",
        "",
    ]
    t = Table(lines, results)

    def check_cell(i: int) -> Any:
        def cell(r: dict[str, Any]) -> str:
            c: Check = r["checks"][i]
            return c.summary() if c.passed else f"**{c.summary()}**"

        return cell

    t.row("paste.log", check_cell(0))
    t.row("big.log", check_cell(1))
    t.row(
        "first match after an import elsewhere: same pairs",
        lambda r: "yes" if r["first_same"] else "**no**",
    )
    t.row("verdict", lambda r: "passed" if r["passed"] else "**FAILED**")

    lines += [
        "",
        "## Targets",
        "",
        "Each target judged here on this run's figures (benchmarks/targets.py): *not "
        "measured* when the run had no such size or the measurement did not finish. The "
        "import, measured in rounds against sqlite-utils in turns, is *met* only when kb was at "
        "least as fast in every round, and a *tie* (not met) when its rounds fall on both sides "
        "of 1: this machine's speed moves enough from one minute to the next to make a tie look "
        "like either. *Set by* says whose target it is: issue 15's text, issue 5's before it, "
        "or kb's own where it holds itself to more than the issues ask.",
        "",
        "| target | set by | at | this run | verdict |",
        "|---|---|---|---|---|",
    ]
    for v in verdicts(results, big_mb):
        lines.append(
            f"| {v.target.text} | {v.target.origin} | {v.where} | {v.measured} | {v.shown()} |"
        )

    lines += [
        "",
        "## Import",
        "",
        "The headline is what a user waits for: the `kb import` command, which validates every "
        "field, upserts by id with a content hash, keeps tags and the FTS5 index in one "
        "transaction, then builds the matcher index, on a new database with no cache. Its peer "
        "*sqlite-utils* is `gzip -dc FILE | sqlite-utils insert DB records - --nl` (no "
        "validation, no upsert, no full-text or matcher index; gzip runs in its own process). "
        "*Import alone* is the library call without the matcher build; *parse only* is gzip + "
        "`json.loads` per line. sqlite-utils and `kb import` take turns, the one that goes first "
        "swapped each round, and the target is met only when kb was at least as fast in every "
        "round. *In memory* runs both again with their databases (and kb's matcher cache) in a "
        "tmpfs, the disk taken out: sqlite-utils commits every batch of rows and kb once, so a "
        "slow disk slows the peer far more than kb; *CPU s* is user + system time of every "
        "process of the command (kb builds the matcher index in a second process beside the "
        "import).",
        "",
    ]
    t = Table(lines, results)

    def per_s(key: str) -> Any:
        return lambda r: f"{r['count'] / r[key].s:,.0f}" if r[key].ok else "-"

    t.row("**`kb import` (import + matcher build): s**", lambda r: secs(r["kb_cli_import"]))
    t.row("`kb import`: records/s", per_s("kb_cli_import"))
    t.row("`kb import`: peak RSS MB (target < 300 at 1M)", lambda r: rss(r["kb_cli_import"]))
    t.row("`kb import`: CPU s (both its processes)", lambda r: cpu(r["kb_cli_import"]))
    t.row("sqlite-utils insert --nl: s", lambda r: secs(r["sqlite_utils"]))
    t.row("sqlite-utils insert --nl: records/s", per_s("sqlite_utils"))
    t.row("sqlite-utils insert --nl: peak RSS MB", lambda r: rss(r["sqlite_utils"]))
    t.row(
        "sqlite-utils insert --nl: CPU s (gzip and sqlite-utils)", lambda r: cpu(r["sqlite_utils"])
    )
    t.row(
        "**speed ratio `kb import` / sqlite-utils** (target ≥ 1)",
        lambda r: f"{r['sqlite_utils'].s / r['kb_cli_import'].s:.2f}",
    )
    t.row(
        "each round's speed ratio, in turns",
        lambda r: _rounds(r, "import_rounds") or "-",
    )
    t.row("in memory (both databases in a tmpfs): `kb import` s", lambda r: _memory(r, "kb"))
    t.row("in memory: sqlite-utils insert --nl s", lambda r: _memory(r, "sqlite_utils"))
    t.row("in memory: speed ratio (each round, in turns)", _memory_ratio)
    t.row("kb import alone (no matcher build): s", lambda r: secs(r["kb_import"]))
    t.row("kb import alone: records/s", per_s("kb_import"))
    t.row("kb import alone: peak RSS MB", lambda r: rss(r["kb_import"]))
    t.row(
        "speed ratio kb import alone / sqlite-utils",
        lambda r: f"{r['sqlite_utils'].s / r['kb_import'].s:.2f}",
    )
    t.row("parse only: s", lambda r: secs(r["parse"]))
    t.row(
        "time ratio kb import alone / parse only",
        lambda r: f"{r['kb_import'].s / r['parse'].s:.1f}×",
    )
    t.row("kb re-import, all unchanged: s", lambda r: secs(r["kb_reimport"]))

    lines += [
        "",
        "## The matcher index and the other derived data",
        "",
        "kb builds its matcher index once per knowledge-base revision: `kb import` does it "
        "right after the records are stored, and a `kb match` that finds no index for the "
        "current revision (another process or machine imported) builds it first. *Build* is "
        "`KnowledgeBase.build_matcher()` in a new process on the imported database.",
        "",
    ]
    t = Table(lines, results)
    t.row("**matcher index build: s**", lambda r: secs(r["kb_build"]))
    t.row("matcher index build: peak RSS MB", lambda r: rss(r["kb_build"]))
    t.row("of which inside the build call: s", lambda r: fmt_s(r["sizes"]["built_s"]))
    t.row("distinct patterns in the index", lambda r: f"{r['sizes']['patterns']:,.0f}")
    t.row("matcher cache MB", lambda r: f"{r['sizes']['matcher']:,.0f}")
    t.row(
        "of which the Hyperscan databases MB (shards)",
        lambda r: f"{r['sizes']['hsdb']:,.1f} ({r['sizes'].get('shards', 1):.0f})",
    )
    t.row("database file MB (records, tags, FTS5)", lambda r: f"{r['sizes']['db']:,.0f}")
    t.row(
        "of which the FTS5 index MB",
        lambda r: f"{r['sizes'].get('fts', float('nan')):,.0f}",
    )
    t.row("other caches MB (search vocabulary)", lambda r: f"{r['sizes']['other_cache']:,.1f}")

    lines += [
        "",
        "## Match",
        "",
        f"paste.log is 207 lines (3 planted errors); big.log {big_mb:.1f} MB (200 planted). "
        "*Cold* is a new `kb --db DB match --json LOG` process, the whole CLI, with the index "
        "built at import; *first after an import elsewhere* is the same command with no local "
        "matcher cache (removed after the import, as on a machine that did not import), so it "
        "builds the index first; *warm* is `KnowledgeBase.match` in a process that has loaded "
        "the index. The command reads big.log (16 MB or more) in two parts at once, the second "
        "in a forked child (kb.matcher.split; its peak RSS is the larger process's); the warm "
        "figure is one pass, as a library call makes it.",
        "",
    ]
    t = Table(lines, results)
    t.row("interpreter start alone (`python -c pass`): s", lambda r: secs(r["python_start"]))
    t.row(
        "**cold kb match paste.log: s** (target < 0.5; < 1 at 1M)",
        lambda r: secs(r["cold_paste"]),
    )
    t.row("cold kb match paste.log: peak RSS MB", lambda r: rss(r["cold_paste"]))
    t.row(
        "cold kb match of one reworded message (each message-only paste of the drift "
        "development set, a near miss): median s (slowest)",
        _reworded,
    )
    t.row("warm kb match paste.log: ms", lambda r: f"{r['warm']['paste'][0] * 1000:.1f}")
    t.row(
        "**cold kb match big.log: s** (slowest run)",
        lambda r: (
            f"{secs(r['cold_big'])} ({fmt_s(max(r['cold_big'].seconds))})"
            if r["cold_big"].ok
            else secs(r["cold_big"])
        ),
    )
    t.row(
        "**cold kb match big.log: MB/s** (target ≥ 100 at 150k)",
        lambda r: f"{big_mb / r['cold_big'].s:.0f}",
    )
    t.row("cold kb match big.log: peak RSS MB (target < 400)", lambda r: rss(r["cold_big"]))
    t.row(
        "cold kb match of a one-line log with no error (start-up, opening): s",
        lambda r: secs(r["cold_quiet"]) if "cold_quiet" in r else "-",
    )
    t.row(
        "kb's key shards alone: loading, then one scan of big.log (first; fastest of 3): s",
        lambda r: (
            f"{k['load_s']:.3f}, then {k['scan_s']:.3f}; {k['fastest_scan_s']:.3f}"
            if (k := r.get("key_scan"))
            else "-"
        ),
    )
    t.row("ceiling of a cold big.log match here (the two rows above): MB/s", _big_ceiling(big_mb))
    t.row(
        "warm kb match big.log: s (MB/s)",
        lambda r: f"{r['warm']['big'][0]:.2f} ({big_mb / r['warm']['big'][0]:.0f})",
    )
    t.row(
        "**first kb match paste.log after an import elsewhere (builds the index): s**",
        lambda r: secs(r["first_paste"]),
    )
    t.row(
        "first kb match paste.log after an import elsewhere: peak RSS MB",
        lambda r: rss(r["first_paste"]),
    )
    t.row("first kb match big.log after an import elsewhere: s", lambda r: secs(r["first_big"]))
    t.row(
        "first kb match big.log after an import elsewhere: peak RSS MB",
        lambda r: rss(r["first_big"]),
    )

    _peers(lines, results, info, big_mb)

    lines += [
        "",
        "## Search",
        "",
        f"*Sealed set*: {info.search_sealed} queries drawn by `benchmarks/search_sealed.py`'s "
        "rule (a run of a message's words, the class with two of them, a quoted phrase, a "
        "misspelt identifier, a path with a word, an id) from a seeded sample of the real "
        f"records (seed {info.search_seed}: the run's date unless `--search-seed`), so no "
        "change to kb was made for them: the search targets are judged on it. *Development "
        "queries*: `bench_search.QUERIES`, those kb's search was tuned on. Each query is "
        "searched once to warm up, then 10 times in one process (`KnowledgeBase.search`); "
        "the warm-up is shown too (*first search*): what a query of words the process has not "
        "met yet costs, their record counts not yet kept for the knowledge base's revision "
        "(the development queries run first, then the sealed set, in the process that matched "
        "the logs above).",
        "",
    ]
    t = Table(lines, results)
    t.row(
        f"**warm, sealed set (seed {info.search_seed}, {info.search_sealed} queries) × 10: "
        "median ms**",
        lambda r: _ms(r, "search_sealed", 0),
    )
    t.row("**warm, sealed set: p95 ms**", lambda r: _ms(r, "search_sealed", 1))
    first = "search_sealed_first"
    t.row("first search of each sealed query: median ms", lambda r: _ms(r, first, 0))
    t.row("first search of each sealed query: p95 ms", lambda r: _ms(r, first, 1))
    t.row(
        f"warm, development queries ({len(QUERIES)}) × 10: median ms",
        lambda r: _ms(r, "search", 0),
    )
    t.row("warm, development queries: p95 ms", lambda r: _ms(r, "search", 1))
    t.row("first search of each development query: median / p95 ms", _first_development)
    t.row(
        "cold `kb search` (new process), median of 5 queries: s", lambda r: secs(r["cold_search"])
    )
    t.row("warm process peak RSS MB (index + searches)", lambda r: fmt_mb(r["warm_rss"]))
    t.row(
        "of which at its end: its own memory (RssAnon) / the database file's pages it maps, "
        "the page cache's (RssFile): MB",
        _rss_kinds,
    )
    return "\n".join(lines) + "\n"


def _rss_kinds(result: dict[str, Any]) -> str:
    kinds = result["warm"].get("rss_kinds")
    if not kinds:
        return "-"
    return f"{fmt_mb(kinds.get('RssAnon', NAN))} / {fmt_mb(kinds.get('RssFile', NAN))}"


def _first_development(result: dict[str, Any]) -> str:
    return f"{_ms(result, 'search_first', 0)} / {_ms(result, 'search_first', 1)}"


def _ms(result: dict[str, Any], which: str, index: int) -> str:
    figures = result["warm"].get(which)
    return f"{figures[index] * 1000:.1f}" if figures else "-"


def _peers(lines: list[str], results: list[dict[str, Any]], info: RunInfo, big_mb: float) -> None:
    rg_name = f"`{info.rg.version}`" if info.rg else "not installed"
    lines += [
        "",
        "## Match against its peers",
        "",
        "Every peer gets the patterns kb's matcher runs, *prepared* as kb prepares them "
        "(JavaScript syntax translated, the quadratic leading `(.+?)` anchored as `^(.*?)`): "
        "the distinct regexes RE2 can run (see the count). *rg* is "
        f"`rg -c -f PATTERNS LOG` ({rg_name}; its regex and DFA size limits raised, since the "
        f"default refuses the 70k set; killed after {RG_TIMEOUT_S} s or "
        f"{RG_MAX_BYTES >> 30} GB of address space, and not tried again at a larger size once "
        "it did not finish; patterns that span lines left out). rg compiles every pattern on "
        "each run where kb builds its index once per knowledge-base revision, so rg stands "
        "beside both kb's cold match (index built at import) and its first match after an "
        "import elsewhere (index built in the process). *Naive* runs every pattern with "
        "Python `re` over every line, compile excluded, timed on the same random sample of "
        f"{NAIVE_SAMPLE} patterns (prepared; their raw JavaScript `messagePattern`s, which "
        "`re` mostly reads; and the prepared ones again with google-re2, one pattern at a "
        "time) and scaled linearly; cut off after "
        f"{NAIVE_BUDGET_S:.0f} s of looping, when it gives a lower bound (≥). *Hyperscan "
        "raw* is one scan of the prepared regexes compiled "
        f"together (up to {HS_MAX_PATTERNS:,}), compile excluded, no captures and no "
        "verification: the speed anchor (its compile time, against the index build's, is why "
        "kb compiles only literal keys into Hyperscan and verifies candidates in RE2). A ratio "
        "is printed only between runs that finished.",
        "",
    ]
    t = Table(lines, results)
    t.row("peer patterns (distinct, prepared, RE2-runnable)", lambda r: f"{r['peer_patterns']:,}")
    t.row("of which rg's (no line breaks)", lambda r: f"{r['rg_patterns']:,}")
    for log, key in (("paste.log", "paste"), ("big.log", "big")):
        t.row(f"kb cold match {log} (index cached): s", lambda r, k=key: secs(r[f"cold_{k}"]))
        t.row(
            f"kb index build + match {log} (first match after an import elsewhere): s",
            lambda r, k=key: secs(r[f"first_{k}"]),
        )
        t.row(f"**rg -f {log}: s**", lambda r, k=key: secs(r[f"rg_{k}"]))
        t.row(f"rg -f {log}: peak RSS MB", lambda r, k=key: rss(r[f"rg_{k}"]))
        t.row(
            f"ratio rg / kb cold, {log}",
            lambda r, k=key: ratio(r[f"rg_{k}"], r[f"cold_{k}"]),
        )
        t.row(
            f"ratio rg / kb index build + match, {log}",
            lambda r, k=key: ratio(r[f"rg_{k}"], r[f"first_{k}"]),
        )
    for log, key in (("paste.log", "paste"), ("big.log", "big")):
        t.row(
            f"**naive `re`, prepared patterns, {log}** (scaled)",
            lambda r, k=key: naive_cell(r["naive"][f"prepared_{k}"]),
        )
        t.row(
            f"naive `re`, raw JavaScript patterns, {log} (scaled)",
            lambda r, k=key: naive_cell(r["naive"][f"raw_{k}"]),
        )
        t.row(
            f"naive google-re2, prepared patterns, {log} (scaled)",
            lambda r, k=key: naive_cell(r["naive"][f"re2_{k}"]),
        )
        t.row(
            f"ratio naive `re` (prepared) / kb cold, {log}",
            lambda r, k=key: naive_ratio(r["naive"][f"prepared_{k}"], r[f"cold_{k}"]),
        )

    def hs_cell(r: dict[str, Any], which: int) -> str:
        hs = r["hs"]
        if not hs:
            return f"none: {r['hs_status']}"
        secs_ = hs[r["hs_paths"][which]][0]
        note = "" if hs["patterns"] == r["peer_patterns"] else f", {hs['patterns']:,} patterns"
        return f"{secs_ * 1000:.2f} ms (compile {hs['compile']:.0f} s{note})"

    t.row("Hyperscan raw scan paste.log", lambda r: hs_cell(r, 0))
    t.row("Hyperscan raw scan big.log", lambda r: hs_cell(r, 1))
    t.row(
        "ratio warm kb / Hyperscan raw, big.log",
        lambda r: (
            f"{r['warm']['big'][0] / r['hs'][r['hs_paths'][1]][0]:.1f}×"
            if r["hs"]
            else "none: Hyperscan did not run"
        ),
    )
