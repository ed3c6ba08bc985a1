"""An import's pages sent to the disk while it goes on, not all at its commit.

A first load writes a SQLite file of hundreds of megabytes that the kernel keeps in memory
until the commit's fsync, which then waits for all of it: at 150,000 records 600 MB, about a
second at the end of a 13 s import with both cores idle (2026-12-05). A thread of the import's
own asks the kernel every WRITEBACK_SECONDS to write what is dirty so far, while the import
goes on computing; the commit then writes only the last second's pages. Writing pages sooner
changes nothing SQLite relies on: the kernel may write any dirty page at any time anyway.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Final

from sqlalchemy import Engine

from kb.config import sqlite_file

# Often enough that the commit finds about a second of pages (tens of megabytes) to write,
# seldom enough that the waits cost nothing (an fdatasync of little is microseconds).
WRITEBACK_SECONDS: Final = 1.0
_SYNC: Final = getattr(os, "fdatasync", os.fsync)  # macOS has no fdatasync


def database_files(engine: Engine) -> list[Path]:
    """The SQLite file an engine writes and its WAL (where one may appear); none for another
    database, an in-memory one or a URI."""
    path = sqlite_file(engine.url.render_as_string(hide_password=False))
    return [] if path is None else [path, path.with_name(path.name + "-wal")]


@contextlib.contextmanager
def written_back(engine: Engine) -> Iterator[None]:
    """While the block runs, the engine's SQLite files are synced every WRITEBACK_SECONDS by
    a thread of their own (which ends with the block); elsewhere, nothing."""
    paths = database_files(engine)
    if not paths:
        yield
        return
    stop = threading.Event()
    thread = threading.Thread(
        target=_sync_until, args=(paths, stop), name="kb-writeback", daemon=True
    )
    try:
        thread.start()
    except RuntimeError:  # no thread to be had: the commit writes everything, as before
        yield
        return
    try:
        yield
    finally:
        stop.set()
        thread.join()


def _sync_until(paths: list[Path], stop: threading.Event) -> None:
    fds: dict[Path, int] = {}
    try:
        while not stop.wait(WRITEBACK_SECONDS):
            for path in paths:
                fd = _open_as_named(fds, path)
                if fd is None:  # not there (yet): the WAL of a first load, as a rule
                    continue
                try:
                    _SYNC(fd)
                except OSError:  # a file system that cannot: the commit syncs as before
                    return
    finally:
        for fd in fds.values():
            os.close(fd)


def _open_as_named(fds: dict[Path, int], path: Path) -> int | None:
    """A descriptor of the file now at path, kept in fds between rounds; None if none is.

    A descriptor kept from an earlier round may name a file no longer there: a first load
    leaves WAL for a rollback journal, and SQLite deletes the WAL then (kb.db), and makes a
    new one when it turns WAL on again. Syncing the deleted one would write nothing anybody
    reads, so it is let go and the path opened again."""
    fd = fds.get(path)
    if fd is not None:
        try:
            linked = os.fstat(fd).st_nlink > 0
        except OSError:
            linked = False
        if linked:
            return fd
        os.close(fds.pop(path))
    try:
        fd = fds[path] = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    return fd
