"""The cache's look-ups of a frame's file: the longest known filePath its path ends with, and
the records raised near its line, read without reading every record of the file."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kb.logline import Frame
from kb.matcher.build import sources_from_records, write_cache_file
from kb.matcher.cache import CacheReader

# One file with many records (lines 1-300, some twice, some with no line), a shorter path that
# a deeper one also ends with, and a file of one record.
LONG = "pkg/mod/a.py"
SHORT = "mod/a.py"
LONE = "other/b.py"


def records() -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []

    def add(path: str, line: int | None) -> None:
        n = len(out)
        out.append(
            {
                "id": f"rec-{n}",
                "errorMessage": f"Widget {n} could not be found in the registry",
                "messagePattern": f"Widget {n} could not be found in the registry",
                "filePath": path,
                "lineNumber": line,
            }
        )

    for line in range(1, 301):
        add(LONG, line)
        if line % 7 == 0:
            add(LONG, line)  # two records raised on one line
    for _ in range(3):
        add(LONG, None)
    add(SHORT, 50)
    add(SHORT, 51)
    add(LONE, 10)
    return out


@pytest.fixture(scope="module")
def reader(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CacheReader]:
    path: Path = tmp_path_factory.mktemp("files") / "cache.sqlite3"
    write_cache_file(sources_from_records(records()), path, "r1")
    con = sqlite3.connect(path)
    found = CacheReader(con, [], path=path, identity=None)
    yield found
    found.close()


def frame(path: str, line: int) -> Frame:
    return Frame(path, line, "load", "python")


@pytest.mark.parametrize(
    ("printed", "known"),
    [
        ("/usr/lib/python3/site-packages/pkg/mod/a.py", LONG),
        ("pkg/mod/a.py", LONG),
        ("/home/me/src/mod/a.py", SHORT),  # only the shorter path is a record's
        ("C:\\work\\other\\b.py", LONE),
        ("/home/me/src/a.py", None),  # a file name alone is no record's filePath
        ("/nowhere/c.py", None),
    ],
)
def test_a_frame_names_the_longest_known_file_its_path_ends_with(
    reader: CacheReader, printed: str, known: str | None
) -> None:
    assert reader.known_file(frame(printed, 10)) == known
    found = reader.file_records(frame(printed, 10))
    assert (found[0] if found is not None else None) == known


def test_the_records_near_a_frame_are_its_files_records_within_the_lines_in_order(
    reader: CacheReader,
) -> None:
    for printed in ("/site-packages/pkg/mod/a.py", "/src/mod/a.py", "/x/other/b.py"):
        for line in (1, 9, 50, 51, 140, 300, 305, 400):
            for lines in (0, 1, 3, 20):
                every = reader.file_records(frame(printed, line))
                near = reader.records_near(frame(printed, line), lines)
                assert every is not None and near is not None
                expected = [
                    (n, rec) for n, rec in every[1] if n is not None and abs(n - line) <= lines
                ]
                assert near == (every[0], expected)
    # the records of lines 13-15, line 14 raising two: four in all
    near = reader.records_near(frame("/site-packages/pkg/mod/a.py", 14), 1)
    assert near is not None and [n for n, _rec in near[1]] == [13, 14, 14, 15]
    assert reader.records_near(frame("/nowhere/c.py", 14), 1) is None


def test_a_files_records_are_every_record_of_it_with_or_without_a_line(
    reader: CacheReader,
) -> None:
    found = reader.file_records(frame("/site-packages/pkg/mod/a.py", 1))
    assert found is not None
    lines = [n for n, _rec in found[1]]
    assert len(lines) == 300 + 300 // 7 + 3
    assert lines[:3] == [None, None, None]  # a record with no line: anywhere in the file
    assert lines[3:] == sorted(lines[3:])
