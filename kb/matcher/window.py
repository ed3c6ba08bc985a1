"""The lines of a log kept in memory during a match: a block, with the tail of the one before
it in front (rows are logical lines of the whole log, 0-based)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final, overload

from kb.logtext import LineBlock

# Lines of earlier blocks kept for context (tracebacks above a message, messages split over lines).
CARRY_LINES: Final = 160
# ... and at most this many characters of them (a log's lines are seldom over a few KB).
CARRY_CHARS: Final = 1 << 20


class Window:
    """The lines kept in memory: a block, with the tail of the one before it in front."""

    def __init__(self) -> None:
        self.first_row = 0  # the row of lines[0]
        self.lines: list[str] = []
        # each line's first line in the original log (1-based), and its last (a wrapped line
        # spans several)
        self.line_nos = LineNumbers([], [])
        self.end_nos = LineNumbers([], [])

    def advance(self, block: LineBlock) -> list[str]:
        """Move on to the next block, keeping CARRY_LINES of this one in front of it for
        context; returns the lines kept."""
        carry = min(CARRY_LINES, len(self.lines))
        # ... and at most CARRY_CHARS of them: a line of 16 MB, 160 times, once held 2.5 GB
        kept_chars = 0
        for back in range(1, carry + 1):
            kept_chars += len(self.lines[-back])
            if kept_chars > CARRY_CHARS:
                carry = back - 1
                break
        new_nos: Sequence[int] = (
            block.first
            if block.first is not None
            else range(block.base, block.base + len(block.lines))
        )
        new_ends = block.last if block.last is not None else new_nos
        self.first_row += len(self.lines) - carry
        kept = self.lines[len(self.lines) - carry :]
        self.lines = kept + block.lines
        self.line_nos = LineNumbers(self.line_nos[len(self.line_nos) - carry :], new_nos)
        self.end_nos = LineNumbers(self.end_nos[len(self.end_nos) - carry :], new_ends)
        return kept

    def line_at(self, row: int) -> str | None:
        """A row's text while it is in the window."""
        index = row - self.first_row
        return self.lines[index] if 0 <= index < len(self.lines) else None


class LineNumbers(Sequence[int]):
    """The carried lines' numbers, then the block's (a range where its lines are the log's
    own): a block's 30,000 numbers made into a list cost a millisecond and a half, twice, and
    only the few lines the matcher reports on are asked for."""

    __slots__ = ("_head", "_tail")

    def __init__(self, head: list[int], tail: Sequence[int]) -> None:
        self._head = head
        self._tail = tail

    def __len__(self) -> int:
        return len(self._head) + len(self._tail)

    @overload
    def __getitem__(self, index: int) -> int: ...
    @overload
    def __getitem__(self, index: slice) -> list[int]: ...
    def __getitem__(self, index: int | slice) -> int | list[int]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        if index < 0:
            index += len(self)
        head = len(self._head)
        if index < head:
            if index < 0:
                raise IndexError("line number index out of range")
            return self._head[index]
        return self._tail[index - head]
