"""Literal keys compiled into a serialised Hyperscan database, in a process of its own.

Hyperscan's compiler holds about 2.3 KB a key at its peak, more than everything else a build
holds; a worker process that compiles one database and exits gives that peak back at once, and
it is the worker's alone, so the build's own memory stays flat and a database can hold more
keys. Fewer, larger databases scan a log faster: each costs a pass over the log. This file is
run by path as the worker (`python -I -S keydb.py`), so it imports nothing of kb.
"""

from __future__ import annotations

import marshal
import os
import subprocess
import sys
from typing import Any, Final

# The worker's exit status when Hyperscan refused the keys (its message on stderr); any other
# failure (no interpreter, killed for memory) compiles the keys in this process instead.
REFUSED: Final = 3
# Fewer keys than this are compiled here: their peak is small (about 23 MB), and starting a
# worker (30-60 ms) would cost more than it saves; small knowledge bases never start one.
IN_PROCESS_KEYS: Final = 10_000


def compiled(keys: list[tuple[int, str]]) -> bytes:
    """A serialised Hyperscan database of literal keys (id, key), compiled in a worker
    process (in this one when no worker can run). Raises hyperscan.error if Hyperscan refuses
    them."""
    ids = [key_id for key_id, _ in keys]
    expressions = [key.encode("utf-8") for _, key in keys]
    worker = os.path.abspath(__file__)
    if len(keys) < IN_PROCESS_KEYS or not sys.executable or not os.path.isfile(worker):
        return compile_literals(ids, expressions)
    payload = marshal.dumps((list(sys.path), ids, expressions))
    del expressions  # the worker has them now; the payload is what stays here
    try:
        done = subprocess.run(
            [sys.executable, "-I", "-S", worker],
            input=payload,
            capture_output=True,
            check=False,
        )
    except OSError:
        done = None
    if done is not None and done.returncode == 0:
        return done.stdout
    if done is not None and done.returncode == REFUSED:
        import hyperscan

        raise hyperscan.error(done.stderr.decode("utf-8", "replace").strip())
    _, ids, expressions = marshal.loads(payload)
    return compile_literals(ids, expressions)


def compile_literals(ids: list[int], expressions: list[bytes]) -> bytes:
    """The database of `expressions` (literal bytes) with their `ids`, serialised."""
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
