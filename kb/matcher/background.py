"""The matcher build beside an import: a child process fed with the rows as they are stored.

An import into an empty SQLite knowledge base knows every record the index will hold, in the
order the build reads them (by key), while it stores them. `BackgroundBuild` sends those rows
to `python -m kb.matcher.background`, which prepares the patterns and compiles the prefilter
on the second core while the parent inserts and fills the full-text index. The child writes
temporary files only (the cache file, then kb search's word lists, the identifiers and the
vocabulary, and the file's compressed parts the database stores, kb.shared_index); after the
import commits, `install` renames them into the cache folder under the build lock. Anything
else (an update, a table with records already, a failed child) gives the files up, and
`kb import` builds the index after the import as before.
"""

from __future__ import annotations

import contextlib
import operator
import os
import pickle
import queue
import struct
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Generator, Iterable, Iterator, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Final

from kb.allocator import helper_env
from kb.pacing import NO_COLLECTIONS
from kb.spelling import WORD_LISTS, WordLists

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection

# The columns the build needs, in the order they travel (the documentation only as far as
# kb.matcher.build.raising_function reads it).
COLUMNS: Final = (
    "id",
    "repo",
    "slug",
    "message_pattern",
    "error_message",
    "error_class",
    "error_code",
    "file_path",
    "line_number",
    "source_code",
    "source_code_start",
    "documentation",
)
DOC_CHARS: Final = 2000  # raising_function looks for a function name in this many characters
# A row's values in COLUMNS' order, taken in C: at 150,000 records 0.23-0.24 s of the
# import's own time against 0.44 s for a generator of `row.get` per row (2026-12-04).
_COLUMNS_OF: Final = operator.itemgetter(*COLUMNS)
COLUMN_AT: Final = {column: i for i, column in enumerate(COLUMNS)}  # where each is in a row
TMP_PREFIX: Final = ".matcher-import-"  # not kb.matcher.lock's TMP_PATTERN: no lock is held
TMP_SUFFIX: Final = ".part"
_LENGTH: Final = struct.Struct("<Q")
# The pipe to the child holds a whole batch's rows (about 700 KB for 1,000 records of the
# shared corpus), so the import hands a batch over and goes on while the child still works on
# the one before. In Linux's default 64 KB pipe it waited for the child at every batch: at
# 30,000 records 1.0-1.6 s of the import's 6.7-8.4 s was spent in that write, against
# 0.2-0.3 s with this pipe (2026-12-03, three pairs in turns). 1 MB is Linux's default
# /proc/sys/fs/pipe-max-size, the most an unprivileged process may ask for.
PIPE_BYTES: Final = 1 << 20
PIPE_MAX_SIZE: Final = Path("/proc/sys/fs/pipe-max-size")
# And the import does not write to the pipe itself: a thread of its own does, up to this many
# batches behind it (their memory: about 14 MB for the shared corpus's records, 850 KB a
# batch at most), so the import goes on through the stretches where the child is the slower.
# At 150,000 records, 2026-12-03, on top of the wider pipe: the `kb import` command faster in
# 5 of 6 pairs in turns (median of the pairs' ratios 0.94); a first try with no bound, timed
# step by step, spent 0.7 s in the write where it had spent 1.8-3.6.
QUEUE_BATCHES: Final = 16
# How long an import about to commit waits for the build beside it to end, to store the
# build's copy in its own transaction (BackgroundBuild.committing). The build ended 0-1.3 s
# after the import's own work at 150,000 records and before it at 1M (2026-12-06); one that
# takes longer is waited for after the commit instead, as before, so a build that never ends
# never holds the records back.
COMMIT_WAIT_SECONDS: Final = 10.0


class BackgroundBuild:
    """One import's build in a child process. `rows` while the import stores them, `end` when
    it has stored them all, `install` after it committed (or `abandon`)."""

    def __init__(self, cache_dir: Path) -> None:
        """OSError when the cache folder cannot take a file or the child cannot start."""
        self.cache_dir = Path(cache_dir)
        self.revision = uuid.uuid4().hex  # the revision the import will commit
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(prefix=TMP_PREFIX, suffix=TMP_SUFFIX, dir=self.cache_dir)
        os.close(fd)
        self.path = Path(name)
        self.usable = True
        self._built = False  # the child ended having written the file (_wait)
        try:
            self._child: subprocess.Popen[bytes] | None = subprocess.Popen(
                [sys.executable, "-m", "kb.matcher.background", str(self.path), self.revision],
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,  # a failed child only means a build after the import
                env=helper_env(),  # mimalloc, which its key workers inherit (kb.allocator)
            )
        except BaseException:
            self.path.unlink(missing_ok=True)
            raise
        assert self._child.stdin is not None
        widen_pipe(self._child.stdin.fileno())
        self._sender: _Sender | None = None
        try:
            self._sender = _Sender(self._child.stdin)
        except RuntimeError as exc:  # no thread to write with (the process has too many)
            self._child.stdin.close()
            self.abandon()  # the child is stopped and its file removed
            raise OSError(f"cannot start the thread that feeds the build: {exc}") from exc

    def rows(self, rows: list[dict[str, Any]], meanwhile: Callable[[], bool] | None = None) -> None:
        """New records' rows, in the order of their keys; while the child is QUEUE_BATCHES
        behind, `meanwhile` is called until it has nothing to do (then this waits)."""
        if not self.usable or not rows:
            return
        try:
            batch = list(map(_COLUMNS_OF, rows))
        except KeyError:  # a row without some column (an import's rows have every one)
            batch = [tuple(row.get(column) for column in COLUMNS) for row in rows]
        for i, values in enumerate(batch):
            documentation = values[-1]
            if documentation and len(documentation) > DOC_CHARS:
                batch[i] = (*values[:-1], documentation[:DOC_CHARS])
        payload = pickle.dumps(batch, protocol=pickle.HIGHEST_PROTOCOL)
        self._write(_LENGTH.pack(len(payload)) + payload, meanwhile)

    def invalid(self) -> None:
        """The rows sent do not describe the table (a record changed, or was there before)."""
        if self.usable:
            self.abandon()

    def end(self) -> None:
        """Every row is sent: the child finishes the build while the import commits. The
        rows still queued are written on the sender's thread while the import goes on to its
        own end (at 150,000 records the import waited 1.0 s here for the child to read its
        last 16 batches, 2026-12-05); `install` waits for them."""
        sender = self._sender
        if not self.usable or sender is None or sender.finishing:
            return
        self._write(_LENGTH.pack(0))  # the end: a child that reads no end gives its file up
        if self.usable:
            sender.finish()

    def committing(self, conn: Connection) -> None:
        """The import commits this build's revision next: the child is waited for and the
        file's compressed parts are stored in the database (kb.shared_index) in the same
        transaction, under a savepoint. Stored after the commit, as any other build's are,
        they went through the WAL and its checkpoint with both cores idle: 1.4-1.8 s at 1M
        records, 0.12 s at 150,000 (2026-12-06). A store that fails is rolled back alone and
        left to the store after the commit (kb.knowledge.build_matcher), as is everything when
        the child has not ended within COMMIT_WAIT_SECONDS."""
        from sqlalchemy.exc import SQLAlchemyError

        from kb.matcher.cachefile import FORMAT_VERSION
        from kb.shared_index import store

        if not self.usable or not self._ended_within(COMMIT_WAIT_SECONDS) or not self._wait():
            return
        parts = parts_path(self.path)
        lists = {kind: word_list_path(self.path, kind) for kind in WORD_LISTS}  # if written
        try:
            with conn.begin_nested():
                store(
                    conn,
                    self.path,
                    self.revision,
                    FORMAT_VERSION,
                    parts=parts,
                    word_lists=lists,
                )
        except (SQLAlchemyError, OSError):
            return
        parts.unlink(missing_ok=True)  # stored: the store after the commit finds them there

    def install(self, committed_revision: str | None) -> bool:
        """Wait for the child and put its file in place as the cache of `committed_revision`
        (when that is the revision it built for). True when the cache is current now."""
        from kb.matcher.build import sync_path
        from kb.matcher.cachefile import CACHE_FILE
        from kb.matcher.lock import build_lock
        from kb.shared_index import parts_written_for

        if not self.usable or committed_revision != self.revision or not self._wait():
            self.abandon()
            return False
        cache = self.cache_dir / CACHE_FILE
        try:
            with build_lock(self.cache_dir):
                if parts_path(self.path).exists():  # what the database stores next, compressed
                    os.replace(parts_path(self.path), parts_written_for(cache))
                os.replace(self.path, cache)
                with contextlib.suppress(OSError):  # some file systems cannot sync a folder
                    sync_path(self.cache_dir)
        except OSError:
            self.abandon()
            return False
        self._install_word_lists(committed_revision)
        return True

    def _install_word_lists(self, revision: str) -> None:
        """The word lists the child collected, kept for kb search (kb.spelling): the first
        misspelt search after an import then reads them instead of every message (the
        identifiers, 12 s at 1M records) and every slug, class, code and repository (the
        vocabulary, 2.7 s at 1M); without them, that search collects them as before."""
        from kb.spelling import install_word_list

        for kind in WORD_LISTS:
            written = word_list_path(self.path, kind)
            try:
                install_word_list(written, self.cache_dir, kind, revision)
            except OSError:
                written.unlink(missing_ok=True)

    def abandon(self) -> None:
        """Stop the child and remove its file."""
        self.usable = False
        child, self._child = self._child, None
        sender, self._sender = self._sender, None
        if child is not None and child.poll() is None:
            child.kill()  # first: a write waiting on its pipe then fails, and the sender ends
        if sender is not None:
            sender.close()  # closes the child's stdin
        if child is not None:
            child.wait()
        self.path.unlink(missing_ok=True)
        for kind in WORD_LISTS:
            word_list_path(self.path, kind).unlink(missing_ok=True)
        parts_path(self.path).unlink(missing_ok=True)

    def _write(self, data: bytes, meanwhile: Callable[[], bool] | None = None) -> None:
        sender = self._sender
        # The child is gone, or rows come after the end: build after the import instead.
        if sender is None or sender.failed or sender.finishing:
            self.abandon()
            return
        sender.send(data, meanwhile)

    def _ended_within(self, seconds: float) -> bool:
        """Whether the child has ended, its last rows written, within `seconds` from now."""
        child = self._child
        if child is None:
            return True
        self.end()
        deadline = time.monotonic() + seconds
        sender = self._sender
        if sender is not None and not sender.written_within(seconds):
            return False
        try:
            child.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            return False
        return True

    def _wait(self) -> bool:
        """Wait for the child (its last rows written first); True when it built the file."""
        child = self._child
        if child is None:
            return self._built
        self.end()
        sender, self._sender = self._sender, None
        if sender is not None:
            sender.close()  # its last rows written (or given up, the child gone)
        child.wait()
        self._child = None
        self._built = child.returncode == 0
        return self._built


class _Sender:
    """Writes to the child's stdin on a thread of its own: `send` queues the data and returns,
    at most QUEUE_BATCHES ahead of the writes; `finish` says nothing more comes, and the
    thread closes the stream after its last write; `close` waits for that."""

    def __init__(self, stream: IO[bytes]) -> None:
        self._stream = stream
        self._queue: queue.Queue[bytes | None] = queue.Queue(maxsize=QUEUE_BATCHES)
        self.failed = False  # a write failed: the child is gone
        self.finishing = False  # finish() was called: nothing more is sent
        self._thread = threading.Thread(target=self._run, name="kb-build-rows", daemon=True)
        self._thread.start()

    def send(self, data: bytes, meanwhile: Callable[[], bool] | None = None) -> None:
        """Queue the data; while the queue is full, `meanwhile` is called for as long as it
        has work (True), then this waits for a place."""
        if meanwhile is not None:
            while True:
                try:
                    self._queue.put_nowait(data)
                    return
                except queue.Full:
                    if not meanwhile():
                        break
        self._queue.put(data)

    def finish(self) -> None:
        """Nothing more is sent: the stream is closed once what was sent is written (the
        child then reads its end)."""
        if not self.finishing:
            self.finishing = True
            self._queue.put(None)

    def written_within(self, seconds: float) -> bool:
        """Whether what was sent is written (or given up) and the stream closed within
        `seconds`; nothing more may be sent after."""
        self.finish()
        self._thread.join(seconds)
        return not self._thread.is_alive()

    def close(self) -> None:
        """Wait for what was sent to be written (or given up, once a write failed) and the
        stream closed."""
        self.finish()
        self._thread.join()
        with contextlib.suppress(OSError, ValueError):  # closed by the thread, as a rule
            self._stream.close()

    def _run(self) -> None:
        while (data := self._queue.get()) is not None:
            if self.failed:
                continue  # taken off the queue all the same, so that `send` never waits
            try:
                self._stream.write(data)
            except (OSError, ValueError):
                self.failed = True
        with contextlib.suppress(OSError, ValueError):
            self._stream.close()


def widen_pipe(fd: int) -> int | None:
    """Make the pipe at `fd` hold PIPE_BYTES, or as much as this system lets a process ask
    for; its size now, or None where pipes cannot be resized (not Linux): slower, not wrong."""
    try:
        import fcntl

        limit = int(PIPE_MAX_SIZE.read_text(encoding="ascii"))
        return int(fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, min(PIPE_BYTES, limit)))
    except (ImportError, AttributeError, OSError, ValueError):
        return None


def _batches(stream: IO[bytes]) -> Iterator[list[tuple[Any, ...]]]:
    """The batches the parent sent; EOFError when it stopped before saying it had ended (it
    was killed, or gave the build up)."""
    while len(header := stream.read(_LENGTH.size)) == _LENGTH.size:
        (size,) = _LENGTH.unpack(header)
        if size == 0:
            return
        payload = stream.read(size)
        if len(payload) != size:
            break
        yield pickle.loads(payload)
    raise EOFError("the import stopped before its last row")


def _sources(stream: IO[bytes], word_lists: WordLists) -> Generator[Any, None, None]:
    """The records' build sources; kb search's word lists collected from them into
    `word_lists`. Read with the cyclic collector off (kb.pacing.NO_COLLECTIONS): this process
    ends with the build, and while rows come its collections found nothing to free; it is on
    again for the build's end, as before."""
    with NO_COLLECTIONS:
        yield from _sources_read(stream, word_lists)


def _sources_read(stream: IO[bytes], word_lists: WordLists) -> Iterator[Any]:
    for batch in _batches(stream):
        word_lists.add(batch, COLUMN_AT)
        yield from sources_of(batch)


def sources_of(batch: Iterable[Sequence[Any]]) -> Iterator[Any]:
    """The build sources (kb.matcher.build.PatternSource) of rows of COLUMNS, in order: the
    child's, and those of the build after an import (kb.knowledge), which reads the same."""
    from kb.matcher.build import PatternSource, raising_function

    for (
        record_id,
        repo,
        _slug,  # for the vocabulary (kb.spelling.WordLists)
        message_pattern,
        error_message,
        error_class,
        error_code,
        file_path,
        line_number,
        source_code,
        source_start,
        documentation,
    ) in batch:
        yield PatternSource(
            id=record_id,
            repo=repo,
            message_pattern=message_pattern,
            error_message=error_message,
            error_class=error_class,
            error_code=error_code,
            file_path=file_path or "",
            line_number=line_number,
            function=raising_function(
                file_path=file_path or "",
                line_number=line_number,
                source_code=source_code,
                source_start=source_start,
                documentation=documentation,
            ),
        )


def main(argv: list[str]) -> int:
    """The child: rows from stdin, the cache file written to argv[0] for revision argv[1], and
    beside it the messages' identifiers (kb search's "did you mean") and the file's parts as
    the database stores them (kb.shared_index), compressed while the import still works."""
    from kb.matcher.build import sync_path, write_cache_file
    from kb.shared_index import write_parts

    path, revision = Path(argv[0]), argv[1]
    word_lists = WordLists()
    sources = _sources(sys.stdin.buffer, word_lists)
    try:
        write_cache_file(sources, path, revision, synced=False)
    except BaseException:
        path.unlink(missing_ok=True)
        raise
    finally:
        sources.close()  # a build that failed mid-way gets its collector back here too
    # The file reaches the disk (before the import renames it into place, after this process
    # ended) while the word lists and the parts are written: at 150,000 records the sync took
    # 0.1-0.34 s of the import's last seconds (2026-12-05).
    syncing = _Syncing(path, sync_path)
    for kind, text in word_lists.texts().items():
        written = word_list_path(path, kind)
        try:  # no fsync: a list lost in a crash is collected again by the search that needs it
            written.write_text(text, encoding="utf-8")
        except OSError:  # the index is what counts: without the list, a search collects it
            written.unlink(missing_ok=True)
    try:  # without them, the import's end compresses the file itself
        write_parts(path, parts_path(path))
    except OSError:
        parts_path(path).unlink(missing_ok=True)
    if not syncing.done():
        path.unlink(missing_ok=True)  # a file not known to be on the disk is not installed
        return 1
    return 0


class _Syncing:
    """sync_path(path) on a thread of its own (an fsync lets go of the GIL); `done` waits for
    it: True when it succeeded."""

    def __init__(self, path: Path, sync: Callable[[Path], None]) -> None:
        self._failed = False

        def run() -> None:
            try:
                sync(path)
            except OSError:
                self._failed = True

        self._thread = threading.Thread(target=run, name="kb-build-sync")
        try:
            self._thread.start()
        except RuntimeError:  # no thread to be had: synced here, before the rest
            run()

    def done(self) -> bool:
        if self._thread.ident is not None:  # started
            self._thread.join()
        return not self._failed


def word_list_path(path: Path, kind: str) -> Path:
    """Where the child writes the `kind` word list (kb.spelling's IDENTIFIERS, VOCABULARY)
    beside the cache file at `path` (a name kb.matcher.lock takes for a leftover of a killed
    import too)."""
    return _beside(path, kind)


def parts_path(path: Path) -> Path:
    """Where the child writes the cache file's compressed parts (kb.shared_index.write_parts),
    until `install` moves them beside the installed file."""
    return _beside(path, "parts")


def _beside(path: Path, what: str) -> Path:
    return path.with_name(path.name.removesuffix(TMP_SUFFIX) + f"-{what}" + TMP_SUFFIX)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
