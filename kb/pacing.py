"""Interpreter settings that bulk work changes for a while and gives back: the garbage
collector's pace during an import or an index build (and none while the build beside an
import reads its rows), the thread switch interval during a prefilter scan in a thread. Each is
the process's, shared by every thread in it.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Callable
from typing import Final, Generic, TypeVar

T = TypeVar("T")

# The cyclic collector's thresholds while records are imported or an index is built: every
# record makes a dozen short-lived containers, which reference counting frees, yet each 700 of
# them start a collection, and every tenth of those walks the older objects too. At 150k records
# the import spent 1.4-1.7 s collecting (2,098 young, 17 full collections) and the matcher build
# 1.15 s; with these 0.12-0.14 s and 0.37 s. A full collection still runs, 5,000 times less
# often.
BULK_GC_THRESHOLDS: Final = (10_000, 50, 100)


class Held(Generic[T]):
    """A process-wide setting changed while at least one holder is inside (`with`), given back
    as it was when the last one leaves: holders in several threads overlap freely."""

    def __init__(
        self, read: Callable[[], T], write: Callable[[T], None], held: Callable[[T], T]
    ) -> None:
        """read/write: the setting; held(saved): its value while held."""
        self._read = read
        self._write = write
        self._held = held
        self._lock = threading.Lock()
        self._holders = 0
        self._saved: T | None = None

    def __enter__(self) -> None:
        with self._lock:
            if not self._holders:
                self._saved = self._read()
                self._write(self._held(self._saved))
            self._holders += 1

    def __exit__(self, *_exc: object) -> None:
        with self._lock:
            self._holders -= 1
            if not self._holders and self._saved is not None:
                self._write(self._saved)
                self._saved = None


def _set_thresholds(thresholds: tuple[int, int, int]) -> None:
    gc.set_threshold(*thresholds)


def _slower(saved: tuple[int, int, int]) -> tuple[int, int, int]:
    """The bulk thresholds, or the process's own where they are higher already."""
    young, middle, old = saved
    bulk_young, bulk_middle, bulk_old = BULK_GC_THRESHOLDS
    return max(young, bulk_young), max(middle, bulk_middle), max(old, bulk_old)


# `with FEWER_COLLECTIONS:` around an import or a build.
FEWER_COLLECTIONS: Final = Held(gc.get_threshold, _set_thresholds, _slower)


def _set_enabled(enabled: bool) -> None:
    if enabled:
        gc.enable()
    else:
        gc.disable()


# `with NO_COLLECTIONS:` in a process that does one bulk job and ends, for the stretch where
# reference counting frees what it makes: the build beside an import while it reads the rows
# (kb.matcher.background). At 1M records its collector ran 636 times there and at its end
# (4.2 s) and found 8 objects in cycles; with it off while rows come, 151 times (0.18 s), the
# child's CPU 82.6 s against 85.6. Off to the end, its peak was 289 MB against 278 (one run
# each, 2026-12-05): the end (sorts, the last shard's compile) keeps its collections. Not for
# a process that lives on (kb serve): the cycles it made would never be freed.
NO_COLLECTIONS: Final = Held(gc.isenabled, _set_enabled, lambda _saved: False)
