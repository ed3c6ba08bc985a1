"""One worker's knowledge base: the matcher index loaded once, swapped when another process
imports, and matches run on their own threads under a deadline.

Everything here goes through the library API (`KnowledgeBase`), so it works on any database
the library does.
"""

from __future__ import annotations

import asyncio
import io
import logging
import os
import threading
import time
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from kb.serve.config import ServeConfig

if TYPE_CHECKING:
    from kb.knowledge import KnowledgeBase
    from kb.matcher import MatcherIndex, MatchReport

log = logging.getLogger("kb.serve")

REVISION_CHECK_S: Final = 1.0  # one tiny query a second per worker notices another's import
# After an import the importing process builds the new index (108 s at 1M records); a worker
# keeps answering with its old index meanwhile, and builds it itself only if nobody has by then
# (an import through the library API that skipped the build).
BUILD_GRACE_S: Final = 300.0
# The index serialises matches (one Hyperscan scratch space), so more threads only queue; two
# let one match run while the next fetches its records or waits its turn.
MATCH_THREADS: Final = 2
# Records kept per worker (least recently used out): a record is ~10 KB as Python objects, so
# about 10 MB; fetching the 3 of paste.log from SQLite costs 5 ms of a 20 ms request.
RECORD_CACHE: Final = 1024


class MatchTimedOut(Exception):
    """The match did not finish within the configured time limit."""


class MatchStopped(Exception):
    """Raised inside a match thread whose request has given up, at its next read."""


class _StoppableLog(io.BytesIO):
    """The request body as the stream the matcher reads in blocks; once the request has given
    up, the next read raises, so a long log stops at its next block instead of running on."""

    def __init__(self, data: bytes, stop: threading.Event) -> None:
        super().__init__(data)
        self._stop = stop

    def read(self, size: int | None = -1) -> bytes:
        if self._stop.is_set():
            raise MatchStopped
        return super().read(size)


@dataclass
class Found:
    """A match report and the records it names (best matches and their alternatives)."""

    report: MatchReport
    records: dict[str, dict[str, Any]]


def _preloaded(index: MatcherIndex) -> MatcherIndex:
    """The index with its prefilter loaded: a server answers paste after paste. A cache found
    damaged here is left to the first match, which rebuilds it (Service._match)."""
    from kb.matcher.cache import CacheDamaged

    try:
        index.preload()
    except CacheDamaged as exc:
        log.warning("%s", exc.message)
    return index


class Service:
    """The knowledge base a worker serves; one per worker process."""

    def __init__(self, config: ServeConfig) -> None:
        from kb.knowledge import KnowledgeBase

        self.config = config
        # create=False: the CLI checked the schema; a server never creates or changes tables.
        # pooled: a worker queries on every request and once a second; connecting each time
        # would cost a PostgreSQL server a process start per query
        self.kb: KnowledgeBase = KnowledgeBase(config.db_url, create=False, pooled=True)
        self.index: MatcherIndex = _preloaded(self.kb.matcher())  # built before forking
        self.revision_seen = self.index.revision
        self._waiting_since: float | None = None
        self._executor = ThreadPoolExecutor(MATCH_THREADS, thread_name_prefix="kb-match")
        self._refresh_lock = threading.Lock()
        self._cache: OrderedDict[str, dict[str, Any]] = OrderedDict()
        self._cache_revision = ""
        self._cache_lock = threading.Lock()

    def close(self) -> None:
        # Queued matches are dropped; a running one finishes (it cannot be interrupted) and
        # its thread ends with it.
        self._executor.shutdown(wait=False, cancel_futures=True)
        self.kb.close()

    # ---- the index, kept current -----------------------------------------------------------

    def refresh(self) -> bool:
        """Swap in the index of the knowledge base's current revision if it is ready; True if
        the index changed. Called from the watcher, once a REVISION_CHECK_S."""
        with self._refresh_lock:
            revision = self.kb.revision()
            self.revision_seen = revision
            if revision == self.index.revision:
                self._waiting_since = None
                return False
            index = self.kb.cached_matcher()
            if index is None:
                now = time.monotonic()
                if self._waiting_since is None:
                    self._waiting_since = now
                    log.info("revision %s: waiting for its matcher index", revision)
                if now - self._waiting_since < BUILD_GRACE_S:
                    return False
                log.info("revision %s: no index after %.0f s, building it", revision, BUILD_GRACE_S)
                index = self.kb.matcher()
            self._waiting_since = None
            self.index = _preloaded(index)
            log.info("revision %s: matcher index loaded (%d records)", revision, index.records)
            return True

    async def watch(self) -> None:
        """Check the revision every REVISION_CHECK_S until cancelled (the app's lifespan)."""
        while True:
            await asyncio.sleep(REVISION_CHECK_S)
            try:
                await asyncio.to_thread(self.refresh)
            except Exception as exc:  # a dropped database connection: keep serving, retry
                from kb.config import masked

                log.warning("revision check failed: %s", masked(str(exc)))

    # ---- matching under a deadline ---------------------------------------------------------

    def _match(self, log_bytes: bytes, top: int, min_score: float, stop: threading.Event) -> Found:
        from kb.matcher.cache import CacheDamaged

        index = self.index  # this match keeps the index it started with, even if swapped
        try:
            report = index.match(_StoppableLog(log_bytes, stop), top=top, min_score=min_score)
        except CacheDamaged:
            # The cache file went bad under this worker (a disk error, a hand edit): the
            # reader removed it; build a good one, serve with it from now on, match again.
            with self._refresh_lock:
                if self.index is index:
                    log.warning("matcher cache damaged: rebuilding it")
                    self.index = self.kb.matcher(rebuild=True)
                index = self.index
            report = index.match(_StoppableLog(log_bytes, stop), top=top, min_score=min_score)
        report.add_suggestions(self.kb.related)  # for the lines no record explains
        wanted = [m.id for m in report.matches]
        wanted += [alt for m in report.matches for alt, _score in m.alternatives]
        return Found(report, self.records(wanted, index.revision))

    def records(self, ids: list[str], revision: str) -> dict[str, dict[str, Any]]:
        """Records by id, from this worker's cache of the revision's records where it can: the
        same few errors come up in paste after paste, and a record never changes within a
        revision."""
        with self._cache_lock:
            if self._cache_revision != revision:
                self._cache.clear()
                self._cache_revision = revision
            found = {i: self._cache[i] for i in ids if i in self._cache}
            for record_id in found:
                self._cache.move_to_end(record_id)
        missing = [i for i in dict.fromkeys(ids) if i not in found]
        if missing:
            fetched = self.kb.get_many(missing)
            found.update(fetched)
            with self._cache_lock:
                if self._cache_revision == revision:
                    self._cache.update(fetched)
                    while len(self._cache) > RECORD_CACHE:
                        self._cache.popitem(last=False)
        return found

    async def match(self, log_bytes: bytes, *, top: int, min_score: float) -> Found:
        """Match a log on a match thread; MatchTimedOut after `config.match_timeout` seconds.

        The deadline counts the wait behind other matches. A match still queued at the deadline
        never runs; a running one stops at its next read of the log (logs are read in 1 MB
        blocks) or, within one block, finishes in the background: RE2 keeps it linear in the
        log's size, which the body limit bounds.
        """
        stop = threading.Event()
        future = self._executor.submit(self._match, log_bytes, top, min_score, stop)
        try:
            return await asyncio.wait_for(asyncio.wrap_future(future), self.config.match_timeout)
        except TimeoutError:
            stop.set()  # the thread's MatchStopped, if it comes, goes to a future nobody awaits
            raise MatchTimedOut(
                f"the match took longer than the {self.config.match_timeout:g} s limit"
            ) from None

    def health(self) -> dict[str, Any]:
        return {
            "status": "ok",
            "pid": os.getpid(),  # which worker answered (several share one port)
            "revision": self.revision_seen,
            "indexRevision": self.index.revision,
            "records": self.index.records,
        }
