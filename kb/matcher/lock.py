"""One matcher build at a time per cache folder, and what a killed build left behind.

A build holds an exclusive lock on `<cache folder>/matcher.lock` (flock: the system lets go
of it when the process ends, however it ends). A process that finds no current cache waits
for the lock and then looks again before building: the matches that start between an
import's commit and the moment its build is written wait for that build and load it, rather
than each building its own (a thundering herd that once made them take 16 s instead of
0.1 s and doubled the import's time). While the lock is held no other build runs, so a
temporary file of one was left by a build that was killed, and is removed.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Final

LOCK_FILE: Final = "matcher.lock"
TMP_PATTERN: Final = ".matcher-*.tmp"  # kb.matcher.build's temporary files
# kb.matcher.background's: written without the lock, so only an old one is a leftover
IMPORT_TMP_PATTERN: Final = ".matcher-import-*.part"
# Where no lock can be taken (Windows), a temporary file this old is taken for a killed
# build's: a running build rewrites its file more often than this.
STALE_TMP_SECONDS: Final = 3600


@contextlib.contextmanager
def build_lock(cache_dir: Path, on_wait: Callable[[], None] | None = None) -> Iterator[None]:
    """Hold the cache folder's build lock (made if need be), waiting for another process's
    build to finish; `on_wait` is called once if there is one to wait for. OSError when the
    folder cannot be made or written."""
    cache_dir = Path(cache_dir)
    cache_dir.mkdir(parents=True, exist_ok=True)
    fd = os.open(cache_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        locked = _lock(fd, on_wait)
        remove_leftovers(cache_dir, all_of_them=locked)
        yield
    finally:
        os.close(fd)  # and with it the lock


def remove_leftovers(cache_dir: Path, *, all_of_them: bool) -> None:
    """Remove killed builds' temporary files: all of them under the lock, else the old ones."""
    for leftover in Path(cache_dir).glob(TMP_PATTERN):
        with contextlib.suppress(OSError):
            if all_of_them or time.time() - leftover.stat().st_mtime > STALE_TMP_SECONDS:
                leftover.unlink()
    for leftover in Path(cache_dir).glob(IMPORT_TMP_PATTERN):
        with contextlib.suppress(OSError):
            if time.time() - leftover.stat().st_mtime > STALE_TMP_SECONDS:
                leftover.unlink()


if sys.platform == "win32":  # pragma: no cover - no flock; builds may then overlap

    def _lock(fd: int, on_wait: Callable[[], None] | None) -> bool:
        return False

else:
    import fcntl

    def _lock(fd: int, on_wait: Callable[[], None] | None) -> bool:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if on_wait is not None:
                on_wait()
            fcntl.flock(fd, fcntl.LOCK_EX)
        return True
