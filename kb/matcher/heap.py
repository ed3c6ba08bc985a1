"""The C heap of a one-shot big match on transparent huge pages.

A cold `kb match` of a big log puts 100-200 MB into memory the C library takes fresh from the
kernel: the prefilter's databases read from the cache and deserialised (75 MB each way at 1M
records), the log's blocks read and decoded. Linux hands that memory over one 4 KB page at a
time, one page fault each: about 70,000 faults and 0.2 s of system time for big.log at 1M
records. Grown once by HEAP_PAD and advised as huge pages (madvise MADV_HUGEPAGE, which Linux
honours in its default `madvise` mode of transparent huge pages), the heap takes the same
memory 2 MB at a time, and glibc keeps the allocations of a few megabytes there instead of a
mapping of their own each.

Measured (2026-12-05, cold `kb match --json` of big.log, whole processes in turns, 20 pairs
each): at 1M records 0.384 s against 0.433 (faults 70,900 -> 26,400), at 150,000 records 0.251
against 0.269; peak RSS 180 -> 191 and 91 -> 104 MB. On the VM measured, about one run in eight
was slower instead (system time up by 60-70 ms, the same faults): most likely the host backing
memory the guest had never touched (benchmarks/HISTORY.md, that day's by-hand section).

The settings last for the process, so only a process that ends after its match asks for them
(`kb match` of a file big enough to be split, kb.matcher.split); only on Linux with glibc. Any
failure leaves the allocator as it was, or as far as it got: the match is the same, only slower.
"""

from __future__ import annotations

import ctypes
import sys
from typing import Final

# glibc's mallopt parameters (malloc.h).
M_TRIM_THRESHOLD: Final = -1
M_TOP_PAD: Final = -2
M_MMAP_THRESHOLD: Final = -3
# What the heap grows by at once: a big match at 1M records holds about 150 MB at its peak
# (the databases, a blob being read, the log's blocks), all of it on huge pages from the start.
HEAP_PAD: Final = 256 << 20
# Allocations below this come from the heap, not from a mapping of their own, whose pages
# would be small ones and handed back at every free: a shard's blob and database (10-12 MB)
# and a block of the log. glibc's largest allowed value on 64-bit systems.
MMAP_THRESHOLD: Final = 32 << 20
# The heap is never handed back: the process ends after its match.
TRIM_THRESHOLD: Final = 1 << 30
# One allocation past what the heap holds free, so that it grows now, by HEAP_PAD.
GROW_BYTES: Final = 16 << 20
HUGE_PAGE: Final = 2 << 20  # x86-64's and arm64's transparent huge page
MADV_HUGEPAGE: Final = 14
MAPS: Final = "/proc/self/maps"


def on_huge_pages() -> bool:
    """Grow the C heap by HEAP_PAD and advise it as huge pages, keep allocations of up to
    MMAP_THRESHOLD on it and never trim it. True when the heap was advised."""
    if sys.platform != "linux":
        return False
    try:
        libc = ctypes.CDLL(None)
        if not hasattr(libc, "gnu_get_libc_version"):  # musl and others: no such settings
            return False
        for param, value in (
            (M_MMAP_THRESHOLD, MMAP_THRESHOLD),
            (M_TRIM_THRESHOLD, TRIM_THRESHOLD),
            (M_TOP_PAD, HEAP_PAD),
        ):
            if not libc.mallopt(param, value):
                return False
        libc.malloc.restype = ctypes.c_void_p
        libc.malloc.argtypes = [ctypes.c_size_t]
        libc.free.argtypes = [ctypes.c_void_p]
        libc.free(libc.malloc(GROW_BYTES))
        span = heap_span(MAPS)
        if span is None:
            return False
        start, end = _huge_aligned(*span)
        if end <= start:
            return False
        libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
        return bool(libc.madvise(start, end - start, MADV_HUGEPAGE) == 0)
    except (OSError, AttributeError, ValueError):  # no C library to be had, or not this one
        return False


def heap_span(maps: str) -> tuple[int, int] | None:
    """The heap's start and end addresses in a /proc/PID/maps file (its mappings are one
    until parts of it are advised differently)."""
    spans = []
    with open(maps, encoding="ascii", errors="replace") as lines:
        for line in lines:
            if line.rstrip().endswith("[heap]"):
                start, _, end = line.split(maxsplit=1)[0].partition("-")
                spans.append((int(start, 16), int(end, 16)))
    return (spans[0][0], spans[-1][1]) if spans else None


def _huge_aligned(start: int, end: int) -> tuple[int, int]:
    """The whole huge pages within start..end."""
    return -(-start // HUGE_PAGE) * HUGE_PAGE, end // HUGE_PAGE * HUGE_PAGE
