"""The loaded matcher: a cache opened for one revision, ready to match any number of logs."""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from kb import logtext
from kb.matcher.cache import CacheReader, file_identity, open_current
from kb.matcher.cachefile import CACHE_FILE
from kb.matcher.prefilter import Prefilter
from kb.matcher.rank import MatchReport
from kb.matcher.scan import LogScan
from kb.matcher.scorer import Scorer
from kb.matcher.scoring import DEFAULT_SCORING, ScoringConfig
from kb.matcher.verify import Verifier

if TYPE_CHECKING:
    from kb.matcher.fuzzy import NearMissSearch
    from kb.matcher.prescan import Helper


class MatcherIndex:
    """A loaded prefilter index. `match()` may be called many times and from several threads
    (calls are serialised: the Hyperscan scratch spaces and the lookup caches are shared)."""

    def __init__(
        self, *, reader: CacheReader, prefilter: Prefilter, records: int, revision: str
    ) -> None:
        self.records = records
        self.revision = revision
        self._reader = reader
        self._prefilter = prefilter
        self._verifier = Verifier()  # keeps each pattern compiled from one match to the next
        self._near_misses: NearMissSearch | None = None
        self._lock = threading.Lock()

    def close(self) -> None:
        self._reader.close()

    def preload(self) -> None:
        """Load the prefilter's databases now, not when a log first needs them: for a process
        that answers many logs (`kb serve`), where looking each paste up by its words would
        cost more in all than loading them once."""
        with self._lock:
            self._prefilter.load()

    def match(
        self,
        text: str | bytes | IO[bytes] | IO[str] | os.PathLike[str],
        *,
        top: int = 3,
        min_score: float | None = None,
        scoring: ScoringConfig = DEFAULT_SCORING,
        timeout: float | None = None,
        split: bool = False,
        prescan: Helper | None = None,
    ) -> MatchReport:
        """Every known error in `text` (a string, bytes, a binary/text stream or a path; streams
        and paths are read block by block). `top` records per error: the best plus top - 1
        alternatives; reported from `min_score` (default: the scoring's). After `timeout`
        seconds (None: no limit) the log is read no further: what was found so far is
        reported, with `stats["stopped"] = "timeout"`. `split`: a big log file may be matched
        in two parts at once, the second in a forked process (kb.matcher.split; a one-shot
        process such as `kb match` asks for it, a library caller need not expect a fork, nor
        its C heap kept on huge pages from then on, kb.matcher.heap). `prescan`: a helper
        scanning that file (kb.matcher.prescan.start), whose hits the parts then take; it is
        reaped here, used or not."""
        if min_score is not None and not 0 <= min_score <= 1:  # also refuses NaN
            raise ValueError(f"min_score must be a number from 0 to 1, got {min_score!r}")
        started = time.perf_counter()
        deadline = None if timeout is None else time.monotonic() + timeout

        def new_scan() -> LogScan:
            return LogScan(
                reader=self._reader,
                prefilter=self._prefilter,
                verifier=self._verifier,
                scorer=Scorer(self._reader, scoring),
                near_misses=self._near_miss_search,
                top=top,
                min_score=scoring.min_score if min_score is None else min_score,
                deadline=deadline,
            )

        with self._lock:
            if isinstance(text, os.PathLike):
                with open(text, "rb") as fh:
                    scan = self._scan(fh, new_scan, split, prescan)
            else:
                scan = self._scan(text, new_scan, split, prescan)
        matches = sorted(scan.matches.found, key=lambda m: (-m.score, m.line))
        stats: dict[str, Any] = {
            "lines": scan.lines_total if scan.owned is None else scan.owned_total,
            "records": self.records,
            "candidates": scan.trials.candidates,
            "verified": scan.trials.verified,
            "fuzzy_queries": scan.near_miss_queries,
            "elapsed_ms": round((time.perf_counter() - started) * 1000, 1),
        }
        if scan.owned is not None:
            stats["parts"] = 2  # matched in two parts at once (kb.matcher.split)
        if scan.stopped is not None:
            stats["stopped"] = scan.stopped
        return MatchReport(matches, stats, scan.unmatched)

    def _scan(
        self,
        text: str | bytes | IO[bytes] | IO[str],
        new_scan: Callable[[], LogScan],
        split: bool,
        prescan: Helper | None = None,
    ) -> LogScan:
        """One scan of the whole log, or two parts at once when `split` and the log allow."""
        try:
            if split:
                from kb.matcher import split as halves

                found = halves.plan(text, before_counting=lambda: self._ready_to_split(prescan))
                hits = None
                if found is not None and prescan is not None:
                    halves.prepare()  # while the helper may still scan
                    if prescan.leading:  # the shards it does not scan with, while it scans
                        self._prefilter.load(prescan.leading)
                    hits = prescan.result(found.fd, self.revision, self._reader.identity)
                if (found is not None and hits is None) or self._prefilter.reading:
                    self._prefilter.load()  # before the fork: the child has the databases too
                if found is not None:
                    both = halves.run(found, new_scan, hits)
                    if both is not None:
                        return both
        finally:
            if prescan is not None:
                prescan.close()
        scan = new_scan()
        scan.run(logtext.blocks(text))
        return scan

    def _ready_to_split(self, prescan: Helper | None) -> None:
        """A log about to be cut in two: this one-shot process's C heap set (kb.matcher.heap)
        and, unless a helper scans the file (`prescan`: its parts take its hits and need no
        shard loaded), the shards' blobs read while its lines are counted (at 150,000 records
        the blob's read, 10 ms, hides the count's 5-6): those it does not scan with, when it
        scans with the first few (kb.matcher.prescan.PARTIAL_SHARD_BYTES)."""
        from kb.matcher import heap

        heap.on_huge_pages()  # before the blobs and the log's blocks are read into it
        if prescan is None or not prescan.accepted():
            self._prefilter.read_ahead()
        elif prescan.leading:
            self._prefilter.read_ahead(prescan.leading)  # the shards it does not scan with

    def _near_miss_search(self) -> NearMissSearch:
        """The near-miss search, loaded when a log first needs it (most never do)."""
        if self._near_misses is None:
            from kb.matcher.fuzzy import NearMissSearch

            self._near_misses = NearMissSearch(self._reader)
        return self._near_misses


def load_index(cache_dir: Path, revision: str) -> MatcherIndex | None:
    """The cached index for `revision`, or None when it is missing, stale or unreadable."""
    opened = open_current(cache_dir, revision, "records", "kinds", "shard_bytes")
    if opened is None:
        return None
    con, meta = opened
    path = Path(cache_dir) / CACHE_FILE
    try:
        reader = CacheReader(
            con, json.loads(meta["kinds"]), path=path, identity=file_identity(path)
        )
        prefilter = Prefilter(reader, int(meta["shard_bytes"]))
        return MatcherIndex(
            reader=reader, prefilter=prefilter, records=int(meta["records"]), revision=revision
        )
    except Exception:  # a corrupt file is as good as no cache
        con.close()
        return None
