"""JSON Lines read from bytes (kb.ingest.source) give every item the text layer gives: the same
values, rejections, reasons and line numbers, whatever the lines hold."""

from __future__ import annotations

import gzip
import io
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kb.errors import InputError
from kb.ingest import source
from kb.ingest.reading import Unparsable
from kb.ingest.source import Source, items_of_bytes, items_of_text, text_of

RECORD = json.dumps({"id": "a1", "text": "caf\u00e9 \u2014 ok"}).encode()

# Lines and line ends a file may hold: records, blanks, lines that are not JSON or not UTF-8,
# values only `json` reads, whitespace that only Python's str.strip takes, carriage returns.
FRAGMENTS = [
    RECORD,
    b'{"id": "b2", "n": 1}',
    b'{"id": "nan", "x": NaN}',
    b'{"id": "big", "x": 123456789012345678901234567890}',
    b'{"id": "sur", "x": "\\ud800"}',
    b'{"id": "bad", "x": "\xff\xfe"}',
    b"\xc2\xa0" + RECORD + b"\xc2\xa0",  # no-break spaces around
    b"{not json",
    b"[1, 2]",
    b"",
    b"   ",
    b"\t" + RECORD,
    b'{"id": "c3"}\r{"id": "d4"}',  # a lone CR ends a line for the text layer
    b"\x00",
]
ENDS = [b"\n", b"\r\n", b"\r", b""]


def _by_text(data: bytes) -> list[str]:
    return [repr(item) for item in items_of_text("f", text_of(io.BytesIO(data)))]


def _by_bytes(data: bytes) -> list[str]:
    return [repr(item) for item in items_of_bytes("f", io.BytesIO(data))]  # repr: NaN


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(st.sampled_from(FRAGMENTS), st.sampled_from(ENDS)), max_size=8),
)
def test_any_lines_give_the_items_the_text_layer_gives(lines: list[tuple[bytes, bytes]]) -> None:
    data = RECORD + b"\n" + b"".join(line + end for line, end in lines)
    assert _by_bytes(data) == _by_text(data)


@pytest.mark.parametrize(
    "data",
    [
        RECORD + b"\n" + b'{"id": "x", "v": "\xe9"}\n' + RECORD + b"\n",  # Latin-1 byte
        RECORD + b"\r\n" + RECORD + b"\r\n",
        RECORD + b"\n" + RECORD,  # no newline at the end
        RECORD + b"\n\n\n" + RECORD + b"\n",
        b"\xef\xbb\xbf" + RECORD + b"\n" + RECORD + b"\n",  # byte-order mark: as text
        RECORD,  # one line, no newline: as text
        b'{"errors": [], "datasetVersion": "v"}\n',  # a compact index: as text
        b"[" + RECORD + b",\n" + RECORD + b"]\n",
    ],
)
def test_files_read_both_ways_alike(data: bytes) -> None:
    assert _by_bytes(data) == _by_text(data)


def test_a_line_past_the_limit_hands_the_rest_to_the_text_layer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Longer than MAX_RECORD_CHARS bytes: rejected alone by the text layer's rule (in
    characters: a line of two-byte characters under the limit in characters stays a record),
    and the lines after it are still read, numbered on."""
    monkeypatch.setattr(source, "MAX_RECORD_CHARS", 200)
    wide = json.dumps({"id": "w", "x": "\u00e9" * 150}, ensure_ascii=False).encode()
    assert len(wide) > 200 > len(wide.decode())
    long = json.dumps({"id": "l", "x": "y" * 400}).encode()
    data = b"\n".join([RECORD, wide, long, RECORD, b""])
    items = list(items_of_bytes("f", io.BytesIO(data)))
    assert [item.line for item in items] == [1, 2, 3, 4]
    assert items[1].value["id"] == "w"
    assert isinstance(items[2].value, Unparsable) and "limit" in items[2].value.reason
    assert items[3].value == json.loads(RECORD)
    assert [repr(i) for i in items] == _by_text(data)


def test_a_gzipped_source_reads_its_lines_from_bytes(tmp_path: Any) -> None:
    path = tmp_path / "r.jsonl.gz"
    lines = [json.dumps({"id": f"{i:04d}", "m": "\u00fc" * i}) for i in range(2000)]
    path.write_bytes(gzip.compress(("\n".join(lines) + "\n").encode()))
    opened = Source(str(path))
    try:
        values = [item.value for item in opened.items()]
    finally:
        opened.close()
    assert values == [json.loads(line) for line in lines]
    assert opened.gzipped and opened.outer.count == path.stat().st_size


def test_a_gzips_records_progress_and_hash_are_the_files_and_no_thread_reads_it(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A gzip is undone in the thread that reads its records (a thread of its own fought it
    for the GIL, kb.ingest.source): the records read are the file's, in order; the progress
    callback is called in this thread only and adds up to the file's size; the hash is the
    file's; no other thread runs while it is read."""
    import hashlib
    import threading

    monkeypatch.setattr(source, "READ_CHUNK", 4096)  # many chunks
    lines = [json.dumps({"id": f"r{n}", "text": "x" * (n % 300)}) for n in range(3000)]
    raw = gzip.compress(("\n".join(lines) + "\n").encode())
    path = tmp_path / "in.jsonl.gz"
    path.write_bytes(raw)
    before = set(threading.enumerate())
    during: list[set[threading.Thread]] = []
    told: list[tuple[int, str]] = []

    def progress(n: int) -> None:
        told.append((n, threading.current_thread().name))
        during.append(set(threading.enumerate()))

    opened = Source(str(path), progress=progress)
    try:
        values = [item.value["id"] for item in opened.items()]  # type: ignore[union-attr]
    finally:
        opened.close()
    assert values == [f"r{n}" for n in range(3000)]
    assert sum(n for n, _ in told) == len(raw)
    assert {name for _, name in told} == {threading.current_thread().name}
    assert during and all(threads <= before for threads in during)
    assert opened.outer.sha256.hexdigest() == hashlib.sha256(raw).hexdigest()


def test_a_gzip_that_breaks_midway_gives_its_records_before_then_the_error(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The error is raised where the bytes that broke were wanted: every record of the bytes
    undone before comes first."""
    monkeypatch.setattr(source, "READ_CHUNK", 4096)
    lines = [json.dumps({"id": f"r{n}", "pad": "y" * 200}) for n in range(2000)]
    raw = gzip.compress(("\n".join(lines) + "\n").encode())
    path = tmp_path / "cut.jsonl.gz"
    path.write_bytes(raw[: len(raw) // 2])
    opened = Source(str(path))
    got: list[str] = []
    try:
        with pytest.raises(InputError, match="cannot read"):
            for item in opened.items():
                got.append(item.value["id"])  # type: ignore[union-attr]
    finally:
        opened.close()
    assert len(got) > 100 and got == [f"r{n}" for n in range(len(got))]


def test_closing_a_gzip_early_leaves_no_thread_behind(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import threading

    monkeypatch.setattr(source, "READ_CHUNK", 1024)
    path = tmp_path / "big.jsonl.gz"
    path.write_bytes(gzip.compress(b'{"id": "x"}\n' * 200_000))
    before = set(threading.enumerate())
    opened = Source(str(path))
    first = next(iter(opened.items()))
    assert first.value == {"id": "x"}  # type: ignore[union-attr]
    opened.close()
    assert set(threading.enumerate()) <= before


def test_a_gzip_on_stdin_closed_early_leaves_no_thread_and_stdin_open(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import sys
    import threading

    monkeypatch.setattr(source, "READ_CHUNK", 1024)
    stdin = io.BufferedReader(io.BytesIO(gzip.compress(b'{"id": "x"}\n' * 200_000)))
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(stdin))
    before = set(threading.enumerate())
    opened = Source("-")
    assert next(iter(opened.items())).value == {"id": "x"}  # type: ignore[union-attr]
    opened.close()
    assert set(threading.enumerate()) <= before
    assert not stdin.closed
