"""A manifest's promises kept before anything is parsed: the file's sha256 (as served), its
size, and for a gzipped file the decompressed JSON's sha256 and size. A file over HTTP is
fetched into a temporary folder first, so a wrong or endless file is never parsed."""

from __future__ import annotations

import gzip
import hashlib
import shutil
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import IO, Final

from kb.errors import InputError
from kb.ingest.reading import GZIP_MAGIC, ProgressFn, is_url, open_raw
from kb.ingest.site import ManifestEntry

CHUNK: Final = 1 << 20
# Without an announced size, what a manifest's file may hold at most; upstream's largest, the
# gzipped index of 150k records, is about 13 MB (216 MB decompressed).
UNANNOUNCED_MAX_BYTES: Final = 2 << 30
UNANNOUNCED_MAX_RAW_BYTES: Final = 16 << 30


def checked_copy(entry: ManifestEntry, folder: Path, progress: ProgressFn | None) -> str:
    """A local file holding `entry`'s bytes, checked against what the manifest says of them:
    the file itself when it is local, else a copy fetched into `folder`."""
    if is_url(entry.location):
        target = folder / f"{len(list(folder.iterdir()))}-{Path(entry.location).name or 'file'}"
        with open_raw(entry.location) as stream, open(target, "wb") as out:
            digest = _copy(stream, out, entry, progress)
    else:
        target = Path(entry.location)
        with open_raw(entry.location) as stream:
            digest = _copy(stream, None, entry, None)
    if entry.sha256 and digest != entry.sha256:
        raise _mismatch(entry, "sha256", entry.sha256, digest)
    if entry.raw_sha256:
        with open(target, "rb") as stream:
            raw = _raw_digest(stream, entry)
        if raw != entry.raw_sha256:
            raise _mismatch(entry, "rawSha256", entry.raw_sha256, raw)
    return str(target)


def _copy(
    stream: IO[bytes], out: IO[bytes] | None, entry: ManifestEntry, progress: ProgressFn | None
) -> str:
    limit = entry.size if entry.size is not None else UNANNOUNCED_MAX_BYTES

    def each(chunk: bytes) -> None:
        if out is not None:
            out.write(chunk)
        if progress is not None:
            progress(len(chunk))

    over = f"{entry.location}: larger than the {limit:,} bytes the manifest announces"
    digest, count = _bounded_digest(stream, limit, over, each)
    if entry.size is not None and count != entry.size:
        raise InputError(
            f"{entry.location}: {count:,} bytes where the manifest announces {entry.size:,} "
            "(cut short?); nothing was imported"
        )
    return digest


def _bounded_digest(
    stream: IO[bytes], limit: int, over: str, each: Callable[[bytes], None] | None = None
) -> tuple[str, int]:
    """sha256 and length of a stream read in chunks, refused (`over`) past `limit` bytes, so a
    lying size or a bomb stops there; `each` sees every chunk (a copy, progress)."""
    digest = hashlib.sha256()
    count = 0
    while chunk := stream.read(CHUNK):
        count += len(chunk)
        if count > limit:
            raise InputError(f"{over}; nothing was imported")
        digest.update(chunk)
        if each is not None:
            each(chunk)
    return digest.hexdigest(), count


def _raw_digest(stream: IO[bytes], entry: ManifestEntry) -> str:
    """sha256 of the decompressed bytes (of the bytes themselves when not gzipped), decompressed
    in chunks and never past the announced size: a gzip bomb stops at the limit."""
    limit = entry.raw_size if entry.raw_size is not None else UNANNOUNCED_MAX_RAW_BYTES
    head = stream.read(2)
    stream.seek(0)
    if head != GZIP_MAGIC:
        source: IO[bytes] = stream
    else:
        source = gzip.GzipFile(fileobj=stream, mode="rb")  # type: ignore[assignment]
    over = f"{entry.location}: decompresses past the {limit:,} bytes the manifest announces"
    try:
        digest, _count = _bounded_digest(source, limit, over)
    except (OSError, EOFError, zlib.error) as exc:
        raise InputError(f"{entry.location}: not a valid gzip file ({exc})") from exc
    return digest


def _mismatch(entry: ManifestEntry, what: str, wanted: str, actual: str) -> InputError:
    return InputError(
        f"{entry.location}: {what} mismatch: the manifest says {wanted}, "
        f"the file has {actual}; nothing was imported",
        hint="Download the file again, or fix the manifest.",
    )


def remove_copies(folder: Path) -> None:
    shutil.rmtree(folder, ignore_errors=True)
