"""The near-miss rows of the matcher cache, written at the end of a build: the templates in
kb.matcher.templates's layout (one blob sorted by length, and the lists of ints beside it) and
the words table, each from the temporary tables kb.matcher.build's row writer filled as the
records came in (`fz`: each distinct template with its pattern and length, in the order first
met; `tw`: a chunk's words with how many of its templates hold each, and their places).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from typing import Final

from kb.matcher.templates import ROW_ITEMS, TEMPLATE_SEPARATOR, ints_blob

# A word held by more than this share of the templates (and WORD_LISTED_MIN of them) is not
# listed in the words table: it shortlists nothing, and its list would be most of the table.
WORD_LISTED_SHARE: Final = 0.03
WORD_LISTED_MIN: Final = 500


def write_templates(con: sqlite3.Connection, chunk_rows: int) -> None:
    """The fuzzy row (kb.matcher.templates): fz's templates sorted by length (then by place),
    written a chunk of rows at a time into a blob of its final size (memory stays flat; at a
    million records the templates are 42 MB), with their count and characters in all; and
    their lists in fuzzy_ints: each one's byte end and place in length order, each place's
    length and pattern. A template's place is its rowid - 1: fz only grows, and a template it
    holds already takes no rowid. Read `chunk_rows` rows at a time."""
    count, size, chars = con.execute(
        "SELECT count(*), coalesce(sum(length(CAST(t AS BLOB))), 0), coalesce(sum(n), 0) FROM fz"
    ).fetchone()
    separator = TEMPLATE_SEPARATOR.encode()
    con.execute(
        "INSERT INTO fuzzy (rowid, templates, count, chars) VALUES (1, zeroblob(?), ?, ?)",
        (size + len(separator) * max(count - 1, 0), count, chars),
    )
    ends, by_length = _IntRows(con, "ends"), _IntRows(con, "by_length")
    with con.blobopen("fuzzy", "templates", 1) as templates:
        rows = con.execute("SELECT rowid - 1, t FROM fz ORDER BY n, rowid")
        end = -len(separator)
        while chunk := rows.fetchmany(chunk_rows):
            encoded = [t.encode() for _place, t in chunk]
            templates.write((b"" if end < 0 else separator) + separator.join(encoded))
            chunk_ends = []
            for text in encoded:
                end += len(separator) + len(text)
                chunk_ends.append(end)
            ends.add(chunk_ends)
            by_length.add(place for place, _t in chunk)
    lengths, patterns = _IntRows(con, "lengths"), _IntRows(con, "patterns")
    rows = con.execute("SELECT n, p FROM fz ORDER BY rowid")
    while chunk := rows.fetchmany(chunk_rows):
        lengths.add(n for n, _p in chunk)
        patterns.add(p for _n, p in chunk)
    for written in (ends, by_length, lengths, patterns):
        written.close()


class _IntRows:
    """One of the near-miss lists of ints, written to fuzzy_ints ROW_ITEMS to a row."""

    def __init__(self, con: sqlite3.Connection, name: str) -> None:
        self._con, self._name = con, name
        self._pending: list[int] = []
        self._part = 0

    def add(self, values: Iterable[int]) -> None:
        self._pending += values
        full = len(self._pending) - len(self._pending) % ROW_ITEMS
        self._write(self._pending[:full])
        del self._pending[:full]

    def close(self) -> None:
        self._write(self._pending)
        self._pending = []

    def _write(self, values: list[int]) -> None:
        rows = []
        for start in range(0, len(values), ROW_ITEMS):
            rows.append((self._name, self._part, ints_blob(values[start : start + ROW_ITEMS])))
            self._part += 1
        self._con.executemany("INSERT INTO fuzzy_ints VALUES (?, ?, ?)", rows)


def write_words(con: sqlite3.Connection, templates: int) -> None:
    """The words table, from the rows _RowWriter listed in `tw` chunk by chunk (a word, how
    many of the chunk's templates hold it, and their places in the fuzzy table's order):
    each word with how many templates hold it and, unless too many do, which, its chunks'
    lists joined in their order, grouped by SQLite so memory stays flat."""
    listed = max(WORD_LISTED_MIN, int(templates * WORD_LISTED_SHARE))
    con.execute(
        """
        INSERT INTO words
        SELECT w, SUM(n), CASE WHEN SUM(n) <= ? THEN '[' || group_concat(r, ',') || ']' END
        FROM (SELECT w, n, r FROM tw ORDER BY w, rowid) GROUP BY w
        """,
        (listed,),
    )
    con.execute("DROP TABLE tw")
