"""The lines of a log kept in memory during a match: a block, with the tail of the one before
it in front (rows are logical lines of the whole log, 0-based)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

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
        self.line_nos: list[int] = []  # each line's first line in the original log (1-based)
        self.end_nos: list[int] = []  # ... and its last (a wrapped line spans several)

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
        self.line_nos = self.line_nos[len(self.line_nos) - carry :] + list(new_nos)
        self.end_nos = self.end_nos[len(self.end_nos) - carry :] + list(new_ends)
        return kept

    def line_at(self, row: int) -> str | None:
        """A row's text while it is in the window."""
        index = row - self.first_row
        return self.lines[index] if 0 <= index < len(self.lines) else None
