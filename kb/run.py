"""`kb run -- COMMAND`: run a command with its output passed through unchanged, keep a bounded
copy of what it printed, and hand that copy back when it is done, so the known errors in it
can be shown when it failed.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import IO, Final

# What is kept of the command's output for matching: its last bytes (a failing build's error
# is at its end), so a command that prints gigabytes costs no more memory than this.
CAPTURE_MAX_BYTES: Final = 16 << 20
CHUNK: Final = 64 << 10
# Shell conventions for a command that could not be run.
EXIT_NOT_FOUND: Final = 127
EXIT_NOT_EXECUTABLE: Final = 126


@dataclass(frozen=True)
class Finished:
    """How the command ended and what it printed."""

    status: int  # its exit status; 128 + N when a signal N ended it (as a shell reports it)
    output: bytes  # stdout and stderr as they arrived, the last CAPTURE_MAX_BYTES of them
    dropped: int  # bytes of output not kept (from the start)
    error: str | None = None  # why it could not be started


class _Tail:
    """The last `limit` bytes written to it, from several threads."""

    def __init__(self, limit: int) -> None:
        self._chunks: deque[bytes] = deque()
        self._size = 0
        self._limit = limit
        self.dropped = 0
        self._lock = threading.Lock()

    def add(self, data: bytes) -> None:
        with self._lock:
            self._chunks.append(data)
            self._size += len(data)
            while self._size - len(self._chunks[0]) >= self._limit:
                old = self._chunks.popleft()
                self._size -= len(old)
                self.dropped += len(old)

    def value(self) -> bytes:
        with self._lock:
            data = b"".join(self._chunks)
        excess = max(0, len(data) - self._limit)
        self.dropped += excess
        return data[excess:]


def _pump(source: IO[bytes], sink: IO[bytes], tail: _Tail) -> None:
    """Copy a pipe to our own stream as it comes (flushed: a prompt or progress shows at once),
    and into the tail."""
    fd = source.fileno()
    while data := os.read(fd, CHUNK):
        try:
            sink.write(data)
            sink.flush()
        except (BrokenPipeError, ValueError):
            pass  # our reader went away: keep draining, so the command is not blocked
        tail.add(data)


def run(command: Sequence[str], *, stdout: IO[bytes], stderr: IO[bytes]) -> Finished:
    """Run `command` (stdin inherited) with its two streams copied to `stdout` and `stderr`.
    Ctrl-C reaches the command as it would without kb (same process group); kb waits for it to
    end and reports its status."""
    tail = _Tail(CAPTURE_MAX_BYTES)
    try:
        process = subprocess.Popen(list(command), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    except FileNotFoundError:
        return Finished(EXIT_NOT_FOUND, b"", 0, f"{command[0]}: command not found")
    except PermissionError:
        return Finished(EXIT_NOT_EXECUTABLE, b"", 0, f"{command[0]}: permission denied")
    except OSError as exc:
        return Finished(EXIT_NOT_EXECUTABLE, b"", 0, f"{command[0]}: {exc.strerror}")
    assert process.stdout is not None and process.stderr is not None
    pumps = [
        threading.Thread(target=_pump, args=(process.stdout, stdout, tail), daemon=True),
        threading.Thread(target=_pump, args=(process.stderr, stderr, tail), daemon=True),
    ]
    for pump in pumps:
        pump.start()
    while True:
        try:
            status = process.wait()
            break
        except KeyboardInterrupt:
            # The terminal sent SIGINT to the command too; if it ignores it, ask again.
            if process.poll() is None:
                process.send_signal(signal.SIGINT)
    for pump in pumps:
        pump.join()
    output = tail.value()
    return Finished(128 - status if status < 0 else status, output, tail.dropped)
