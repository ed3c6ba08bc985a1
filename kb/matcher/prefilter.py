"""The prefilter: every key of every pattern found in one pass over a block of the log.

The keys (patterns' literal text, error codes, markers of frames and errors) are compiled into
Hyperscan databases by kb.matcher.build; here they are loaded and scanned, a big block in a
thread of its own while the Python work goes on beside it (Hyperscan lets go of the GIL).
Loading them is most of a cold paste's time at a million records, so a short text is looked up
by its words instead (kb.matcher.anchors), with the small rest shard scanned, until what was
looked up in a process adds up to more than loading the databases costs.
"""

from __future__ import annotations

import contextlib
import re
import sys
import threading
from collections.abc import Generator, Iterable, Iterator
from typing import Any, Final

import hyperscan

from kb.logtext import BLOCK_BYTES, LineBlock
from kb.matcher import anchors
from kb.matcher.cache import DAMAGE, CacheReader
from kb.matcher.prescan import PYTEST_LOC, Prescanned
from kb.pacing import Held

# Blocks this big are scanned in a thread, alongside the work on their neighbours: a quarter of
# kb.logtext's BLOCK_BYTES, so a log's full blocks are, whatever their size (a block is cut at
# its last line end, a little under BLOCK_BYTES). With 1 MB blocks: a warm match of big.log at
# 150,000 records 110 ms against 140 scanning them inline; cold, 12 MB of it in one pass
# 0.208 s against 0.222 with 4 MB blocks (2026-12-05).
THREADED_SCAN_BYTES = BLOCK_BYTES // 4
# Bytes of the full databases whose loading costs what looking one byte of text up by its words
# does. Measured (one process each, paste.log, 34.6 KB): at 1M records loading the 78 MB took
# 242-248 ms, looking paste.log up 56-58 ms (20 of them reading and loading the lookup row, 4.4
# MB); at 150,000 records 36-52 ms against 21-42 ms; 8 KB of it 7-9 ms at 150,000 records. About
# 3.2 ns a byte loaded against 1.1 us a byte looked up: one to about 350, rounded down, so the
# lookup is left where loading would be about as fast.
LOADED_PER_LOOKED_UP: Final = 300
# A text longer than this is scanned, whatever the budget: each key found by its windows is
# searched for in the whole text, and the more text, the more keys (1M records: 250 KB of
# big.log found 1,170 keys and searching took 180 ms, against 14 ms for 1,057 keys in 35 KB).
LOOKUP_MAX_BYTES: Final = 64 << 10
# Shard blobs read ahead of the one being loaded (each one's memory held until it is loaded).
READ_AHEAD: Final = 1
# How often (seconds) the interpreter hands the GIL over while a block is scanned in a thread.
# Hyperscan lets go of the GIL while it scans, but takes it back for every key it finds, to call
# the Python callback, and a main thread busy in Python keeps it for the switch interval first
# (5 ms by default): the scan of big.log at 150,000 records (1,028 hits) took 4.0 s beside a
# busy loop, 0.79 s at 1 ms, 0.21 s at 0.1 ms, 0.15 s at 0.01 ms against 0.12 s alone, and the
# busy loop lost nothing at 0.01 ms. In `kb match` only the main thread runs Python meanwhile;
# in a process with other busy Python threads (kb serve), they switch more often while it lasts.
SCAN_SWITCH_INTERVAL: Final = 1e-5


# pytest's raise-site locations (kb.matcher.prescan.PYTEST_LOC). A big block's pass runs in the
# scanning thread, as a Hyperscan database that lets go of the GIL: over big.log (21.9 MB) 4.6
# ms there against 15.6 ms of `re` holding the main thread (2026-12-04; its compile, once a
# process, 2 ms).
PYTEST_LOC_BYTES_RE: Final = re.compile(PYTEST_LOC)


def pytest_locations(data: bytes) -> list[int]:
    """The lines of pytest's raise-site lines in data, read by `re` (a small block's)."""
    return list(lines_at(data, [m.start() for m in PYTEST_LOC_BYTES_RE.finditer(data)]))


def lines_at(data: bytes, offsets: Iterable[int]) -> Iterator[int]:
    """The 0-based line of each offset into data (offsets in increasing order)."""
    pos = 0
    line = 0
    for offset in offsets:
        line += data.count(b"\n", pos, offset)
        pos = offset
        yield line


def hits_at(
    found: Prescanned, data: bytes, at: int, more: list[tuple[int, int]] | None = None
) -> tuple[list[tuple[int, int]], list[int]]:
    """What scanning `data`, the file's bytes from `at`, finds, taken from a whole file's hits
    (of the shards the hits are of, see Prefilter.taken, with `more`: the others' (end offset,
    key id), in no order): (line in data, key id) in the order of (end, key id), and the lines
    of pytest's raise-site locations."""
    raw = found.hits(at, len(data))
    if more:
        raw = sorted(raw + more)  # one sort of both, the order one scan of every shard gives
    return by_line(data, raw), list(lines_at(data, found.pytest_ends(at, len(data))))


def by_line(data: bytes, raw: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """(line in data, key id) of hits given as (end offset, key id) in increasing order."""
    return list(zip(lines_at(data, [to for to, _ in raw]), [k for _, k in raw], strict=True))


def _loaded(blob: bytes) -> Any:
    db = hyperscan.loadb(blob, hyperscan.HS_MODE_BLOCK)
    db.scratch = hyperscan.Scratch(db)
    return db


def _read_ahead(items: Generator[bytes, None, None]) -> Generator[bytes, None, None]:
    """`items`, read from now on in a thread of its own, the next while the caller works on
    the one before: reading a shard's blob lets go of the GIL and Hyperscan's loading does
    not, so the two overlap. At a million records (7 shards, 75 MB) the load took 114 ms
    against 132 in turn (medians of ten processes each, 2026-12-05). At most READ_AHEAD items
    wait at once; an error of the reading is raised where the item was wanted. The reader
    starts at once: a caller takes the items (or starts taking them and closes the iterator),
    or the reader waits, one item read, until the process ends."""
    import queue  # here: a paste that is looked up by its words never loads the shards

    ready: queue.Queue[tuple[bytes | None, BaseException | None]] = queue.Queue(READ_AHEAD)
    stop = threading.Event()

    def read() -> None:
        try:
            for item in items:
                if stop.is_set():
                    return
                ready.put((item, None))
            ready.put((None, None))
        except BaseException as exc:  # raised again in the thread that wants the items
            ready.put((None, exc))
        finally:
            items.close()  # in this thread, which read them

    thread = threading.Thread(target=read, name="kb-shards", daemon=True)
    thread.start()
    return _taken(ready, stop, thread)


def _taken(
    ready: Any, stop: threading.Event, thread: threading.Thread
) -> Generator[bytes, None, None]:
    """The items of _read_ahead's reader, as they come; once they are all taken, or the
    iteration ends early, the reader is stopped and joined."""
    import queue

    try:
        while True:
            item, failed = ready.get()
            if failed is not None:
                raise failed
            if item is None:
                return
            yield item
    finally:
        stop.set()
        while thread.is_alive():  # a reader blocked on a full queue goes on, sees the stop
            with contextlib.suppress(queue.Empty):
                ready.get(timeout=0.01)
        thread.join()


def _scan(dbs: list[Any], data: bytes, scratches: list[Any] | None = None) -> list[tuple[int, int]]:
    """(end offset, key id) of every key of the databases in data, in no order."""
    raw: list[tuple[int, int]] = []

    def on_hit(key_id: int, _from: int, to: int, _flags: int, _ctx: Any) -> None:
        raw.append((to, key_id))

    for i, db in enumerate(dbs):
        db.scan(data, match_event_handler=on_hit, scratch=scratches[i] if scratches else None)
    return raw


def _scan_in_two(dbs: list[Any], data: bytes, scratches: list[Any]) -> list[tuple[int, int]]:
    """_scan, the second half of the shards in a thread of its own: a big log's scan at a
    million records (12 shards) took longer than the Python work beside it, which waited
    0.25-0.43 s of a 0.6-0.8 s match for it. Each shard is still scanned by one thread at a
    time, with the scanning thread's scratch space."""
    if len(dbs) < 2:
        return _scan(dbs, data, scratches)
    half = len(dbs) // 2
    second: list[tuple[int, int]] = []
    failed: list[BaseException] = []

    def scan_second() -> None:
        try:
            second.extend(_scan(dbs[half:], data, scratches[half:]))
        except BaseException as exc:  # raised again in the thread that asked
            failed.append(exc)

    thread = threading.Thread(target=scan_second, name="kb-scan-2", daemon=True)
    thread.start()
    try:
        first = _scan(dbs[:half], data, scratches[:half])
    finally:
        thread.join()
    if failed:
        raise failed[0]
    return first + second


class Prefilter:
    """The Hyperscan databases of one cache, loaded when first needed (one per shard, each
    with a scratch space for the main thread and, made when first needed, one for the scanning
    thread); until then, texts of up to LOOKUP_MAX_BYTES are looked up by their words while
    what was looked up stays within the databases' bytes (`shard_bytes`) / LOADED_PER_LOOKED_UP
    in all."""

    def __init__(self, reader: CacheReader, shard_bytes: int) -> None:
        self._reader = reader
        self._lookup_left = shard_bytes // LOADED_PER_LOOKED_UP
        self._dbs: list[Any] | None = None  # the shards' from _first on
        self._first = 0
        self._reading_from = 0
        self._anchor_bits = b""
        self._rest: list[Any] | None = None  # [] when there is no rest shard
        self._thread_scratches: list[Any] | None = None
        self._pytest: tuple[Any, Any] | None = None  # its database, the thread's scratch
        self._reading: Generator[bytes, None, None] | None = None  # blobs read for load()

    @property
    def loaded(self) -> bool:
        return self._dbs is not None

    @property
    def reading(self) -> bool:
        """The shards' blobs are being read (read_ahead) for a load() to come."""
        return self._reading is not None

    def read_ahead(self, start: int = 0) -> None:
        """Start reading the shards' blobs (from the `start`th) in a thread; load() then loads
        them. A caller that has work of its own before the load (kb.matcher.split counting a
        big log's lines) does it meanwhile, reading letting go of the GIL: load() must
        follow, and the cache's connection is not used in between."""
        if self._dbs is None and self._reading is None:
            self._reading = _read_ahead(self._reader.shards(start))
            self._reading_from = start

    def load(self, start: int = 0) -> None:
        """Load every shard from the `start`th (in the thread that reads the cache: the main
        one); the first `start` are left to a later load that needs them (a helper scanned
        the file with them: kb.matcher.prescan)."""
        if self._dbs is None:
            self.read_ahead(start)
            assert self._reading is not None
            self._dbs, self._first = self._load(self._reading), self._reading_from
            self._reading = None
        if start < self._first:
            self._dbs = self._load(self._reader.shards(start, self._first)) + self._dbs
            self._first = start
            self._thread_scratches = None  # made again for every shard

    def _load(self, blobs: Generator[bytes, None, None]) -> list[Any]:
        try:
            with _QUICK_HANDOFF:
                return [_loaded(blob) for blob in blobs]
        except (*DAMAGE, hyperscan.error) as exc:  # unreadable, or not a database
            raise self._reader.damaged(exc) from exc
        finally:
            blobs.close()  # the reader stopped and joined, whatever happened

    def hits_by_line(self, data: bytes, in_thread: bool = False) -> list[tuple[int, int]]:
        """(line in data, key id) of every key found in `data`, in line order. `in_thread`
        scans with the scanning thread's scratch spaces (one scan may use a scratch at once),
        and needs the databases loaded first."""
        if not data:
            return []
        if (
            self._dbs is None
            and not in_thread
            and len(data) <= min(self._lookup_left, LOOKUP_MAX_BYTES)
        ):
            self._lookup_left -= len(data)
            raw = self._looked_up(data)
        else:
            raw = self._scanned(data, in_thread)
        raw.sort()
        return by_line(data, raw)

    def taken(
        self, found: Prescanned, data: bytes, at: int, in_thread: bool = False
    ) -> tuple[list[tuple[int, int]], list[int]]:
        """hits_at(found, data, at), with the hits of the shards the helper did not scan with
        (found.leading) found here: what scanning `data` with every shard finds, in the same
        order (one sort of (end, key id), as hits_by_line's). `in_thread` as for
        hits_by_line."""
        leading = found.leading
        more = None if leading is None else self._scanned(data, in_thread, leading)
        return hits_at(found, data, at, more)

    def _scanned(self, data: bytes, in_thread: bool, start: int = 0) -> list[tuple[int, int]]:
        """The hits of every shard from the `start`th, in no order."""
        self.load(start)
        assert self._dbs is not None
        dbs = self._dbs[start - self._first :]
        if in_thread:
            if self._thread_scratches is None:  # small pastes never scan in a thread
                # copies of the main thread's: allocating a scratch for a database reads the
                # database (7 shards at 1M records: 7.8 ms), copying one does not (0.02 ms)
                self._thread_scratches = [db.scratch.clone() for db in self._dbs]
            scratches = self._thread_scratches[start - self._first :]
            with _QUICK_HANDOFF:
                return _scan_in_two(dbs, data, scratches)
        return _scan(dbs, data)

    def pytest_lines(self, data: bytes) -> list[int]:
        """pytest_locations(data), found by Hyperscan with the scanning thread's scratch (one
        thread at a time scans with it, as with the shards' thread scratches)."""
        if self._pytest is None:
            db = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
            db.compile(expressions=[PYTEST_LOC], ids=[0], elements=1, flags=[0])
            self._pytest = (db, hyperscan.Scratch(db))
        db, scratch = self._pytest
        ends: list[int] = []  # a match holds no newline: its end is on its start's line

        def on_hit(_id: int, _from: int, to: int, _flags: int, _ctx: Any) -> None:
            ends.append(to)  # reported in increasing order (one expression)

        db.scan(data, match_event_handler=on_hit, scratch=scratch)
        return list(lines_at(data, ends))

    def _looked_up(self, data: bytes) -> list[tuple[int, int]]:
        """The keys found by the text's windows, and the rest shard's hits."""
        if self._rest is None:
            self._anchor_bits, blob = self._reader.lookup()
            try:
                self._rest = [] if blob is None else [_loaded(blob)]
            except hyperscan.error as exc:  # read, but not a database
                raise self._reader.damaged(exc) from exc
        found = anchors.may_be_anchors(self._anchor_bits, anchors.windows(data))
        return anchors.hits_in(data, self._reader.anchored_keys(found)) + _scan(self._rest, data)


def _quick(saved: float) -> float:
    return min(saved, SCAN_SWITCH_INTERVAL)


# SCAN_SWITCH_INTERVAL while at least one scan runs in a thread (matches in several threads
# share the process's interval); the interval before, once none does.
_QUICK_HANDOFF: Final = Held(sys.getswitchinterval, sys.setswitchinterval, _quick)


class BlockScan:
    """The prefilter scan of one block's own lines, in a thread for a big block; result()
    gives (line in the block, key id) in line order, waiting for the thread if need be.
    `prescanned`: the whole file's hits (kb.matcher.prescan) and where the blocks' stream
    starts in the file, for a block read from it as it is (one with `offset`)."""

    def __init__(
        self,
        prefilter: Prefilter,
        block: LineBlock,
        prescanned: tuple[Prescanned, int] | None = None,
    ) -> None:
        self.block = block
        self.data = (
            block.data
            if block.data is not None
            else "\n".join(block.lines).encode("utf-8", "replace")
        )
        self._prefilter = prefilter
        self._hits: list[tuple[int, int]] = []
        self._pytest_lines: list[int] | None = None  # found by the thread, if it scanned
        self._error: BaseException | None = None
        self._thread: threading.Thread | None = None
        # The whole file's hits, where the block was read from it as it is: (them, where
        # the block starts in the file).
        self._taken: tuple[Prescanned, int] | None = None
        if prescanned is not None and block.data is not None and block.offset is not None:
            self._taken = (prescanned[0], prescanned[1] + block.offset)
        leading = None if self._taken is None else self._taken[0].leading
        if self._taken is not None and leading is None:
            self._hits, self._pytest_lines = hits_at(self._taken[0], self.data, self._taken[1])
        elif len(self.data) >= THREADED_SCAN_BYTES:
            prefilter.load(leading or 0)  # here: the cache's connection is read in this thread only
            # its own scratch spaces: the main thread scans carried lines meanwhile
            self._thread = threading.Thread(
                target=self._scan, args=(True,), name="kb-scan", daemon=True
            )
            self._thread.start()
        else:
            self._scan(False)

    def _scan(self, in_thread: bool) -> None:
        try:
            if self._taken is not None:  # the helper scanned with some shards: the others
                found, at = self._taken
                self._hits, self._pytest_lines = self._prefilter.taken(
                    found, self.data, at, in_thread
                )
                return
            self._hits = self._prefilter.hits_by_line(self.data, in_thread)
            if in_thread:
                self._pytest_lines = self._prefilter.pytest_lines(self.data)
        except BaseException as exc:  # raised again where the result is wanted
            self._error = exc

    def wait(self) -> None:
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def result(self) -> list[tuple[int, int]]:
        self.wait()
        if self._error is not None:
            raise self._error
        return self._hits

    def pytest_lines(self) -> list[int]:
        """The block's lines holding pytest's raise-site location (after result())."""
        if self._pytest_lines is None:
            self._pytest_lines = pytest_locations(self.data)
        return self._pytest_lines
