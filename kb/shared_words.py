"""kb search's word lists (kb.spelling) shared through the database, beside the matcher index
(kb.shared_index): whoever builds the index for a revision stores the lists it collected on
the way, and a search whose cache folder has none for the revision reads them (one SELECT)
instead of collecting them from every record. Standard library only on the reading side (the
cold `kb search` runs without SQLAlchemy).
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from sqlalchemy import Connection

TABLE: Final = "word_lists"  # kb/models.py WORD_LISTS
# zlib level 1: 1M records' vocabulary (3.3 MB) becomes 1.41 MB in 41 ms, in the import's
# last transaction, and is read back in 12 ms; level 6 makes it 1.24 MB in 252 ms, read back
# no faster (11 ms) (2026-12-06).
COMPRESSION_LEVEL: Final = 1

Rows = Callable[..., list[tuple[Any, ...]]]


def fetch(run: Rows, kind: str, revision: str) -> str | None:
    """The `kind` list of `revision` as stored (one word a line), or None when the database
    holds none for it (or one that cannot be read: it is then collected again)."""
    rows = run(f"SELECT data FROM {TABLE} WHERE revision = ? AND kind = ?", (revision, kind))
    if not rows:
        return None
    try:
        return zlib.decompress(bytes(rows[0][0])).decode("utf-8")
    except (zlib.error, UnicodeDecodeError):
        return None


def store(conn: Connection, revision: str, lists: Mapping[str, Path]) -> None:
    """Store the word lists at `lists`' paths (by kind) as `revision`'s, in the caller's
    transaction, in place of any stored for it; other revisions' lists are removed. A list
    that cannot be read (not written, say) is left out: a search collects it."""
    from sqlalchemy import delete

    from kb.models import WORD_LISTS as table

    compressed: dict[str, bytes] = {}
    for kind, path in lists.items():
        try:
            compressed[kind] = zlib.compress(path.read_bytes(), COMPRESSION_LEVEL)
        except OSError:
            continue
    conn.execute(delete(table).where((table.c.revision != revision) | table.c.kind.in_(compressed)))
    for kind, data in compressed.items():
        conn.execute(table.insert().values(revision=revision, kind=kind, data=data))
