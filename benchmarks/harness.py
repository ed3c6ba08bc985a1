"""How benchmarks/run.py measures: one new process timed under /usr/bin/time, medians of
several, what happened when one did not finish, and the facts of the machine and the run.

A run that did not finish (timed out, out of memory, crashed, or not started because it had
already failed at a smaller size) keeps what happened in `Sample.status`: the tables print that
instead of a figure, and never a ratio against it.
"""

from __future__ import annotations

import os
import platform
import resource
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
PY = sys.executable
KB = [PY, "-m", "kb"]
OK = "ok"


@dataclass
class Sample:
    """The runs of one measurement: wall seconds, peak RSS and CPU seconds of each, the last
    one's stdout, and `status`: OK, or what stopped a run (then the figures hold nothing to
    report)."""

    seconds: list[float] = field(default_factory=list)
    rss_mb: list[float] = field(default_factory=list)
    stdout: str = ""
    status: str = OK
    cpu_s: list[float] = field(default_factory=list)  # user + system, its processes together

    @property
    def ok(self) -> bool:
        return self.status == OK and bool(self.seconds)

    @property
    def s(self) -> float:
        return statistics.median(self.seconds) if self.ok else float("nan")

    @property
    def mb(self) -> float:
        return statistics.median(self.rss_mb) if self.ok and self.rss_mb else float("nan")

    @property
    def cpu(self) -> float:
        return statistics.median(self.cpu_s) if self.ok and self.cpu_s else float("nan")

    def add(self, other: Sample) -> None:
        """Fold one more run in; a run that failed makes the whole measurement failed."""
        if not other.ok:
            self.status = other.status
            self.stdout = other.stdout
            return
        self.seconds += other.seconds
        self.rss_mb += other.rss_mb
        self.cpu_s += other.cpu_s
        self.stdout = other.stdout


def not_run(why: str) -> Sample:
    return Sample(status=f"not run: {why}")


def _what_stopped(returncode: int, stderr: str, limit_as: int | None) -> str:
    """A failed child's end in words: out of memory and signals named, else its last words."""
    last = (stderr.strip().splitlines() or [""])[-1][:200]
    if "memory allocation" in stderr or "MemoryError" in stderr or "std::bad_alloc" in stderr:
        cap = f" under the {limit_as / (1 << 30):g} GB address-space cap" if limit_as else ""
        return f"out of memory{cap}"
    # /usr/bin/time exits with 128 + N when its child was killed by signal N.
    code = returncode - 128 if returncode > 128 else -returncode if returncode < 0 else 0
    if code > 0:
        try:
            name = signal.Signals(code).name
        except ValueError:
            name = f"signal {code}"
        return f"killed by {name}" + (f" ({last})" if last else "")
    return f"failed with exit status {returncode}" + (f" ({last})" if last else "")


def timed(
    argv: list[str],
    *,
    shell: bool = False,
    timeout: float | None = None,
    limit_as: int | None = None,
    may_fail: bool = False,
    ok_codes: tuple[int, ...] = (0, 1),
) -> Sample:
    """One new process under /usr/bin/time: wall seconds, peak RSS (MB; the largest of the
    child's processes, never this process's), CPU seconds (user + system of the child and every
    process it waited for), stdout. A run that times out or fails is returned with its status when
    `may_fail`; otherwise a failure stops the whole benchmark (kb itself must not fail)."""

    def limit() -> None:
        if limit_as is not None:
            resource.setrlimit(resource.RLIMIT_AS, (limit_as, limit_as))

    with tempfile.NamedTemporaryFile("r", suffix=".rss") as rss:
        cmd = ["/usr/bin/time", "-f", "%U %S %M", "-o", rss.name]
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
            if not may_fail:
                sys.exit(f"{argv} timed out after {timeout} s")
            return Sample(status=f"timed out after {timeout:g} s (killed)")
        elapsed = time.perf_counter() - started
        # A Python child that crashes exits 1 too, which kb uses for "nothing found".
        crashed = "Traceback (most recent call last)" in done.stderr
        if done.returncode not in ok_codes or crashed:
            what = _what_stopped(done.returncode, done.stderr, limit_as)
            if not may_fail:
                sys.exit(f"{argv} {what}: {done.stderr[-2000:]}")
            return Sample(status=what)
        # The last line is "%U %S %M"; /usr/bin/time writes a "Command exited with..." line
        # before it.
        words = (Path(rss.name).read_text().strip().splitlines() or [""])[-1].split()
        try:
            user, system, peak_kb = float(words[0]), float(words[1]), float(words[2])
        except (IndexError, ValueError):
            user = system = peak_kb = float("nan")
        return Sample([elapsed], [peak_kb / 1024], done.stdout, cpu_s=[user + system])


def repeat(
    runs: int, make: Callable[[], Sample], before: Callable[[], None] | None = None
) -> Sample:
    """`runs` runs of `make` (each after `before`), stopping at the first that fails."""
    out = Sample()
    for _ in range(runs):
        if before is not None:
            before()
        out.add(make())
        if not out.ok:
            break
    return out


def settle() -> None:
    """The writes of what ran before, flushed before the next timing starts: a 1M import
    leaves up to gigabytes for the kernel to write back, which would otherwise land in the
    first timings after it (the run of 2026-12-05 read cold big.log at 1M 0.445 s right
    after the import, 0.38 by hand on the same database)."""
    os.sync()


def rm_db(path: Path) -> None:
    for suffix in ("", "-wal", "-shm", "-journal"):
        Path(str(path) + suffix).unlink(missing_ok=True)


def cache_dir(db: Path) -> Path:
    """Where kb keeps the matcher cache of this database (the user cache directory)."""
    from kb.config import cache_dir_for, resolve_database_url

    return cache_dir_for(resolve_database_url(str(db)))


def machine() -> str:
    cpu = "unknown CPU"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    with open("/proc/meminfo") as f:
        mem = f"{int(f.readline().split()[1]) / 1024 / 1024:.0f} GB RAM"
    with open("/proc/loadavg") as f:
        load = f.read().split()[:3]
    return (
        f"{os.cpu_count()} cores ({cpu}), {mem}, Linux {platform.release()}, "
        f"Python {platform.python_version()}, SQLite {sqlite3.sqlite_version}; {ranker()}; "
        f"load average at start {' '.join(load)}"
    )


def ranker() -> str:
    """Which kb_bm25 the measured checkout's searches rank with (kb/ranking.py), and apsw's
    SQLite, which runs it."""
    built = sorted((ROOT / "kb").glob("_kb_bm25.*[!c]"))  # .so, .dylib, .dll: not the source
    try:
        import apsw

        engine = f"apsw {apsw.apsw_version()} with SQLite {apsw.sqlite_lib_version()}"
    except ImportError:
        return "no apsw: FTS5's bm25 ranks"
    if built:
        return f"kb_bm25 in C ({built[0].relative_to(ROOT)}) through {engine}"
    return f"kb_bm25 in Python (the C one not built) through {engine}"


def commit() -> str:
    def git(*args: str) -> str:
        return subprocess.run(
            ["git", *args], capture_output=True, text=True, cwd=ROOT, check=False
        ).stdout.strip()

    # Tracked files only: RESULTS.md itself is untracked while the run writes it.
    dirty = git("status", "--porcelain", "--untracked-files=no", "--", "kb", "migrations")
    return git("rev-parse", "--short", "HEAD") + (" (+ uncommitted changes)" if dirty else "")


def db_sizes(db: Path) -> dict[str, float]:
    """The database file, its FTS5 share, and the matcher cache with its Hyperscan blob."""
    con = sqlite3.connect(db)
    out = {"db": db.stat().st_size / 1e6}
    try:
        rows = con.execute(
            "SELECT name LIKE 'records_fts%', SUM(pgsize) FROM dbstat GROUP BY 1"
        ).fetchall()
        out.update({("fts" if k else "rest"): v / 1e6 for k, v in rows})
    except sqlite3.Error:
        pass  # a SQLite built without the dbstat table: the total alone
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
