"""Line numbers and wrapping stay right on awkward logs: a line too long to wait for its end is
read in pieces that keep its line number, in bounded memory; and lines that merely have one
length (records of one kind) are not taken for a terminal-wrapped line and joined with the
error after them, while a real terminal wrap still is. (Issue 13, defect 11.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kb.logtext import blocks, split_lines
from kb.matcher import MatcherIndex, build_index, sources_from_records
from tests.conftest import seed_record
from tests.reliability.test_resources import PEAK_MEMORY, peak_kib

SEED_LINE = (
    "ValueError: Unknown KV cache group kind 'ful' in backend_per_kind. Valid kinds are: "
    "full_attention, mamba."
)
SEED_MESSAGE_ONLY = SEED_LINE.removeprefix("ValueError: ")
SHARDS = [f"Loading shard {i} of 6 from disk ok (model-0000{i}.bin) done" for i in range(1, 7)]


def logical_lines(source: bytes | str, block_bytes: int) -> list[tuple[int, int, str]]:
    return [
        (block.line_no(i), block.end_line_no(i), line)
        for block in blocks(source, block_bytes=block_bytes)
        for i, line in enumerate(block.lines)
    ]


@pytest.mark.parametrize("kind", [bytes, str])
def test_a_line_read_in_pieces_keeps_its_line_number(kind: type) -> None:
    """A line over 4 block sizes is cut where it is, and the pieces after the cut are still
    its line: the error below it is line 2, not 3 (8 after 100 MB)."""
    text = "x" * 9000 + "\n" + SEED_LINE + "\nlast\n"
    source = text.encode() if kind is bytes else text
    read = logical_lines(source, block_bytes=1024)
    assert {no for no, _, line in read if line.startswith("x")} == {1}
    assert [(no, end) for no, end, line in read if line == SEED_LINE] == [(2, 2)]
    assert read[-1][:2] == (3, 3)


@pytest.fixture(scope="module")
def seed_index(tmp_path_factory: pytest.TempPathFactory) -> MatcherIndex:
    return build_index(sources_from_records([seed_record()]), tmp_path_factory.mktemp("c"), "s")


def test_a_64_megabyte_line_is_matched_past_in_bounded_memory(tmp_path: Path) -> None:
    """Each piece of the line is let go once read (the context kept between blocks is capped
    in characters): a 1 GB line once took 3.2 GB."""
    db = tmp_path / "kb.sqlite3"
    env = dict(os.environ, KB_DATABASE_URL=str(db))
    records = tmp_path / "r.jsonl"
    records.write_text(json.dumps(seed_record()) + "\n")
    subprocess.run([sys.executable, "-m", "kb", "import", "-q", str(records)], env=env, check=True)
    log = tmp_path / "long.log"
    with open(log, "w") as fh:
        for _ in range(16):
            fh.write("y" * (4 << 20))
        fh.write("\n" + SEED_LINE + "\n")
    run = subprocess.run(
        [sys.executable, "-c", PEAK_MEMORY, "match", str(log), "--brief"],
        env=env,
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.split()[:3] == ["2", "0.93", seed_record()["id"]], run.stdout
    assert peak_kib(run.stderr) < 300 << 10, f"peak {peak_kib(run.stderr) >> 10} MB"


def test_lines_of_one_length_and_kind_are_not_joined_with_the_error_after_them(
    seed_index: MatcherIndex,
) -> None:
    assert len({len(line) for line in SHARDS}) == 1
    text = "\n".join([*SHARDS, SEED_MESSAGE_ONLY]) + "\n"
    assert split_lines(text).lines == [*SHARDS, SEED_MESSAGE_ONLY]
    (match,) = seed_index.match("\n".join([*SHARDS, SEED_LINE]) + "\n").matches
    assert (match.line, match.end_line) == (7, 7)
    assert match.captures == ["ful", "full_attention, mamba"]


def test_a_terminal_wrap_after_lines_of_that_width_is_still_joined(
    seed_index: MatcherIndex,
) -> None:
    """The records above are 80 columns too; the message wrapped at 80 below them is still
    one line (its rows do not open the way the row above them does)."""
    records = [
        f"Loading shard {i} of 6 from disk ok (model-0000{i}.bin), in 0.{i}2 s, all fine, next!!"
        for i in range(1, 4)
    ]
    assert {len(line) for line in records} == {80}
    message = SEED_LINE + " Check the config of the engine and try again with a valid kind."
    rows = [message[i : i + 80] for i in range(0, len(message), 80)]
    block = split_lines("\n".join([*records, *rows, "done"]) + "\n")
    assert block.lines == [*records, message, "done"]
    (match,) = seed_index.match("\n".join([*records, *rows, "done"]) + "\n").matches
    assert (match.line, match.end_line) == (4, 3 + len(rows))


def test_a_full_width_record_is_not_joined_with_a_line_that_opens_records_elsewhere() -> None:
    """A log a terminal wrapped at 100 (two real wraps), where one Django access line happens
    to be 100 columns: the `Not Found:` line after it opens a record of its own, as it does
    after the shorter access lines, and stays its own line."""
    message = SEED_LINE + " Check the config of the engine and try again with a valid kind, please."
    rows = [message[i : i + 100] for i in range(0, len(message), 100)]
    assert len(rows) == 2 and len(rows[0]) == 100
    full = (
        '[14/Mar/2026 08:44:01] "GET /favicon.ico?v=20260314-0844-refresh HTTP/1.1" '
        "404 8429 1.0234 0.99 okay"
    )
    assert len(full) == 100
    short = '[14/Mar/2026 08:44:16] "GET /favicon.ico HTTP/1.1" 404 8450'
    lines = [short, "Not Found: /favicon.ico", *rows, full, "Not Found: /favicon.ico", *rows]
    block = split_lines("\n".join([*lines, "done"]) + "\n")
    assert block.lines == [
        short,
        "Not Found: /favicon.ico",
        message,
        full,
        "Not Found: /favicon.ico",
        message,
        "done",
    ]
