"""The matcher's cache file shared through the database, so a machine fetches it once per
knowledge-base revision instead of rebuilding it.

Whoever builds the index for a revision first (`kb import`, as a rule) stores the file, zlib
compressed in parts, in the `matcher_index` table; a process whose cache folder has no copy
for the current revision fetches it (one SELECT, so one consistent snapshot) and writes it
where kb.matcher.cache looks. Only the newest revision's file is kept. Standard library only
on the fetching side (the cold path of `kb match` on SQLite runs without SQLAlchemy).
"""

from __future__ import annotations

import contextlib
import os
import struct
import tempfile
import time
import zlib
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from kb.sql import Runner

if TYPE_CHECKING:
    from sqlalchemy import Connection

TABLE: Final = "matcher_index"  # kb/models.py MatcherIndexPart
# Bytes of the cache file per row, before compression: a 150k-record file (about 80 MB) is
# 20 rows; each row is compressed and decompressed on its own, so memory stays at a part.
PART_BYTES: Final = 4 << 20
# zlib level 1: 38 MB of cache (69,652 records) become 17 MB in 0.7 s and come back in 0.25 s;
# level 6 saves 2 MB more for three times the compression time.
COMPRESSION_LEVEL: Final = 1
# The same zlib format made by ISA-L (the `isal` package), where it is installed: the fetching
# side reads it with the standard library's zlib as before. Its level 2 makes parts as small
# as zlib's level 1 (the 150,000-record file, 107 MB: 39.9 MB both) four to five times faster
# (0.25 s against 1.06 s on one thread, 2026-12-05), and it lets go of the GIL as zlib does.
# That compression runs in the build beside an import, on the core the import's own last
# seconds need.
ISAL_LEVEL: Final = 2
# Parts compressed at once when a file is stored: the machine's two cores. `kb import` stores
# the file after its matcher build has ended, with both cores free: the 150k-record file
# (105 MB) in 0.7 s against 1.2 s one part at a time, the 1M one (690 MB) in 4.1 s against
# 7.5-9.6 s (2026-12-02).
COMPRESSORS: Final = 2

# A build beside an import (kb.matcher.background) compresses the parts itself, after its
# last row, into PARTS_FILE beside the cache file, while the import still fills its full-text
# index: the import then stores them as they are, in its own transaction (or, where that
# failed, at its end). At 150,000 records that store took
# 1.3 s of the `kb import` command's last seconds, with one core idle; at 1M, 4.1 s. The file
# opens with PARTS_MAGIC and the size, modification time and inode of the cache file it was
# made from (a rename keeps all three); any other cache file (a rebuild, a fetch: a new file)
# is compressed at the store as before. The store removes the file, stored or not; one that an
# import killed between its install and its store leaves (a `kb match` only loads the cache)
# stays until the next store in that folder, or the next import's install, replaces it.
PARTS_FILE: Final = "matcher.sqlite3.parts"
PARTS_MAGIC: Final = b"kb matcher parts 1\n"
_HEADER: Final = struct.Struct("<QQQ")  # the cache file's st_size, st_mtime_ns and st_ino
_LENGTH: Final = struct.Struct("<Q")  # each part's, before it

Status = Callable[[str], None]  # a line for a person ("Fetching ..."), shown on a terminal


def stored_size(runner: Runner, revision: str, format_version: int) -> int | None:
    """The compressed bytes stored for this revision and cache format, or None when none are."""
    rows = runner.rows(
        f"SELECT count(*), sum(length(data)) FROM {TABLE} WHERE revision = ? AND format = ?",
        (revision, format_version),
    )
    count, size = rows[0] if rows else (0, None)
    return int(size or 0) if count else None


def fetch(
    runner: Runner,
    cache_dir: Path,
    cache_file: str,
    revision: str,
    format_version: int,
    status: Status | None = None,
) -> bool:
    """Write the stored cache file of `revision` into `cache_dir` (atomically); False when the
    database has none for it, or the cache folder cannot be written."""
    size = stored_size(runner, revision, format_version)
    if size is None:
        return False
    started = time.perf_counter()
    if status is not None:
        status(
            f"Fetching the matcher index for this revision from the database "
            f"({size / 1e6:.1f} MB, once per revision)..."
        )
    done = _fetch_into(runner, cache_dir, cache_file, revision, format_version)
    if status is not None:  # every opening line gets its closing one
        elapsed = time.perf_counter() - started
        status(
            f"Fetched the matcher index in {elapsed:.1f} s."
            if done
            else f"Could not fetch the matcher index ({elapsed:.1f} s); building it instead."
        )
    return done


def _fetch_into(
    runner: Runner, cache_dir: Path, cache_file: str, revision: str, format_version: int
) -> bool:
    rows = runner.rows(
        f"SELECT part, data FROM {TABLE} WHERE revision = ? AND format = ? ORDER BY part",
        (revision, format_version),
    )
    if not rows or [int(part) for part, _ in rows] != list(range(len(rows))):
        return False  # replaced by a newer revision between the two reads
    try:
        cache_dir.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(prefix=".matcher-", suffix=".tmp", dir=cache_dir)
    except OSError:
        return False
    temporary = Path(name)
    try:
        with os.fdopen(fd, "wb") as out:
            for _part, data in rows:
                out.write(zlib.decompress(bytes(data)))
        os.replace(temporary, cache_dir / cache_file)
    except (OSError, zlib.error):
        temporary.unlink(missing_ok=True)
        return False
    return True


def _parts(path: Path) -> Iterator[bytes]:
    """The file's parts, compressed, in order: COMPRESSORS at a time on threads (zlib lets go
    of the GIL), with at most one more part read ahead of them, so memory stays at a few
    parts."""
    from collections import deque  # here: the fetching side (a cold `kb match`) needs neither
    from concurrent.futures import Future, ThreadPoolExecutor

    compress, level = _compressor()
    with open(path, "rb") as fh, ThreadPoolExecutor(COMPRESSORS) as pool:
        pending: deque[Future[bytes]] = deque()
        while chunk := fh.read(PART_BYTES):
            pending.append(pool.submit(compress, chunk, level))
            if len(pending) > COMPRESSORS:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()


def _compressor() -> tuple[Callable[[bytes, int], bytes], int]:
    """The zlib compression the parts are made with, and its level: ISA-L's where it is
    installed (the same format, faster), else the standard library's."""
    try:
        from isal import isal_zlib
    except ImportError:
        return zlib.compress, COMPRESSION_LEVEL
    return isal_zlib.compress, ISAL_LEVEL


def write_parts(path: Path, out: Path) -> None:
    """The parts `store` would make of the cache file at `path`, written to `out` after a
    header naming that file (PARTS_MAGIC, _HEADER), each after its length. On COMPRESSORS
    threads also in the build beside an import: the import has mostly committed by then and
    waits for it (at 150,000 records, 2026-12-04: the import committed at 16.3 s, one
    thread's compression ended at 17.1; two threads take 0.6 s of its 1.1)."""
    with open(out, "wb") as fh:
        fh.write(_header_of(path))
        for part in _parts(path):
            fh.write(_LENGTH.pack(len(part)))
            fh.write(part)


def parts_written_for(path: Path) -> Path:
    """Where the compressed parts of the cache file at `path` are kept when they were made
    with it (PARTS_FILE in its folder)."""
    return path.with_name(PARTS_FILE)


def _written_parts(path: Path, parts: Path) -> list[tuple[int, int]] | None:
    """The (offset, length) of each part in the parts file `parts` made from the cache file at
    `path`, when there is one, whole, and made from that file as it is now; else None."""
    try:
        expected = _header_of(path)
        with open(parts, "rb") as fh:
            header = fh.read(len(expected))
            if header != expected:
                return None
            end = os.fstat(fh.fileno()).st_size
            places: list[tuple[int, int]] = []
            offset = len(header)
            while offset < end:
                fh.seek(offset)
                length_bytes = fh.read(_LENGTH.size)
                if len(length_bytes) != _LENGTH.size:
                    return None
                (length,) = _LENGTH.unpack(length_bytes)
                places.append((offset + _LENGTH.size, length))
                offset += _LENGTH.size + length
    except OSError:
        return None
    return places if offset == end else None


def _header_of(path: Path) -> bytes:
    stat = path.stat()
    return PARTS_MAGIC + _HEADER.pack(stat.st_size, stat.st_mtime_ns, stat.st_ino)


def _read_parts(parts: Path, places: list[tuple[int, int]]) -> Iterator[bytes]:
    with open(parts, "rb") as fh:
        for offset, length in places:
            fh.seek(offset)
            data = fh.read(length)
            if len(data) != length:
                raise OSError(f"{parts}: shorter than its own header says")
            yield data


def store(
    conn: Connection,
    path: Path,
    revision: str,
    format_version: int,
    *,
    replace: bool = False,
    parts: Path | None = None,
    word_lists: Mapping[str, Path] | None = None,
) -> bool:
    """Store the cache file at `path`, built for `revision`, unless the knowledge base has
    moved on or another process stored it first (`replace`: in place of that one, which a
    rebuild does because the stored copy may be what was damaged); older revisions' files are
    removed. Runs in the caller's transaction. True when this call stored it. The file's
    parts are read from `parts` (PARTS_FILE beside it by default) when they were made from
    it, else compressed here. kb search's word lists of the revision go with it
    (kb.shared_words): those at `word_lists`' paths, by default those kept in the file's
    folder."""
    from sqlalchemy import delete, select

    from kb import shared_words
    from kb.db import get_meta
    from kb.models import MATCHER_INDEX as table

    if (get_meta(conn, "revision") or "empty") != revision:
        return False  # an import came in meanwhile: its own build will store its index
    this_file = (table.c.revision == revision) & (table.c.format == format_version)
    if not replace and conn.execute(select(table.c.part).where(this_file).limit(1)).first():
        return False
    conn.execute(delete(table).where((table.c.revision != revision) | this_file))
    parts = parts_written_for(path) if parts is None else parts
    written = _written_parts(path, parts)
    compressed = _read_parts(parts, written) if written is not None else _parts(path)
    for number, data in enumerate(compressed):
        conn.execute(
            table.insert().values(revision=revision, format=format_version, part=number, data=data)
        )
    if word_lists is None:
        word_lists = _kept_word_lists(path.parent, revision)
    shared_words.store(conn, revision, word_lists)
    return True


def _kept_word_lists(cache_dir: Path, revision: str) -> dict[str, Path]:
    """Where kb search's word lists of `revision` are kept in `cache_dir`, by kind (a list
    not kept there is left out of the store)."""
    from kb.spelling import WORD_LISTS, word_list_path

    return {kind: word_list_path(cache_dir, kind, revision) for kind in WORD_LISTS}


def store_quietly(
    engine: Any, path: Path, revision: str, format_version: int, *, replace: bool = False
) -> bool:
    """`store` in its own transaction; a failure (two processes storing at once, a read-only
    role) only means the next machine builds the index itself. The parts written beside the
    file (PARTS_FILE) are removed after: stored, or not needed."""
    from sqlalchemy.exc import SQLAlchemyError

    try:
        with contextlib.suppress(SQLAlchemyError, OSError), engine.begin() as conn:
            return store(conn, path, revision, format_version, replace=replace)
        return False
    finally:
        with contextlib.suppress(OSError):
            parts_written_for(path).unlink(missing_ok=True)
