"""The cache file's name and format, and its shards' blobs read: the part of kb.matcher.cache a
process needs before the matcher's modules are loaded (kb.matcher.prescan's helper, forked as
`kb match` starts, reads the shards with nothing more than this, sqlite3 and Hyperscan).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Generator
from typing import Final

# Bumped whenever what is written changes; a cache of another format is rebuilt.
# 10: no traceback marker key, no unread columns (keys.kind, records.repo/error_code/pattern).
# 11: a record without a lineNumber has NULL there, not 0.
# 12: records.function, the functions and words tables, more error markers.
# 13: keys.anchor, the anchors' bitmap and the rest shard (kb.matcher.anchors), meta
#     shard_bytes.
# 14: the near-miss templates in one row of two blobs (templates_blob, patterns_blob).
# 15: the near-miss templates sorted by length; their lists in fuzzy_ints, a row a part.
FORMAT_VERSION = 15
CACHE_FILE: Final = "matcher.sqlite3"
# The cache file is opened immutable: a build writes a new file and renames it into place, so
# the file a reader opened never changes (a rebuild or a fetch is a new file, a damaged one is
# removed), and no read needs a file lock.
# The shards are read through a memory map of the file, unmapped after them: at 1M records the
# 12 shards (78 MB) took 8.8-16.5 ms so against 41.7-87.2 ms through SQLite's page reads
# (2026-12-04). Only while they are read: a map left open for the whole match kept every page
# any query touched in the process (a cold big.log at 1M peaked at 464 MB against 178 MB).
# SQLite caps the map at its build's limit (about 2 GB by default).
SHARDS_MMAP_BYTES: Final = 1 << 31


def shard_blobs(
    con: sqlite3.Connection, start: int = 0, stop: int | None = None
) -> Generator[bytes, None, None]:
    """The serialised Hyperscan databases of the cache open on `con`, in key-id order (those
    from `start` up to `stop`), each read as one blob (sqlite3_blob_read) rather than as a
    column value: the 95 MB of 12 shards at 1M records took 115-166 ms as column values, 62-64
    ms so."""
    con.execute(f"PRAGMA mmap_size = {SHARDS_MMAP_BYTES}")
    try:
        numbers = con.execute("SELECT n FROM shards ORDER BY n").fetchall()
        for (n,) in numbers[start:stop]:
            with con.blobopen("shards", "hsdb", n, readonly=True) as blob:
                yield blob.read()
    finally:
        con.execute("PRAGMA mmap_size = 0")  # the pages read go, with the map
