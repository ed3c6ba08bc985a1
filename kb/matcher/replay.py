"""A log that can be matched a second time, for when the matcher cache turns out damaged
half-way through a match (kb.matcher.cache.CacheDamaged): the cache is rebuilt and the log
read again. Text and bytes are simply kept; a stream (a pipe, a paste) keeps the bytes it
has handed out, up to REPLAY_BYTES, and is read again as those followed by the rest.
"""

from __future__ import annotations

import os
from typing import IO, Any, Final

# A damaged cache is usually found on the first block of a log; past this much read, the
# log is not kept (a 1 GB log streams through in ~130 MB) and the match must be run again.
REPLAY_BYTES: Final = 16 << 20

Log = str | bytes | IO[bytes] | IO[str] | os.PathLike[str]


class Replayable:
    """One log, readable again after a failed match."""

    def __init__(self, log: Log) -> None:
        self._log = log
        self._kept: list[Any] = []
        self._kept_size = 0
        self._overflowed = False
        self._start: int | None = None
        if not isinstance(log, str | bytes | os.PathLike):
            try:
                self._start = log.tell() if log.seekable() else None
            except (OSError, ValueError, AttributeError):
                self._start = None

    @classmethod
    def wrap(cls, log: Log) -> Replayable:
        return cls(log)

    def stream(self) -> Log:
        """What the matcher reads the first time."""
        if isinstance(self._log, str | bytes | os.PathLike) or self._start is not None:
            return self._log
        return _Keeping(self)  # type: ignore[return-value]

    def again(self, error: Exception) -> Log:
        """What the matcher reads the second time; `error` raised when that cannot be had."""
        log = self._log
        if isinstance(log, str | bytes | os.PathLike):
            return log
        if self._start is not None:
            log.seek(self._start)
            return log
        if self._overflowed:
            raise error
        return _Again(self._kept, log)  # type: ignore[return-value]

    def _keep(self, chunk: Any) -> None:
        if self._overflowed:
            return
        self._kept_size += len(chunk)
        if self._kept_size > REPLAY_BYTES:
            self._overflowed = True
            self._kept.clear()
        else:
            self._kept.append(chunk)


class _Keeping:
    """The stream, with what it hands out kept for a second reading."""

    def __init__(self, owner: Replayable) -> None:
        self._owner = owner
        self._raw: Any = owner._log

    def read(self, size: int = -1, /) -> Any:
        chunk = self._raw.read(size)
        self._owner._keep(chunk)
        return chunk

    def isatty(self) -> bool:  # a terminal's paste ends at the first short read (kb.logtext)
        return _isatty(self._raw)


class _Again:
    """What was kept, then the rest of the stream."""

    def __init__(self, kept: list[Any], raw: Any) -> None:
        self._kept = list(kept)
        self._raw = raw

    def read(self, size: int = -1, /) -> Any:
        while self._kept:
            chunk = self._kept.pop(0)
            if chunk:
                if 0 <= size < len(chunk):
                    self._kept.insert(0, chunk[size:])
                    chunk = chunk[:size]
                return chunk
        return self._raw.read(size)

    def isatty(self) -> bool:
        return _isatty(self._raw)


def _isatty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False
