"""Which database kb uses: `--db`, then KB_DATABASE_URL, then SQLite in the user data dir.

A value with `://` is a SQLAlchemy URL; anything else is a path to a SQLite file.
"""

from __future__ import annotations

import os
from pathlib import Path

ENV_URL = "KB_DATABASE_URL"
APP_NAME = "kb"
DEFAULT_FILENAME = "kb.sqlite3"


def default_database_path() -> Path:
    """`<user data dir>/kb/kb.sqlite3`, honouring XDG_DATA_HOME and friends."""
    from platformdirs import user_data_dir

    return Path(user_data_dir(APP_NAME, appauthor=False)) / DEFAULT_FILENAME


def to_url(value: str | os.PathLike[str]) -> str:
    """A SQLAlchemy URL for a URL or a plain path (meaning SQLite)."""
    text = os.fspath(value)
    if "://" in text:
        return text
    return "sqlite:///" + str(Path(text).expanduser().resolve())


def resolve_database_url(option: str | None = None) -> str:
    """The database URL by the documented order: option, environment, default path."""
    if option:
        return to_url(option)
    env = os.environ.get(ENV_URL)
    if env:
        return to_url(env)
    return to_url(default_database_path())
