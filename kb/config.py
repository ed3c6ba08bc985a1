"""Which database kb uses and where its files are, in the standard library only.

The database: `--db`, then KB_DATABASE_URL, then SQLite in the user data dir; a value with
`://` is a SQLAlchemy URL, anything else a path to a SQLite file. Also the facts the cold path
needs before (and instead of) SQLAlchemy: the schema revision a database must be at, the file of
a SQLite URL, and the folder of a database's derived caches.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path
from typing import Final
from urllib.parse import unquote

# The newest Alembic revision; tests/test_db.py proves it equals the scripts' head.
HEAD_REVISION: Final = "0006"
ENV_URL = "KB_DATABASE_URL"
APP_NAME = "kb"
DEFAULT_FILENAME = "kb.sqlite3"


def default_database_path() -> Path:
    """`<user data dir>/kb/kb.sqlite3`, honouring XDG_DATA_HOME and friends."""
    folder = _user_dir("XDG_DATA_HOME", ".local/share", "user_data_dir")
    if folder is None:
        from kb.errors import DatabaseError

        raise DatabaseError(
            "there is no home folder to keep the knowledge base in (HOME is not set)",
            hint=f"Name the database with --db PATH or {ENV_URL}.",
        )
    return folder / DEFAULT_FILENAME


def to_url(value: str | os.PathLike[str]) -> str:
    """A SQLAlchemy URL for a URL or a plain path (meaning SQLite)."""
    text = os.fspath(value)
    if "://" in text:
        return text
    path = str(Path(text).expanduser().resolve())
    # Escaped: a URL reads "?" as the start of its options, "#" as a fragment and "%41" as
    # "A", so a path holding them named another file (`kb --db "/tmp/q ?b/kb.db"` wrote the
    # database to "/tmp/q "). SQLAlchemy and sqlite_file() unescape them.
    return "sqlite:///" + path.replace("%", "%25").replace("?", "%3F").replace("#", "%23")


def resolve_database_url(option: str | None = None) -> str:
    """The database URL by the documented order: option, environment, default path."""
    if option:
        return to_url(option)
    env = os.environ.get(ENV_URL)
    if env:
        return to_url(env)
    return to_url(default_database_path())


def sqlite_file(url: str) -> Path | None:
    """The file of a plain `sqlite:///path` URL, else None."""
    prefix = "sqlite:///"
    if not url.startswith(prefix) or "?" in url:
        return None
    path = unquote(url[len(prefix) :])
    return None if not path or path == ":memory:" else Path(path)


def sqlite_read_only(path: Path) -> bool:
    """Whether a SQLite file exists and can only be read: the file, or its folder (where SQLite
    makes the -wal and -shm files even to read a WAL database), is not writable."""
    return path.is_file() and not (os.access(path, os.W_OK) and os.access(path.parent, os.W_OK))


# A search reads records scattered over the file (the text of a phrase's records, the best
# records' columns): mapped in, a read comes from the operating system's page cache without a
# copy into SQLite's own 2 MB of pages. At a million records, warm, 2026-12-05: the 12,645
# records of "plotly graph" looked up in 20 against 38 ms; the development draw of sealed
# queries (seed 20261231) median 7.3 against 9.8 ms, p95 68-83 against 93. SQLite takes at
# most its build's limit (2 GB in Python's sqlite3 of Debian 12, all of it in apsw's); a
# mapping costs address space, not memory. Set on the ranker's connections (kb.ranking),
# which a process keeps from one search to the next, and its map advised as read at random
# (kb.pagemap: unadvised, a first search on a cold page cache read 27 times the pages it
# needed). Not on the connection each search opens beside it, nor on the cold `kb search`'s
# (kb.quick): mapped anew at every search, they were no faster warm (the development draw of
# seed 20261268 at 1M, three rounds in turns: median 8.1-8.7 ms against 8.8-9.7 mapped, p95
# 34.8-36.0 against 38.9-41.2; at 150,000 alike), and `kb search` took 76-79 ms against 80-84
# at 150,000 records, 94 against 99-104 at 1M (2026-12-06).
SEARCH_MMAP_PRAGMA: Final = f"PRAGMA mmap_size = {1 << 34}"


def sqlite_reader_uri(path: Path, *, immutable: bool = False) -> str:
    """The URI to read a SQLite file with: read-only, and immutable when the caller knows the
    file never changes (`immutable`) or where no writer can be at work (its folder cannot take
    the -wal and -shm files a writer needs, and none is there), without which SQLite cannot
    open a WAL database in a read-only folder at all."""
    from urllib.parse import quote

    uri = f"file:{quote(str(path))}?mode=ro"
    wal = path.with_name(path.name + "-wal")
    if immutable or (not os.access(path.parent, os.W_OK) and not wal.exists()):
        uri += "&immutable=1"
    return uri


def cache_dir_for(url: str) -> Path:
    """Where derived caches (the matcher index, the search vocabulary) of the database at
    `url` live. Keyed by the URL without its secrets: a new password keeps the cache."""
    digest = _sha256_hex(masked(url, mask="").encode("utf-8"))[:16]
    return user_cache_root() / digest


# The interpreter's own SHA-256 (3.12 and later: _sha2; 3.11: _sha256): hashlib loads OpenSSL's
# libcrypto first, 3-5 ms of a cold `kb match`, and of the helper a big log's match forks, for
# one short digest (2026-12-05).
_OWN_SHA256: Final = ("_sha2", "_sha256")


def _sha256_hex(data: bytes) -> str:
    import importlib

    for name in _OWN_SHA256:
        try:
            own = importlib.import_module(name)
        except ImportError:
            continue
        return str(own.sha256(data).hexdigest())
    import hashlib  # an interpreter built without its own

    return hashlib.sha256(data).hexdigest()


# Query parameters whose values are secrets (libpq's `password`, and what people put in the
# URLs of datasets they import: `?token=`, `?key=`).
SECRET_PARAMETERS: Final = (
    "password", "passwd", "pwd", "secret", "token", "access_token", "api_key", "apikey",
    "key", "sig", "signature",
)  # fmt: skip
# The password runs to the last `@` before the host: an unquoted `@` in it is still hidden.
_USERINFO_RE: Final = re.compile(r"(?P<head>[A-Za-z][\w+.-]*://[^:/?#@\s]*):[^/?#\s]*@")
_SECRET_QUERY_RE: Final = re.compile(
    r"(?P<head>[?&;](?:" + "|".join(SECRET_PARAMETERS) + r")=)[^&#\s'\"]*", re.IGNORECASE
)
_PASSWORD_PAIR_RE: Final = re.compile(r"(?P<head>\bpassword\s*=\s*)('[^']*'|[^\s'\"]+)")
MASK: Final = "***"


def masked(text: str, *, mask: str = MASK) -> str:
    """`text` (a URL, or a message or traceback holding URLs or libpq settings) with every
    password replaced by `***`: `scheme://user:***@host/db`, `?password=***`, `password=***`."""
    text = _USERINFO_RE.sub(lambda m: f"{m['head']}:{mask}@", text)
    text = _SECRET_QUERY_RE.sub(lambda m: m["head"] + mask, text)
    return _PASSWORD_PAIR_RE.sub(lambda m: m["head"] + mask, text)


def user_cache_root() -> Path:
    """`<user cache dir>/kb`; without a home folder, a private folder in the temp folder."""
    root = _user_dir("XDG_CACHE_HOME", ".cache", "user_cache_dir")
    return root if root is not None else _private_temp_folder()


# Where the XDG Base Directory rules hold and kb applies them itself: platformdirs costs a cold
# `kb match` about 11 ms to import (it brings tempfile, shutil, random, bz2 and lzma), more
# than the rest of kb.config. Elsewhere (Windows, macOS, iOS, an Android app) it decides.
_OWN_XDG: Final = not sys.platform.startswith(("win32", "cygwin", "darwin", "ios")) and not (
    hasattr(sys, "getandroidapilevel") or "ANDROID_DATA" in os.environ
)


def _user_dir(variable: str, under_home: str, platformdirs_name: str) -> Path | None:
    """`<the user's folder of this kind>/kb`, or None when there is no home folder to put it
    in. Under XDG, as platformdirs (4.x) reads the rules: an absolute $XDG_..._HOME, else
    `under_home` in the home folder ($HOME when absolute, else the user's passwd entry)."""
    if not _OWN_XDG:
        import platformdirs

        try:
            found = Path(getattr(platformdirs, platformdirs_name)(APP_NAME, appauthor=False))
        except RuntimeError:  # no home folder: HOME unset and no passwd entry
            return None
        return found if found.is_absolute() else None
    chosen = os.environ.get(variable, "")
    if os.path.isabs(chosen):
        return Path(chosen) / APP_NAME
    home = os.environ.get("HOME", "")
    if not os.path.isabs(home):
        try:
            import pwd

            home = pwd.getpwuid(os.getuid()).pw_dir
        except (ImportError, KeyError):  # no passwd entry for this user
            return None
    return Path(home) / under_home / APP_NAME if os.path.isabs(home) else None


def _private_temp_folder() -> Path:
    """`<temp>/kb-cache-UID`, made private; a fresh one if that name is someone else's (a
    cache planted there would be loaded: the prefilter's databases are native code's input)."""
    import stat
    import tempfile

    uid = os.getuid() if hasattr(os, "getuid") else 0
    folder = Path(tempfile.gettempdir()) / f"kb-cache-{uid}"
    try:
        folder.mkdir(mode=0o700, exist_ok=True)
        found = folder.lstat()
        if stat.S_ISDIR(found.st_mode) and found.st_uid == uid and not found.st_mode & 0o077:
            return folder
    except OSError:
        pass
    return Path(tempfile.mkdtemp(prefix="kb-cache-"))
