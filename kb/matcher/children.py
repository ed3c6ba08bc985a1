"""Child processes whose work is done, reaped once they are gone, not waited for.

A child of `kb match` (a big log's prefilter helper, kb.matcher.prescan; the second part of a
split match, kb.matcher.split) has sent all it had when its pipe ends; its exit, the kernel
freeing the memory it mapped or copied, then takes milliseconds more (5-7 ms for a part of
big.log at 150,000 and 1M records, up to 3 ms for the helper, 2026-12-05 and 2026-12-06) that
the parent spent waiting for it before going on. Each `reap_later` reaps those gone by then, and
the process those left at its exit.
"""

from __future__ import annotations

import atexit
import contextlib
import os

_exiting: list[int] = []


def reap_later(pid: int) -> None:
    """`pid` (a child that sent all it had) reaped when it is gone; those gone now, reaped."""
    _exiting.append(pid)
    for child in list(_exiting):
        try:
            gone, _status = os.waitpid(child, os.WNOHANG)
        except ChildProcessError:  # reaped by someone else (a caller's own waitpid(-1))
            gone = child
        if gone:
            _exiting.remove(child)


def reap_children() -> None:
    """Wait for every child left to reap (at exit, or when a caller wants none left)."""
    while _exiting:
        with contextlib.suppress(ChildProcessError):
            os.waitpid(_exiting[-1], 0)
        _exiting.pop()


atexit.register(reap_children)  # nothing to do unless a match left a child exiting
