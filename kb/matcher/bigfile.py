"""Whether a log file is big enough to be matched in two parts (kb.matcher.split) and scanned
ahead by a helper (kb.matcher.prescan): a few system calls, importable before anything else
loads (the `kb` program asks before click does, kb.cli.program).
"""

from __future__ import annotations

import codecs
import os
import stat
import sys
import threading
from typing import Final

# A log smaller than this is matched in one pass: planning the cut, loading the databases
# before the fork, the child's own first reads of the cache and the merge cost about what half
# of a small log's Python work saves (at 150,000 records the first 8.5 MB of big.log 0.231 s
# in two parts against 0.228 in one, 12 MB 0.254 against 0.265, 15 pairs each).
SPLIT_MIN_BYTES: Final = 16 << 20
UTF16_BOMS: Final = (codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)


def big_enough(path: str) -> bool:
    """Whether the file at `path` is SPLIT_MIN_BYTES or more (a first look, before opening it)."""
    try:
        return os.stat(path).st_size >= SPLIT_MIN_BYTES
    except (OSError, ValueError):
        return False


def cuttable(fd: int, start: int = 0) -> int | None:
    """The end of the log file open on `fd` (read from `start`) when this process may cut it in
    two: Linux, two processors or more, no other thread (a server's threads are never forked),
    a regular file of SPLIT_MIN_BYTES or more from `start`, not UTF-16 (decoded whole,
    kb.logtext: its line ends are not b"\\n"). None otherwise, or when the file cannot be read."""
    if not sys.platform.startswith("linux") or threading.active_count() != 1:
        return None
    try:
        if len(os.sched_getaffinity(0)) < 2:
            return None
        found = os.fstat(fd)
        end = found.st_size
        if not stat.S_ISREG(found.st_mode) or end - start < SPLIT_MIN_BYTES:
            return None
        if os.pread(fd, 2, start).startswith(UTF16_BOMS):
            return None
    except OSError:
        return None
    return end
