"""The prefilter's key databases: numbered keys cut into shards, each compiled into a
serialised Hyperscan database in a process of its own.

Hyperscan's compiler holds about 2.3 KB a key at its peak, more than everything else a build
holds; a worker process that compiles one database and exits gives that peak back at once, and
it is the worker's alone, so the build's own memory stays flat and a database can hold more
keys. Fewer, larger databases scan a log faster: each costs a pass over the log. This file is
run by path as the worker (`python -I -S keydb.py`), so it imports nothing of kb.
"""

from __future__ import annotations

import contextlib
import ctypes
import marshal
import os
import sqlite3
import subprocess
import sys
import tempfile
from typing import Any, Final

# The worker's exit status when Hyperscan refused the keys (compile_literals raised; its
# message on stderr); any other failure (no interpreter, killed for memory) compiles the keys
# in this process instead.
REFUSED: Final = 3
# Fewer keys than this are compiled here: their peak is small (about 23 MB), and starting a
# worker (30-60 ms) would cost more than it saves; small knowledge bases never start one.
IN_PROCESS_KEYS: Final = 10_000


def compiled(keys: list[tuple[int, str]]) -> bytes:
    """A serialised Hyperscan database of literal keys (id, key), compiled in a worker
    process (in this one when no worker can run); keys Hyperscan refuses are left out
    (compile_literals), which says when it raises hyperscan.error."""
    return Compiling(keys).result()


class Compiling:
    """A database being compiled by a worker process while the caller goes on; result() waits
    for it. Keys too few for a worker (or with no worker to be had) are compiled at once."""

    def __init__(self, keys: list[tuple[int, str]]) -> None:
        ids = [key_id for key_id, _ in keys]
        expressions = [key.encode("utf-8") for _, key in keys]
        self._blob: bytes | None = None
        self._worker: subprocess.Popen[bytes] | None = None
        self._payload = b""
        worker = os.path.abspath(__file__)
        if len(keys) < IN_PROCESS_KEYS or not sys.executable or not os.path.isfile(worker):
            self._blob = compile_literals(ids, expressions)
            return
        from kb.allocator import helper_env  # here: run as the worker, this file has no kb

        self._payload = marshal.dumps((list(sys.path), ids, expressions))
        del ids, expressions  # the payload is what stays here
        try:
            # The keys reach the worker through an unnamed file, not a pipe: nothing here
            # waits for the worker to read them, and communicate() later reads its output.
            with tempfile.TemporaryFile() as keys_file:
                keys_file.write(self._payload)
                keys_file.seek(0)
                self._worker = subprocess.Popen(
                    [sys.executable, "-I", "-S", worker],
                    stdin=keys_file,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    env=helper_env(),  # Hyperscan's compiler on mimalloc (kb.allocator)
                )
        except OSError:  # no worker to be had: compiled here when the result is asked for
            self._worker = None

    def abandon(self) -> None:
        """Stop the worker (a build that failed): it must not wait on its output forever."""
        if self._worker is not None:
            self._worker.kill()
            self._worker.communicate()
            self._worker = None

    def result(self) -> bytes:
        if self._blob is not None:
            return self._blob
        if self._worker is not None:
            out, err = self._worker.communicate()
            status = self._worker.returncode
            self._worker = None
            if status == 0:
                self._blob = out
                return out
            if status == REFUSED:
                import hyperscan

                raise hyperscan.error(err.decode("utf-8", "replace").strip())
        _, ids, expressions = marshal.loads(self._payload)
        self._blob = compile_literals(ids, expressions)
        return self._blob


def compile_literals(ids: list[int], expressions: list[bytes]) -> bytes:
    """The database of `expressions` (literal bytes) with their `ids`, serialised.

    A key Hyperscan refuses is left out, not the build failed: one record's key must not cost
    every record its matching (a NUL at the start of a message once did, kb.patterns). None
    is known to be refused now (keys are cut at NULs and line breaks, never empty, and of
    bounded length); a pattern whose key is left out is no longer found through it. Raises
    hyperscan.error when every key is refused, or the keys it accepts one half at a time are
    refused together (a limit of the whole set, which no key's leaving out would mend)."""
    import hyperscan

    try:
        return _database(ids, expressions)
    except hyperscan.error:
        kept = _accepted_among_refused(list(zip(ids, expressions, strict=True)))
        if not kept:
            raise
        return _database([key_id for key_id, _ in kept], [key for _, key in kept])


def _database(ids: list[int], expressions: list[bytes]) -> bytes:
    import hyperscan

    db: Any = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
    db.compile(
        expressions=expressions,
        ids=ids,
        elements=len(expressions),
        flags=[0] * len(expressions),
        literal=True,
    )
    return bytes(hyperscan.dumpb(db))


def _accepted_among_refused(keys: list[tuple[int, bytes]]) -> list[tuple[int, bytes]]:
    """The keys Hyperscan accepts among `keys`, which it refused together, found by halves: a
    half it compiles is kept whole, so a few refused keys among n cost about 2n keys'
    compiling, not n compiles."""
    import hyperscan

    if len(keys) < 2:
        return []
    halves = keys[: len(keys) // 2], keys[len(keys) // 2 :]
    kept: list[tuple[int, bytes]] = []
    for half in halves:
        try:
            _database([key_id for key_id, _ in half], [key for _, key in half])
        except hyperscan.error:
            kept += _accepted_among_refused(half)
        else:
            kept += half
    return kept


class ShardWriter:
    """Numbers keys, writes them to the keys table and compiles every `size` of them into one
    Hyperscan database (a row of shards), so a build holds one shard's keys at a time. A
    shard compiles in a worker process while the build goes on (the next shard's keys, the
    lookup, the templates), one worker at a time; `done` waits for the last."""

    def __init__(self, con: sqlite3.Connection, size: int) -> None:
        self.con = con
        self.size = size
        self.rows: list[tuple[int, str, str, bytes | None]] = []
        self.kinds: list[str] = []
        self.shards = 0
        self.bytes = 0  # of the databases written
        self._compiling: Compiling | None = None

    def add(self, key: str, kind: str, patterns: str, anchor: bytes | None) -> None:
        """One key; `anchor` is anchor_of(key)."""
        self.rows.append((len(self.kinds), key, patterns, anchor))
        self.kinds.append(kind)
        if len(self.rows) >= self.size:
            self.flush()

    def flush(self) -> None:
        if not self.rows:
            return
        self.con.executemany("INSERT INTO keys VALUES (?,?,?,?)", self.rows)
        keys = [(key_id, key) for key_id, key, *_ in self.rows]
        self.rows.clear()
        self.done()
        self._compiling = Compiling(keys)

    def abandon(self) -> None:
        if self._compiling is not None:
            self._compiling.abandon()
            self._compiling = None

    def done(self) -> None:
        """The shard still compiling, written (if one is)."""
        if self._compiling is None:
            return
        blob = self._compiling.result()
        self._compiling = None
        self.con.execute("INSERT INTO shards VALUES (?, ?)", (self.shards, blob))
        self.shards += 1
        self.bytes += len(blob)
        del blob
        release_memory()


def release_memory() -> None:
    """Hand the memory a shard's compile freed back to the system. glibc keeps it otherwise,
    fragmented by what is allocated in between, and each later shard's peak starts higher."""
    with contextlib.suppress(OSError, AttributeError):  # not glibc: nothing to do
        ctypes.CDLL("libc.so.6").malloc_trim(0)


def _worker() -> None:
    """Read (sys.path, ids, expressions) from stdin, write the database to stdout."""
    path, ids, expressions = marshal.load(sys.stdin.buffer)
    sys.path[:0] = path  # where the parent found hyperscan (-I -S left only the stdlib)
    import hyperscan

    try:
        blob = compile_literals(ids, expressions)
    except hyperscan.error as exc:
        sys.stderr.write(str(exc))
        sys.exit(REFUSED)
    sys.stdout.buffer.write(blob)


if __name__ == "__main__":
    _worker()
