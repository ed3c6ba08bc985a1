"""The memory allocator of kb's own helper processes: mimalloc, where the `cmeel-mimalloc`
wheel installed it (Linux, x86-64 and ARM64), else the C library's malloc as before.

Two helpers allocate and free millions of small blocks: Hyperscan's compiler in the key
workers (kb.matcher.keydb: its sets, maps and graphs, about 2.3 KB a key at the peak) and the
matcher build beside an import (kb.matcher.background: Python objects past pymalloc's 512
bytes, SQLite's rows and sorts). In glibc's malloc a seventh of the compiler's time went to
consolidating and unlinking free chunks. With mimalloc preloaded, 2026-12-05, 150,000 records:
the compile of 104,323 keys 1.8-2.0 s of CPU against 3.1-3.3 (jemalloc 2.1-2.4), its peak
the same (269 MB against 279); the build child alone, worker included, 12.0-13.3 s against
13.4-13.9 (the first 16.5 on a busier minute). The importing process itself keeps glibc's:
preloaded there too, the whole import took 15.6-17.6 s against 14.7-15.5, with 1.5 s more of
system time and 327 MB at its peak against 258-264 (SQLite's page cache and sorts,
allocated and given back in large blocks).

Only processes kb starts get it, by LD_PRELOAD in their environment. A user who sets
LD_PRELOAD (even to nothing: `LD_PRELOAD= kb import ...`) keeps theirs and glibc's malloc.
"""

from __future__ import annotations

import os
import site
import sys
import sysconfig
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Final

PRELOAD: Final = "LD_PRELOAD"
# Where the cmeel wheel puts its shared library, in the folders pip installs packages into
# (never the working folder: a library found there would run in every helper). The
# unversioned name: the wheel holds it as a file of its own (wheels have no symlinks).
LIBRARY: Final = Path("cmeel.prefix", "lib", "libmimalloc.so")


def helper_env(environ: Mapping[str, str] | None = None) -> dict[str, str] | None:
    """The environment for a helper process kb starts: `environ` (os.environ by default) with
    mimalloc preloaded, or None (inherit it unchanged) where there is no mimalloc to preload,
    this is not Linux, or the user set LD_PRELOAD."""
    environ = os.environ if environ is None else environ
    if PRELOAD in environ:
        return None
    library = mimalloc_library()
    if library is None:
        return None
    return {**environ, PRELOAD: str(library)}


def mimalloc_library(folders: Iterable[str] | None = None) -> Path | None:
    """The bundled mimalloc's shared library in one of `folders` (site_folders() by default),
    or None: not Linux, the wheel is not installed, or its path cannot be preloaded."""
    if not sys.platform.startswith("linux"):
        return None
    for folder in site_folders() if folders is None else folders:
        candidate = Path(folder, LIBRARY)
        if candidate.is_file():
            library = str(candidate.resolve())
            # LD_PRELOAD is a list split at spaces and colons: such a path cannot be in it.
            return None if (" " in library or ":" in library) else Path(library)
    return None


def site_folders() -> list[str]:
    """The folders this interpreter installs packages into: its environment's, then the
    user's (where `pip install --user` puts them and Python reads them)."""
    paths = sysconfig.get_paths()
    folders = [paths["platlib"], paths["purelib"]]
    if site.ENABLE_USER_SITE:
        folders.append(site.getusersitepackages())
    return list(dict.fromkeys(folders))
