"""The kernel's read-ahead on the ranker's memory map of the SQLite file (Linux).

The ranker's connections map the database file (kb.ranking, kb.config.SEARCH_MMAP_PRAGMA) and
read pages scattered over it. Where they are not in the page cache yet (after a reboot, or once
other files pushed them out), each page fault reads the disk's whole read-ahead window around
its page: 8 MB on this machine's disk. `madvise(MADV_RANDOM)` on the map turns that off (a
fault then reads its own 4 KB), and pages the cache holds are mapped as before. The first
search of "Unrecognized model identifier" at a million records, the page cache dropped before
it (2026-12-06): 1,993 MB read from disk in 1.04-1.59 s with every connection of the search
mapped and none advised; 231 MB in 0.36 s with the ranker's map advised; 73 MB in 0.15 s with
it advised and the search's other connection not mapped, as now (kb.config says why).
`posix_fadvise(POSIX_FADV_RANDOM)` on the file does not reach a map (2,000 scattered pages
read through one: 4,008 MB from disk with it, 4,014 without, 8 MB advised).
"""

from __future__ import annotations

import os
import sys
from functools import cache
from typing import Any, Final

MADV_RANDOM: Final = 1  # <sys/mman.h> on Linux

# A read that maps the file into a fresh connection: SQLite maps it, whole up to the pragma's
# limit, at the first page it reads through the map after SEARCH_MMAP_PRAGMA (kb.config), and
# page 1 (the schema's) never is: the records table's first row is on another.
FIRST_READ: Final = "SELECT key FROM records LIMIT 1"


def advise_random(path: str | os.PathLike[str]) -> int:
    """Advise every map of the file at `path` in this process as read at random; how many
    maps were advised (0 where there is none, or where it cannot be done: not Linux)."""
    if not sys.platform.startswith("linux"):
        return 0
    try:
        stat = os.stat(path)
        real = os.fsencode(os.path.realpath(path))
        with open("/proc/self/maps", "rb") as maps:
            lines = maps.read().splitlines()
    except OSError:
        return 0
    ranges = maps_of(lines, real, (os.major(stat.st_dev), os.minor(stat.st_dev)), stat.st_ino)
    if not ranges:
        return 0
    madvise = _madvise()
    return sum(1 for start, length in ranges if madvise(start, length, MADV_RANDOM) == 0)


def maps_of(
    lines: list[bytes], path: bytes, device: tuple[int, int], inode: int
) -> list[tuple[int, int]]:
    """(start, length) of each map of one file among /proc/self/maps' lines (`start-end perms
    offset major:minor inode path`), known by its path or by its device and inode: an
    overlay file system may show either the file's own or the one beneath."""
    found: list[tuple[int, int]] = []
    for line in lines:
        fields = line.split(maxsplit=5)
        if len(fields) < 6:
            continue  # an anonymous map
        try:
            major, minor = (int(part, 16) for part in fields[3].split(b":"))
            same = fields[5] == path or ((major, minor) == device and int(fields[4]) == inode)
            if same:
                start, end = (int(part, 16) for part in fields[0].split(b"-"))
                found.append((start, end - start))
        except ValueError:
            continue
    return found


@cache
def _madvise() -> Any:
    import ctypes  # here: only a search that maps a file pays for it (about 2 ms)

    function = ctypes.CDLL(None, use_errno=True).madvise
    function.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
    function.restype = ctypes.c_int
    return function
