"""Writing a file kb was asked to write (`kb export PATH`) without harming what is there.

A regular file (new, or replaced) is written whole to a temporary file beside it, flushed to
disk and renamed over it: a full disk or a crash leaves the old file as it was. A symbolic
link is followed, so the link stays a link and its target is written. A pipe, terminal or
device (a FIFO from `>(gzip > x)`, /dev/null, /dev/full) is written through, as a shell
redirection would, never replaced by a regular file. A folder is refused.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from kb.errors import OutputError


@contextlib.contextmanager
def output_file(path: str) -> Iterator[IO[str]]:
    """A UTF-8 text stream for `path`; OutputError, naming it, when it cannot be written."""
    target = Path(os.path.realpath(path))  # through any symbolic links
    try:
        mode: int | None = target.stat().st_mode
    except FileNotFoundError:
        mode = None
    except OSError as exc:
        raise OutputError(f"{path}: cannot write: {exc.strerror}") from exc
    if mode is not None and stat.S_ISDIR(mode):
        raise OutputError(f"{path}: is a folder", hint="Name a file to write, or - for stdout.")
    if mode is not None and not stat.S_ISREG(mode):
        try:
            with open(target, "w", encoding="utf-8", newline="\n") as out:
                yield out
        except OSError as exc:
            raise OutputError(f"{path}: cannot write: {exc.strerror}") from exc
        return
    if not target.parent.is_dir():
        raise OutputError(f"{path}: no such folder: {target.parent}")
    try:
        fd, name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    except OSError as exc:
        raise OutputError(f"{path}: cannot write: {exc.strerror}") from exc
    temporary = Path(name)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as out:
            yield out
            out.flush()
            os.fsync(out.fileno())
        # mkstemp's file is private; the export gets the mode the file had, or a new file's.
        os.chmod(temporary, stat.S_IMODE(mode) if mode is not None else 0o666 & ~_umask())
        os.replace(temporary, target)
    except OSError as exc:
        kept = "left as it was" if mode is not None else "not written"
        raise OutputError(f"{path}: cannot write: {exc.strerror} ({path} {kept})") from exc
    finally:
        temporary.unlink(missing_ok=True)


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask
