"""The near-miss templates as the matcher cache stores them, and the store a near miss reads
them through, a stretch at a time.

A template's place is the order the build first met it in: the words table lists places, and
a template's pattern and length are looked up by place. The text itself is stored sorted by
length (in characters), so the templates that a log line of some length can resemble at all
(length_window) are one stretch of the blob, read and decoded alone: at a million records
every template read whole took 300 ms of a cold near miss (the blob's 42 MB read, decoded
and split), and a reworded message of a usual length needs about half of them.
"""

from __future__ import annotations

import array
import bisect
import math
import sys
from collections.abc import Callable, Iterable, Sequence
from typing import Final, overload

# Templates are stored one a line (UTF-8): kb.matcher.cache.normalize_template leaves no line
# break in a template.
TEMPLATE_SEPARATOR: Final = "\n"
# The integer lists (places, patterns, lengths, byte ends) are 4-byte little-endian each: the
# file travels between machines through the database, and 42 MB of templates need 32 bits.
ITEM_BYTES: Final = 4
# ... stored ROW_ITEMS to a row: a near miss reads a few items of three of them, and in one
# blob a read at an offset walks the blob's pages from its start (13 ms for one item of a
# million records' list, as long as reading it whole). A row is 2 KB (half of it on an
# overflow page: the table is WITHOUT ROWID).
ROW_ITEMS: Final = 512
_ITEM: Final = next(code for code in "IL" if array.array(code).itemsize == ITEM_BYTES)


def ints_blob(values: Iterable[int]) -> bytes:
    items = array.array(_ITEM, values)
    if sys.byteorder == "big":
        items.byteswap()
    return items.tobytes()


def ints_of(blob: bytes, what: str) -> Sequence[int]:
    """A blob of ints as an array, not a list: a list of 693,930 ints took 68 ms more to make."""
    if len(blob) % ITEM_BYTES:
        raise ValueError(f"the fuzzy row's {what} are cut short")
    items = array.array(_ITEM)
    items.frombytes(blob)
    if sys.byteorder == "big":
        items.byteswap()
    return items


def length_window(
    query_chars: int, score: float, prefix_chars: int | None = None
) -> tuple[int, int | None]:
    """The template lengths, (shortest, longest or None for no limit), at which a template's
    similarity (rapidfuzz's fuzz.ratio, Indel) with a line of `query_chars` characters can
    reach `score` (0-100). Of two texts of a and b characters at most min(a, b) agree, so the
    similarity is at most 200 * min(a, b) / (a + b). Rounded outwards: one length too many
    costs one comparison, one too few a wrong answer. With `prefix_chars`, templates are
    compared by their first `prefix_chars` characters: a longer one counts as that long."""
    if score <= 0:
        return 0, None
    shortest = max(0, math.floor(score * query_chars / (200 - score)))
    longest = math.ceil(query_chars * (200 - score) / score)
    if prefix_chars is not None and longest >= prefix_chars:
        return shortest, None
    return shortest, longest


class LazyInts(Sequence[int]):
    """A list of ints read as its items are asked for, `read(start, stop)` giving items
    [start, stop): a near miss needs a few items of most template lists, and at a million
    records reading one whole took 15-20 ms."""

    def __init__(self, count: int, read: Callable[[int, int], Sequence[int]]) -> None:
        self._count, self._read = count, read
        # the rows read for single items, kept: a bisection asks for the same middles first
        self._rows: dict[int, Sequence[int]] = {}

    def __len__(self) -> int:
        return self._count

    @overload
    def __getitem__(self, index: int) -> int: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[int]: ...

    def __getitem__(self, index: int | slice) -> int | Sequence[int]:
        if isinstance(index, slice):
            start, stop, step = index.indices(self._count)
            if step != 1:
                raise ValueError("the items are read one stretch at a time")
            return self._read(start, stop) if stop > start else []
        if index < 0:
            index += self._count
        if not 0 <= index < self._count:
            raise IndexError(index)
        row, at = divmod(index, ROW_ITEMS)
        items = self._rows.get(row)
        if items is None:
            start = row * ROW_ITEMS
            items = self._rows[row] = self._read(start, min(start + ROW_ITEMS, self._count))
        return items[at]


class TemplateStore:
    """The templates of one cache: their patterns and lengths by place, their text by length
    (`read(begin, end, count)` decodes the `count` templates stored in bytes [begin, end)),
    decoded a stretch at a time as windows ask for them, and kept; `chars`: their characters
    in all."""

    def __init__(
        self,
        *,
        patterns: Sequence[int],
        lengths: Sequence[int],
        by_length: Sequence[int],
        ends: Sequence[int],
        chars: int,
        read: Callable[[int, int, int], list[str]],
    ) -> None:
        if not len(patterns) == len(lengths) == len(by_length) == len(ends):
            raise ValueError("the fuzzy row's lists disagree in length")
        self.patterns, self.lengths = patterns, lengths
        self._by_length, self._ends, self._read = by_length, ends, read
        self._start = 0  # the decoded stretch: positions [_start, _start + len(_texts))
        self._texts: list[str] = []
        self.average_chars = chars / len(lengths) if lengths else 1.0

    def __len__(self) -> int:
        return len(self.patterns)

    def positions(self, shortest: int, longest: int | None) -> tuple[int, int]:
        """The positions in length order, [start, stop), of the templates of these lengths."""
        length = self.lengths.__getitem__
        start = bisect.bisect_left(self._by_length, shortest, key=length)
        if longest is None:
            return start, len(self._by_length)
        return start, max(start, bisect.bisect_right(self._by_length, longest, key=length))

    def place(self, position: int) -> int:
        return self._by_length[position]

    def places(self, start: int, stop: int) -> Sequence[int]:
        """The places of the templates at positions [start, stop) in length order."""
        return self._by_length[start:stop]

    def texts(self, start: int, stop: int) -> list[str]:
        """The templates at positions [start, stop) in length order."""
        if stop <= start:
            return []
        have_start, have_stop = self._start, self._start + len(self._texts)
        if not self._texts:
            self._start, self._texts = start, self._decode(start, stop)
        else:
            if start < have_start:
                self._texts = self._decode(start, have_start) + self._texts
                self._start = start
            if stop > have_stop:
                self._texts += self._decode(have_stop, stop)
        offset = start - self._start
        return self._texts[offset : offset + stop - start]

    def _decode(self, start: int, stop: int) -> list[str]:
        begin = 0 if start == 0 else self._ends[start - 1] + len(TEMPLATE_SEPARATOR)
        return self._read(begin, self._ends[stop - 1], stop - start)
