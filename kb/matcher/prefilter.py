"""The prefilter: every key of every pattern found in one pass over a block of the log.

The keys (patterns' literal text, error codes, markers of frames and errors) are compiled into
Hyperscan databases by kb.matcher.build; here they are loaded and scanned, a big block in a
thread of its own while the Python work goes on beside it (Hyperscan lets go of the GIL).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator
from typing import Any, Final

import hyperscan

from kb.logtext import LineBlock

# Blocks this big are scanned in a thread, alongside the work on their neighbours.
THREADED_SCAN_BYTES = 1 << 20
_NO_HITS: Final[Iterator[tuple[int, int]]] = iter(())


def lines_at(data: bytes, offsets: Iterable[int]) -> Iterator[int]:
    """The 0-based line of each offset into data (offsets in increasing order)."""
    pos = 0
    line = 0
    for offset in offsets:
        line += data.count(b"\n", pos, offset)
        pos = offset
        yield line


class Prefilter:
    """The loaded Hyperscan databases, one per shard, each with a scratch space for the main
    thread and, made when first needed, one for the scanning thread."""

    def __init__(self, shards: Iterable[bytes]) -> None:
        self._dbs: list[Any] = []
        for blob in shards:
            db = hyperscan.loadb(blob, hyperscan.HS_MODE_BLOCK)
            db.scratch = hyperscan.Scratch(db)
            self._dbs.append(db)
        self._thread_scratches: list[Any] | None = None

    def hits_by_line(self, data: bytes, in_thread: bool = False) -> Iterator[tuple[int, int]]:
        """(line in data, key id) of every key found in `data`, in line order. `in_thread`
        scans with the scanning thread's scratch spaces (one scan may use a scratch at once)."""
        if not data:
            return _NO_HITS
        scratches: list[Any] | None = None
        if in_thread:
            if self._thread_scratches is None:  # small pastes never scan in a thread
                self._thread_scratches = [hyperscan.Scratch(db) for db in self._dbs]
            scratches = self._thread_scratches
        raw: list[tuple[int, int]] = []

        def on_hit(key_id: int, _from: int, to: int, _flags: int, _ctx: Any) -> None:
            raw.append((to, key_id))

        for i, db in enumerate(self._dbs):
            db.scan(data, match_event_handler=on_hit, scratch=scratches[i] if scratches else None)
        raw.sort()
        return zip(lines_at(data, [to for to, _ in raw]), [key for _, key in raw], strict=True)


class BlockScan:
    """The prefilter scan of one block's own lines, in a thread for a big block; result()
    gives (line in the block, key id) in line order, waiting for the thread if need be."""

    def __init__(self, prefilter: Prefilter, block: LineBlock) -> None:
        self.block = block
        self.data = (
            block.data
            if block.data is not None
            else "\n".join(block.lines).encode("utf-8", "replace")
        )
        self._prefilter = prefilter
        self._hits: list[tuple[int, int]] = []
        self._error: BaseException | None = None
        self._thread: threading.Thread | None = None
        if len(self.data) >= THREADED_SCAN_BYTES:
            # its own scratch spaces: the main thread scans carried lines meanwhile
            self._thread = threading.Thread(
                target=self._scan, args=(True,), name="kb-scan", daemon=True
            )
            self._thread.start()
        else:
            self._scan(False)

    def _scan(self, in_thread: bool) -> None:
        try:
            self._hits = list(self._prefilter.hits_by_line(self.data, in_thread))
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
