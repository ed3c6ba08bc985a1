"""The helper processes' allocator (kb.allocator): mimalloc preloaded into the processes kb
starts, where the wheel installed it, and never where the user set LD_PRELOAD."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from kb import allocator
from kb.matcher import keydb
from kb.matcher.background import BackgroundBuild

# pyproject.toml installs the wheel on these; CI runs on one of them.
BUNDLED = sys.platform.startswith("linux") and platform.machine() in ("x86_64", "aarch64")


def _library() -> Path:
    library = allocator.mimalloc_library()
    if library is None:
        if os.environ.get("CI") and BUNDLED:
            pytest.fail("cmeel-mimalloc is a dependency here, and its library was not found")
        pytest.skip("no bundled mimalloc on this platform")
    return library


def test_helpers_preload_the_bundled_mimalloc_and_it_is_what_they_run_on() -> None:
    library = _library()
    env = allocator.helper_env({"PATH": os.environ.get("PATH", "")})
    assert env is not None and env["LD_PRELOAD"] == str(library)
    assert env["PATH"] == os.environ.get("PATH", "")  # the rest of the environment kept
    maps = subprocess.run(
        [sys.executable, "-I", "-S", "-c", "print(open('/proc/self/maps').read())"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert str(library) in maps.stdout
    assert maps.stderr == ""  # the loader took it without a word


@pytest.mark.parametrize("theirs", ["", "/usr/lib/libtheirs.so"])
def test_a_users_own_ld_preload_is_left_alone(theirs: str) -> None:
    """Set, even to nothing (`LD_PRELOAD= kb import ...`): kb's helpers inherit it as it is."""
    assert allocator.helper_env({"LD_PRELOAD": theirs, "PATH": "/bin"}) is None


def test_the_library_is_looked_for_only_where_packages_are_installed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A library planted in the working folder (or any folder on sys.path that is not an
    install folder) is never preloaded."""
    planted = tmp_path / allocator.LIBRARY
    planted.parent.mkdir(parents=True)
    planted.write_bytes(b"\x7fELF not really")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    assert str(tmp_path) not in allocator.site_folders()
    found = allocator.mimalloc_library()
    assert found is None or not found.is_relative_to(tmp_path)
    # where it is installed, it is found
    assert allocator.mimalloc_library([str(tmp_path / "nothing"), str(tmp_path)]) == planted


def test_no_library_means_no_preload(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(allocator, "site_folders", lambda: [str(tmp_path)])
    assert allocator.mimalloc_library() is None
    assert allocator.helper_env({}) is None


def test_a_path_the_loader_would_split_is_not_preloaded(tmp_path: Path) -> None:
    """LD_PRELOAD is split at spaces and colons."""
    for name in ("with space", "with:colon"):
        library = tmp_path / name / allocator.LIBRARY
        library.parent.mkdir(parents=True)
        library.write_bytes(b"")
        assert allocator.mimalloc_library([str(tmp_path / name)]) is None


def test_not_on_linux(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    library = tmp_path / allocator.LIBRARY
    library.parent.mkdir(parents=True)
    library.write_bytes(b"")
    monkeypatch.setattr(sys, "platform", "darwin")
    assert allocator.mimalloc_library([str(tmp_path)]) is None


class _Started:
    """subprocess.Popen, recording the environment each process was given."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.envs: list[dict[str, str] | None] = []
        real = subprocess.Popen

        def popen(*args: Any, **kwargs: Any) -> Any:
            self.envs.append(kwargs.get("env"))
            return real(*args, **kwargs)

        monkeypatch.setattr(subprocess, "Popen", popen)


def test_the_key_worker_and_the_build_child_are_started_on_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    library = _library()
    monkeypatch.delenv("LD_PRELOAD", raising=False)
    started = _Started(monkeypatch)
    monkeypatch.setattr(keydb, "IN_PROCESS_KEYS", 0)
    compiling = keydb.Compiling([(0, "Connection refused"), (1, "No module named")])
    assert compiling._worker is not None
    assert compiling.result()  # and the worker compiled on it
    build = BackgroundBuild(tmp_path)
    build.abandon()
    assert [env and env.get("LD_PRELOAD") for env in started.envs] == [str(library)] * 2
