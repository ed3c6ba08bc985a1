"""A big log file's prefilter scan, done by a helper process forked as `kb match` starts.

A cold `kb match` of a big file spends its first 90-100 ms (big.log at 150,000 records) on one
core: the interpreter, click, the matcher's modules, the plan of the cut and the shards' load.
The other core idles. Then the two parts (kb.matcher.split) each scan their half with
Hyperscan in a thread beside their Python work, on the cores both parts need (31 ms of
scanning for big.log in all, and the hits' callbacks). Forked before the matcher's modules
are imported, the helper maps the file, reads and loads the shards and scans the whole file
on the idle core; each part then takes a block's hits from its result by the block's offset
in the file (kb.logtext.LineBlock.offset) instead of scanning the block.

A whole file's hits are its blocks' own: the keys are literals that never hold a newline
(kb.patterns) and blocks are cut at line ends, so no key found in the file crosses a block's
edge, and a block's hits are those that end inside it. pytest's raise-site pattern holds no
newline either.

The result is used only for the file the match reads (device, inode, size and modification
time unchanged since the helper mapped it) and the cache the match loaded (device and inode,
format, revision); anything else (a helper that failed or declined, a file changed, a cache
rebuilt meanwhile) leaves the parts to scan as before, with the same answers.

Shards too big for the helper to load and scan whole by then (a million records: 7 shards,
75 MB) are scanned in part: the helper scans the whole file with the first of them, as many as
PARTIAL_SHARD_BYTES holds, and the match loads only the others, with which the parts scan their
blocks; a block's hits are the helper's and the parts' together, in the order one scan of every
shard gives them (kb.matcher.prefilter.Prefilter.taken).
"""

from __future__ import annotations

import array
import bisect
import contextlib
import marshal
import os
import select
import signal
from typing import TYPE_CHECKING, Any, Final, cast

from kb.matcher.bigfile import cuttable

if TYPE_CHECKING:
    from pathlib import Path

# pytest prints the raise site as "path.py:466: InvalidVersion": one regex pass over a block's
# bytes finds them (".py:" alone is on every line of some logs: "[loggers.py:123]").
PYTEST_LOC: Final = rb"\.py:\d+: "
# The helper declines caches with more shard bytes than this, and logs longer than this: it
# must be done about when the match forks its parts (at 150,000 records, 12.2 MB of shards,
# big.log's 21.9 MB was scanned by then), or the match waits for it. At a million records (75 MB
# of shards) reading and loading them alone takes longer than that.
MAX_SHARD_BYTES: Final = 32 << 20
MAX_LOG_BYTES: Final = 64 << 20
# Over MAX_SHARD_BYTES, the helper scans the whole file with the first shards that fit in this
# many bytes (at least one, or it declines), for a log of up to PARTIAL_LOG_BYTES (a longer one,
# which takes longer to scan, with fewer: the bytes shrink in proportion), and the parts scan
# their blocks with the others. At a million records (7 shards, of 8.6 to 16.8 MB: the first
# hold the shortest keys), a cold match of big.log (21.9 MB) against the helper declining: with
# the first shard 0.394 s against 0.425 (20 pairs), two (17.5 MB) 0.338 against 0.360 (30
# pairs, ratio 0.927), four (36.1 MB) 0.332 against 0.361 (30 pairs, 0.926), five (46.5 MB)
# 0.343 against 0.355 (20 pairs, 0.970: the match waits for the helper); the match's peak
# memory 180, 154, 143 and 133 MB against 197-207 (2026-12-05).
PARTIAL_SHARD_BYTES: Final = 40 << 20
PARTIAL_LOG_BYTES: Final = 24 << 20
# Bytes that make the blocks holding them read otherwise than as they are (kb.logtext: colours
# stripped, line ends of CR LF or CR): their hits are not the file's, so the parts would scan
# them and load the shards themselves, after the fork. A file that holds either is declined,
# and the match reads the shards ahead as it does without a helper (big.log in CR LF at
# 150,000 records: 0.277 s against 0.261 without a helper when it was taken, 0.261 against
# 0.256 declined). A block rewritten otherwise (JSON records unpacked, tracebacks dedented,
# wrapped rows joined) is scanned by its part.
REWRITTEN: Final = (b"\x1b", b"\r")
# How long a match waits for each answer of the helper before it scans the blocks itself (a
# helper that lost its core to other work, the file's pages read from a slow disk): its whole
# work takes 60-70 ms at 150,000 records, and a match of such a file a quarter of a second.
WAIT_S: Final = 1.0
_SCANNING: Final = b"+"
_PARTIAL: Final = b"*"  # then one byte: how many of the first shards the helper scans
_DECLINED: Final = b"-"


class Prescanned:
    """The helper's hits: each key's end offset in the file and its id, in that order, and the
    ends of pytest's raise-site locations. `leading`: the hits are those of the first
    `leading` shards only, the others' still to be found (None: of every shard)."""

    def __init__(
        self,
        ends: array.array[int],
        keys: array.array[int],
        pytest: array.array[int],
        leading: int | None = None,
    ):
        self._ends, self._keys, self._pytest = ends, keys, pytest
        self.leading = leading

    def hits(self, offset: int, length: int) -> list[tuple[int, int]]:
        """(end offset in the block, key id) of the block at `offset` of `length` bytes, in
        the order of their ends (then ids)."""
        lo = bisect.bisect_right(self._ends, offset)
        hi = bisect.bisect_right(self._ends, offset + length, lo)
        return [(self._ends[i] - offset, self._keys[i]) for i in range(lo, hi)]

    def pytest_ends(self, offset: int, length: int) -> list[int]:
        """The end offsets in the block of pytest's raise-site locations."""
        lo = bisect.bisect_right(self._pytest, offset)
        hi = bisect.bisect_right(self._pytest, offset + length, lo)
        return [end - offset for end in self._pytest[lo:hi]]


class Helper:
    """A helper process scanning a log file: `accepted()` says whether it scans (it first
    writes one byte, _SCANNING or _DECLINED, once it has read the cache's size), `result()`
    waits for its hits."""

    def __init__(self, pid: int, pipe: int, log: os.stat_result) -> None:
        self._pid: int | None = pid
        self._pipe = pipe
        self._log = _identity(log)
        self._accepted: bool | None = None
        self._leading: int | None = None

    def accepted(self) -> bool:
        """Whether the helper scans the file (waits for its first byte, at most WAIT_S)."""
        if self._accepted is None:
            first = self._read(1) if self._pid is not None else b""
            if first == _PARTIAL:
                count = self._read(1)
                self._leading = count[0] if count else None
            self._accepted = first == _SCANNING or bool(self._leading)
        return self._accepted

    @property
    def leading(self) -> int | None:
        """How many of the first shards the helper scans with, when not all (after accepted();
        None: all of them, or it declined)."""
        return self._leading

    def result(
        self, log_fd: int, revision: str, cache: tuple[int, int] | None
    ) -> Prescanned | None:
        """The helper's hits, when it scanned the file open on `log_fd` with the cache of
        `revision` whose file is `cache` (device, inode); else None. Waits for the helper (at
        most WAIT_S for each read), then stops it, or reaps it once it is gone (close)."""
        payload = b""
        try:
            payload = self._read() if self.accepted() else b""
        finally:
            self.close(finished=bool(payload))
        if not payload:
            return None
        from kb.matcher.cachefile import FORMAT_VERSION

        try:
            format_, cached, cache_file, ends, keys, pytest, leading = marshal.loads(payload)
            if (
                _identity(os.fstat(log_fd)) != self._log
                or (format_, cached) != (str(FORMAT_VERSION), revision)
                or cache is None
                or tuple(cache_file) != tuple(cache)
                or leading != self._leading
            ):
                return None
            return Prescanned(_ints(ends), _ints(keys), _ints(pytest), leading)
        except (ValueError, TypeError, EOFError, OSError):  # cut short: scanned by the parts
            return None

    def _read(self, size: int = -1) -> bytes:
        """`size` bytes of the pipe, or all up to its end (-1); b"" when the helper is silent
        for WAIT_S (or gone before writing them)."""
        chunks: list[bytes] = []
        got = 0
        while size < 0 or got < size:
            ready, _, _ = select.select([self._pipe], [], [], WAIT_S)
            if not ready:
                return b""
            chunk = os.read(self._pipe, 1 << 20 if size < 0 else size - got)
            if not chunk:
                break
            chunks.append(chunk)
            got += len(chunk)
        data = b"".join(chunks)
        return data if size < 0 or len(data) == size else b""

    def close(self, finished: bool = False) -> None:
        """Stop the helper if it still runs, and reap it (its result is no longer wanted); one
        that `finished` (its pipe ended after all of its result) is left to exit, and reaped
        when it is gone (kb.matcher.children: 2-3 ms of its exit not waited for)."""
        if self._pid is None:
            return
        pid, self._pid = self._pid, None
        with contextlib.suppress(OSError):
            os.close(self._pipe)
        if finished:
            from kb.matcher.children import reap_later

            reap_later(pid)
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)


# The helper the `kb` program started from its command line, before click and the commands
# loaded (kb.cli.program), until the command takes it: (its database option, its path, it).
_started: list[tuple[str | None, str, Helper]] = []


def start(
    path: str, *, database: str | None = None, cache_file: Path | None = None
) -> Helper | None:
    """A helper scanning the log file at `path` with a matcher cache file: `cache_file`, or
    that of `database` (the `--db` option: a URL, a SQLite path, or None for the configured
    one), when a match will cut the file in two (kb.matcher.split) and it is no longer than
    MAX_LOG_BYTES; else None. Only system calls before the fork: the helper resolves the
    database and finds its cache."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except (OSError, ValueError):
        return None  # the command says why when it opens the file itself
    try:
        size = cuttable(fd)
        if size is None or size > MAX_LOG_BYTES:
            return None
        log = os.fstat(fd)
        read_end, write_end = os.pipe()
        try:
            pid = os.fork()
        except OSError:
            os.close(read_end)
            os.close(write_end)
            return None
        if pid == 0:
            os.close(read_end)
            _helper(database, cache_file, fd, size, write_end)  # never returns
        os.close(write_end)
        return Helper(pid, read_end, log)
    finally:
        os.close(fd)


def start_early(database: str | None, path: str) -> bool:
    """start(), kept for the command that will take it (`take`), the rest of the process
    still to load. Whether a helper was started."""
    helper = start(path, database=database)
    if helper is not None:
        _started.append((database, path, helper))
    return helper is not None


def take(database: str | None, path: str) -> Helper | None:
    """The helper start_early() started for this database option and path, if any (once)."""
    if _started and _started[0][:2] == (database, path):
        return _started.pop()[2]
    return None


def discard() -> None:
    """Stop a helper no command took (a command line read wrongly, an error before the
    match)."""
    while _started:
        _started.pop()[2].close()


def _helper(database: str | None, cache_file: Path | None, fd: int, size: int, out: int) -> None:
    """The helper process: scan, write the result to `out`, exit (never to the caller)."""
    status = 1
    try:
        with os.fdopen(out, "wb", buffering=0) as pipe:
            _scan_to(pipe, database, cache_file, fd, size)
        status = 0
    except BaseException:  # told by the end of the pipe: the parts scan
        pass
    finally:
        os._exit(status)


def _scan_to(pipe: Any, database: str | None, cache_file: Path | None, fd: int, size: int) -> None:
    """Tell `pipe` whether the file is scanned here (with every shard, or with how many of the
    first), then send its hits: (the cache's format, revision and identity, the keys' ends and
    ids, pytest's locations' ends, how many shards when not all), marshalled."""
    import mmap
    import sqlite3

    import hyperscan

    from kb.config import cache_dir_for, resolve_database_url, sqlite_reader_uri
    from kb.matcher import heap
    from kb.matcher.cachefile import CACHE_FILE, shard_blobs

    # Its C heap on huge pages too (kb.matcher.heap): the shard's blob and Hyperscan's copy of
    # it are new memory (24 MB at 150,000 records); a cold match of big.log there then took
    # 0.227 s against 0.234 (20 pairs) and 0.229 against 0.234 (24), its system time 0.082 s
    # against 0.102.
    heap.on_huge_pages()
    cache = cache_file or cache_dir_for(resolve_database_url(database)) / CACHE_FILE
    before = os.stat(cache)
    con = sqlite3.connect(sqlite_reader_uri(cache, immutable=True), uri=True)
    try:
        meta = dict(con.execute("SELECT k, v FROM meta WHERE k IN ('format', 'revision')"))
        # length() of a blob reads its row's header, not its bytes
        sizes = [size for (size,) in con.execute("SELECT length(hsdb) FROM shards ORDER BY n")]
        scanned = leading_shards(sizes, size)
        if not scanned:
            pipe.write(_DECLINED)
            return
        flags = mmap.MAP_PRIVATE | getattr(mmap, "MAP_POPULATE", 0)
        # Mapped, not read: the pages the kernel holds are scanned in place (big.log, 21.9 MB:
        # 2.2 ms with MAP_POPULATE against 11 ms to read it into new memory).
        log = mmap.mmap(fd, size, flags=flags, prot=mmap.PROT_READ)
        if any(log.find(byte) >= 0 for byte in REWRITTEN):
            pipe.write(_DECLINED)  # its blocks are not read as they are: the parts scan them
            return
        leading = None if scanned == len(sizes) else scanned
        pipe.write(_SCANNING if leading is None else _PARTIAL + bytes([leading]))
        blobs = list(shard_blobs(con, stop=scanned))
    finally:
        con.close()
    after = os.stat(cache)
    if (after.st_dev, after.st_ino) != (before.st_dev, before.st_ino):
        return  # replaced while read (a build, a fetch): the match loads the new one
    data = cast(bytes, log)  # a buffer: Hyperscan scans it in place
    ends: list[tuple[int, int]] = []

    def on_key(key_id: int, _from: int, to: int, _flags: int, _ctx: Any) -> None:
        ends.append((to, key_id))

    for blob in blobs:
        db = hyperscan.loadb(blob, hyperscan.HS_MODE_BLOCK)
        db.scan(data, match_event_handler=on_key, scratch=hyperscan.Scratch(db))
    ends.sort()
    pytest: list[int] = []

    def on_location(_id: int, _from: int, to: int, _flags: int, _ctx: Any) -> None:
        pytest.append(to)  # in increasing order (one expression)

    db = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
    db.compile(expressions=[PYTEST_LOC], ids=[0], elements=1, flags=[0])
    db.scan(data, match_event_handler=on_location, scratch=hyperscan.Scratch(db))
    pipe.write(
        marshal.dumps(
            (
                meta.get("format"),
                meta.get("revision"),
                (before.st_dev, before.st_ino),
                array.array("q", [to for to, _ in ends]).tobytes(),
                array.array("q", [key for _, key in ends]).tobytes(),
                array.array("q", pytest).tobytes(),
                leading,
            )
        )
    )
    # The match reads the pipe to its end: closed now, not when this function's locals go
    # (the log's map, the blobs, Hyperscan's databases: with their freeing first, the match
    # had big.log's hits at 150,000 records 4.7 ms after the helper's last scan, 2026-12-06).
    pipe.close()


def leading_shards(sizes: list[int], log_bytes: int) -> int:
    """How many of the first shards (of these sizes in bytes) the helper scans a log of
    `log_bytes` with: all of them up to MAX_SHARD_BYTES in all, else those that fit
    PARTIAL_SHARD_BYTES, fewer for a log over PARTIAL_LOG_BYTES (none: it declines; never more
    than a byte can say)."""
    if sum(sizes) <= MAX_SHARD_BYTES and len(sizes) <= 0xFF:
        return len(sizes)
    budget = PARTIAL_SHARD_BYTES * min(1.0, PARTIAL_LOG_BYTES / max(log_bytes, 1))
    total = count = 0
    for size in sizes[:0xFF]:
        total += size
        if total > budget:
            break
        count += 1
    return count


def _identity(found: os.stat_result) -> tuple[int, int, int, int]:
    return found.st_dev, found.st_ino, found.st_size, found.st_mtime_ns


def _ints(data: bytes) -> array.array[int]:
    values = array.array("q")
    values.frombytes(data)
    return values
