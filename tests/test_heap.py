"""The C heap of a one-shot big match on transparent huge pages (kb.matcher.heap)."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest

from kb.matcher import heap
from tests.conftest import SEED

THP = Path("/sys/kernel/mm/transparent_hugepage")

# Defines heap_flags(): the VmFlags of each of the heap's mappings (in smaps each mapping's
# first line ends with its name, "[heap]" for the heap's).
HEAP_FLAGS = """
def heap_flags():
    flags, in_heap = [], False
    with open("/proc/self/smaps") as lines:
        for line in lines:
            head = line.split()
            if "-" in head[0] and len(head) >= 5:
                in_heap = head[-1] == "[heap]"
            elif head[0] == "VmFlags:" and in_heap:
                flags.append(head[1:])
    return flags
"""

# In a process of its own (the settings last for the process): a 20 MB allocation after the
# call, where it lands, and the flags of the heap's mappings.
SETS_THE_HEAP = (
    HEAP_FLAGS
    + """
import json, sys
from kb.matcher import heap
advised = heap.on_huge_pages()
span = heap.heap_span(heap.MAPS)
big = bytes(20 << 20)
print(json.dumps({"advised": advised, "span": span, "big": id(big), "flags": heap_flags()}))
"""
)


ON_GLIBC_WITH_THP = pytest.mark.skipif(
    not sys.platform.startswith("linux") or platform.libc_ver()[0] != "glibc" or not THP.is_dir(),
    reason="the heap is set only on Linux with glibc and transparent huge pages built in",
)

# Runs the `kb` program; at its end says whether kb.matcher.heap was imported and whether a
# mapping of the heap is advised as huge pages (VmFlags "hg").
SAYS_HOW_THE_HEAP_ENDED = (
    HEAP_FLAGS
    + """
import atexit, sys
def said():
    imported = "kb.matcher.heap" in sys.modules
    advised = any("hg" in flags for flags in heap_flags())
    sys.stderr.write(f"heap imported={imported} advised={advised}\\n")
atexit.register(said)
sys.argv = ["kb", *sys.argv[1:]]
from kb.cli import program
program()
"""
)


@ON_GLIBC_WITH_THP
def test_the_heap_grows_on_huge_pages_and_keeps_big_allocations() -> None:
    run = subprocess.run(
        [sys.executable, "-c", SETS_THE_HEAP],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "GLIBC_TUNABLES": ""},  # glibc's own settings, not a user's
    )
    found = json.loads(run.stdout)
    assert found["advised"] is True
    start, end = found["span"]
    assert end - start >= heap.HEAP_PAD  # grown at once
    # an allocation of 20 MB (glibc's own threshold: 128 KB) comes from the heap, not from a
    # mapping of its own
    assert start <= found["big"] < end
    # the heap's whole huge pages are advised (one of its mappings)
    assert any("hg" in flags for flags in found["flags"])


def test_off_linux_nothing_is_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "platform", "darwin")
    assert heap.on_huge_pages() is False


def test_the_heap_is_read_from_the_maps_file(tmp_path: Path) -> None:
    maps = tmp_path / "maps"
    maps.write_text(
        "55d0c0a00000-55d0c0a21000 r--p 00000000 103:02 1234 /usr/bin/python3.11\n"
        "55d0c1e4f000-55d0d2f4f000 rw-p 00000000 00:00 0                          [heap]\n"
        "7f3a40000000-7f3a40021000 rw-p 00000000 00:00 0 \n"
    )
    assert heap.heap_span(str(maps)) == (0x55D0C1E4F000, 0x55D0D2F4F000)
    # once advised, the heap is three mappings: its huge pages between two others
    maps.write_text(
        "55d0c1e4f000-55d0c2000000 rw-p 00000000 00:00 0                          [heap]\n"
        "55d0c2000000-55d0d2e00000 rw-p 00000000 00:00 0                          [heap]\n"
        "55d0d2e00000-55d0d2f4f000 rw-p 00000000 00:00 0                          [heap]\n"
    )
    assert heap.heap_span(str(maps)) == (0x55D0C1E4F000, 0x55D0D2F4F000)
    maps.write_text("7f3a40000000-7f3a40021000 rw-p 00000000 00:00 0 \n")
    assert heap.heap_span(str(maps)) is None


def test_only_whole_huge_pages_are_advised() -> None:
    page = heap.HUGE_PAGE
    assert heap._huge_aligned(page - 4096, 3 * page + 4096) == (page, 3 * page)
    assert heap._huge_aligned(page, 2 * page) == (page, 2 * page)
    start, end = heap._huge_aligned(page + 1, 2 * page - 1)  # no whole page inside
    assert end <= start


@ON_GLIBC_WITH_THP
def test_kb_match_of_a_big_file_sets_the_heap_and_of_a_small_one_does_not(tmp_path: Path) -> None:
    env = {**os.environ, "KB_DATABASE_URL": str(tmp_path / "kb.sqlite3"), "GLIBC_TUNABLES": ""}
    subprocess.run([sys.executable, "-m", "kb", "import", "-q", str(SEED)], env=env, check=True)
    line = "2026-12-05T01:00:00Z INFO tick, nothing to see here, all is well and quiet\n"
    big, small = tmp_path / "big.log", tmp_path / "small.log"
    big.write_text(line * (17 * (1 << 20) // len(line)))  # past bigfile.SPLIT_MIN_BYTES (16 MB)
    small.write_text(line * 100)
    ended = {}
    for log in (big, small):
        run = subprocess.run(
            [sys.executable, "-c", SAYS_HOW_THE_HEAP_ENDED, "match", "--json", str(log)],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert run.returncode == 1, run.stderr  # nothing found: chatter only
        ended[log.name] = (json.loads(run.stdout)["stats"].get("parts"), run.stderr.split()[-2:])
    assert ended == {
        "big.log": (2, ["imported=True", "advised=True"]),
        "small.log": (None, ["imported=False", "advised=False"]),
    }
