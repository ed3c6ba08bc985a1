"""The ranker's memory map of the database file is advised as read at random (kb.pagemap), so
a search on a cold page cache reads the pages it needs, not the disk's read-ahead around each;
the connection each search opens beside it, and the cold `kb search`'s, map nothing."""

from __future__ import annotations

import json
import mmap
import os
import sys
from pathlib import Path

import pytest

from kb.knowledge import KnowledgeBase
from kb.pagemap import advise_random, maps_of
from tests.conftest import corpus_records

LINUX = sys.platform.startswith("linux")

MAPS = [
    b"55d0c0a00000-55d0c0a2c000 r--p 00000000 fd:01 2049 /usr/bin/python3.11",
    b"7f1200000000-7f1300000000 r--s 00000000 fd:01 393217 /srv/kb/kb.sqlite3",
    b"7f1400000000-7f1400010000 rw-s 00000000 fd:01 393218 /srv/kb/kb.sqlite3-shm",
    b"7f1500000000-7f1500200000 rw-p 00000000 00:00 0 ",
    b"7f1600000000-7f1700000000 r--s 00000000 fd:01 393217 /var/lib/overlay/upper/kb.sqlite3",
    b"7f1a00000000-7f1b00000000 r--s 00000000 00:2a 393217 /var/lib/overlay/other.sqlite3",
    b"7f1800000000-7f1900000000 r--s 00000000 00:2b 77 /srv/kb/kb.sqlite3",
    b"7ffc1a5e0000-7ffc1a601000 rw-p 00000000 00:00 0                          [stack]",
    b"not a line of maps",
]


def test_maps_of_a_file_are_known_by_their_path_or_by_device_and_inode() -> None:
    found = maps_of(MAPS, b"/srv/kb/kb.sqlite3", (0xFD, 0x01), 393217)
    assert found == [
        (0x7F1200000000, 0x100000000),  # both
        (0x7F1600000000, 0x100000000),  # device and inode (the path the one beneath)
        (0x7F1800000000, 0x100000000),  # the path (another device number)
    ]
    assert maps_of(MAPS, b"/srv/kb/other.sqlite3", (0xFD, 0x01), 1) == []


def vm_flags(path: Path) -> list[list[str]]:
    """The kernel's flags of each map of `path` in this process (/proc/self/smaps)."""
    real = os.path.realpath(path)
    flags: list[list[str]] = []
    current = False
    for line in Path("/proc/self/smaps").read_text(errors="replace").splitlines():
        fields = line.split(maxsplit=5)
        if fields and "-" in fields[0] and len(fields) >= 5 and ":" in fields[3]:
            current = len(fields) == 6 and fields[5] == real
        elif current and line.startswith("VmFlags:"):
            flags.append(line.split()[1:])
    return flags


@pytest.mark.skipif(not LINUX, reason="madvise and /proc/self/smaps are Linux's")
def test_a_map_advised_as_read_at_random_is_marked_so_by_the_kernel(tmp_path: Path) -> None:
    path = tmp_path / "pages.bin"
    path.write_bytes(b"x" * (1 << 20))
    with path.open("rb") as handle, mmap.mmap(handle.fileno(), 0, prot=mmap.PROT_READ) as mapped:
        assert mapped[0] == ord("x")
        assert [("rr" in f) for f in vm_flags(path)] == [False]
        assert advise_random(path) == 1
        assert [("rr" in f) for f in vm_flags(path)] == [True]  # VM_RAND_READ
    assert advise_random(path) == 0  # unmapped: nothing to advise


@pytest.mark.skipif(not LINUX, reason="madvise and /proc/self/smaps are Linux's")
def test_a_search_leaves_the_rankers_map_of_the_file_advised_as_read_at_random(
    tmp_path: Path,
) -> None:
    pytest.importorskip("apsw")
    db_file = tmp_path / "kb.sqlite3"
    source = tmp_path / "in.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in corpus_records(50)))
    with KnowledgeBase(str(db_file)) as kb:
        kb.import_sources([str(source)])
        assert vm_flags(db_file) == []  # an import maps nothing
        word = corpus_records(1)[0]["errorMessage"].split()[0]
        assert kb.search(word).total > 0
        flags = vm_flags(db_file)
        assert flags and all("rr" in f for f in flags)  # the ranker's, kept and advised
    assert vm_flags(db_file) == []


@pytest.mark.skipif(not LINUX, reason="/proc/self/smaps is Linux's")
def test_the_cold_search_reads_the_file_without_mapping_it(tmp_path: Path) -> None:
    from kb.quick import QuickReader

    db_file = tmp_path / "kb.sqlite3"
    with KnowledgeBase(str(db_file)) as kb:
        kb.import_sources([str(Path(__file__).parent.parent / "data")])
    reader = QuickReader.open(f"sqlite:///{db_file}")
    assert reader is not None
    try:
        assert reader.runner.rows("SELECT count(*) FROM records WHERE slug != ''")[0][0] > 0
        assert vm_flags(db_file) == []
    finally:
        reader.close()
