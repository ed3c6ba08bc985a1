"""The install's one compiled part: kb_bm25 in C (kb/_kb_bm25.c), an SQLite extension that
kb/ranking.py loads for `kb search`'s ranking. Built where a C compiler and SQLite's headers
(Debian's libsqlite3-dev) are at hand; without them the install goes on, pure Python, and kb
ranks with the same function in Python (the same scores, about ten times slower a record).

A wheel carries the library (and is then tagged for its platform); an editable install builds
it beside the C source, where the package is imported from.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

SOURCE = "kb/_kb_bm25.c"
NAME = "kb/_kb_bm25"
SUFFIXES = {"win32": ".dll", "darwin": ".dylib"}  # else .so (kb.ranking.NATIVE_SUFFIXES)
# -ffp-contract=off: no fused multiply-add, so that the C function's doubles are the Python
# function's to the last bit (the tests compare them for equality).
FLAGS = ["-O2", "-fPIC", "-shared", "-ffp-contract=off"]
# Set to 0 to install without it (kb then ranks in Python).
SWITCH = "KB_BUILD_NATIVE"


class NativeBm25Hook(BuildHookInterface):
    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if self.target_name != "wheel" or os.environ.get(SWITCH) == "0":
            return
        root = Path(self.root)
        suffix = SUFFIXES.get(sys.platform, ".so")
        if version == "editable":
            target = root / (NAME + suffix)
        else:
            target = Path(tempfile.mkdtemp(prefix="kb-native-")) / Path(NAME + suffix).name
        error = _compile(root / SOURCE, target)
        if error:
            self.app.display_warning(
                f"kb: kb_bm25 in C not built ({error}); kb search ranks in Python instead"
            )
            return
        build_data["pure_python"] = False
        build_data["infer_tag"] = True
        if version != "editable":
            build_data["force_include"][str(target)] = NAME + suffix


def _compile(source: Path, target: Path) -> str | None:
    """Builds the library; None on success, else why not."""
    compiler = shlex.split(os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc")
    command = [*compiler, *FLAGS, "-o", str(target), str(source)]
    if sys.platform == "darwin":
        command[len(compiler) : len(compiler)] = ["-undefined", "dynamic_lookup"]
    try:
        done = subprocess.run(command, capture_output=True, text=True, check=False)
    except OSError as exc:
        return f"{compiler[0]}: {exc.strerror}"
    if done.returncode != 0:
        lines = (done.stderr or done.stdout).strip().splitlines()
        return lines[0] if lines else f"{compiler[0]} exit status {done.returncode}"
    return None
