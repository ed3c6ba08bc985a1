"""The shards' blobs read one ahead of their loading (kb.matcher.prefilter._read_ahead)."""

from __future__ import annotations

import threading
import time
from collections.abc import Generator

import pytest

from kb.matcher.prefilter import _read_ahead


def _blobs(n: int, log: list[str], fail_at: int | None = None) -> Generator[bytes, None, None]:
    try:
        for i in range(n):
            if i == fail_at:
                raise ValueError(f"blob {i} unreadable")
            log.append(f"read {i} in {threading.current_thread().name}")
            yield bytes([i]) * 3
    finally:
        log.append(f"closed in {threading.current_thread().name}")


def test_every_blob_comes_in_order_read_by_a_thread_of_its_own() -> None:
    log: list[str] = []
    assert list(_read_ahead(_blobs(5, log))) == [bytes([i]) * 3 for i in range(5)]
    assert log == [f"read {i} in kb-shards" for i in range(5)] + ["closed in kb-shards"]
    assert not any(t.name == "kb-shards" for t in threading.enumerate())


def test_a_reading_error_is_raised_where_the_blob_was_wanted() -> None:
    log: list[str] = []
    got: list[bytes] = []
    with pytest.raises(ValueError, match="blob 2 unreadable"):
        for blob in _read_ahead(_blobs(5, log, fail_at=2)):
            got.append(blob)
    assert got == [b"\0\0\0", b"\1\1\1"]
    assert log[-1] == "closed in kb-shards"
    assert not any(t.name == "kb-shards" for t in threading.enumerate())


def test_a_caller_that_stops_early_leaves_no_reader_behind() -> None:
    log: list[str] = []
    items = _read_ahead(_blobs(50, log))
    assert next(items) == b"\0\0\0"
    items.close()  # a load that failed on its first blob
    assert log[-1] == "closed in kb-shards"
    assert len([line for line in log if line.startswith("read")]) < 50
    assert not any(t.name == "kb-shards" for t in threading.enumerate())


def test_the_reader_starts_before_the_first_blob_is_asked_for() -> None:
    """kb.matcher.split counts a big log's lines while the first blob is read."""
    log: list[str] = []
    items = _read_ahead(_blobs(3, log))
    for _ in range(500):  # the reader reads the first blob, and waits for room for the next
        if log:
            break
        time.sleep(0.01)
    assert log[:1] == ["read 0 in kb-shards"]
    assert list(items) == [bytes([i]) * 3 for i in range(3)]
    assert not any(t.name == "kb-shards" for t in threading.enumerate())
