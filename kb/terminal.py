"""The terminal conventions of the tools people know (git, gh, ripgrep): colour only where it
helps and never against NO_COLOR, text as wide as the terminal, long output through a pager,
and the clipboard read through the platform's own tool. Standard library only: shlex, shutil
and subprocess imported where they are used, as a cold `kb match` into a file or a pipe needs
none of them (about 6 ms).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import IO, Final

# Text for a file or a pipe is wrapped here: readable in an 80 to 100 column window.
DEFAULT_WIDTH: Final = 88
# A terminal narrower than this still gets this much (indented text needs room); wider than
# MAX_WIDTH is no easier to read.
MIN_WIDTH: Final = 60
MAX_WIDTH: Final = 120
# less: quit at once when the text fits (-F), keep colours (-R), leave the screen as it was
# (-X), as git sets it.
DEFAULT_LESS: Final = "FRX"
# The platform tools that print the clipboard, first found wins.
CLIPBOARD_TOOLS: Final[tuple[tuple[str, ...], ...]] = (
    ("pbpaste",),
    ("wl-paste", "--no-newline"),
    ("xclip", "-selection", "clipboard", "-out"),
    ("xsel", "--clipboard", "--output"),
    ("powershell.exe", "-NoProfile", "-Command", "Get-Clipboard"),
)


def is_terminal(stream: IO[str] | IO[bytes] | None) -> bool:
    try:
        return stream is not None and stream.isatty()
    except (AttributeError, ValueError, OSError):
        return False


def use_color(choice: str = "auto", stream: IO[str] | None = None) -> bool:
    """--color always|never|auto. Auto: NO_COLOR (set and not empty) says no, FORCE_COLOR
    (set, not empty, not 0) says yes, else only on a terminal (https://no-color.org)."""
    if choice == "always":
        return True
    if choice == "never" or os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR", "0") not in ("", "0"):
        return True
    return is_terminal(stream if stream is not None else sys.stdout)


def width(stream: IO[str] | None = None) -> int:
    """The width to wrap text to: the terminal's (or $COLUMNS), kept within reason; off a
    terminal, DEFAULT_WIDTH."""
    stream = stream if stream is not None else sys.stdout
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit():
        wanted = int(columns)
    elif is_terminal(stream):
        import shutil

        wanted = shutil.get_terminal_size((DEFAULT_WIDTH, 24)).columns
    else:
        return DEFAULT_WIDTH
    return max(MIN_WIDTH, min(MAX_WIDTH, wanted - 2))


def pager_command() -> list[str] | None:
    """$KB_PAGER, then $PAGER, then less; None when paging is turned off (an empty value or
    `cat`) or no pager is installed."""
    import shlex
    import shutil

    for name in ("KB_PAGER", "PAGER"):
        value = os.environ.get(name)
        if value is not None:
            words = shlex.split(value)
            return None if not words or words[0] == "cat" else words
    found = shutil.which("less")
    return [found] if found else None


def page(text: str, *, enabled: bool = True, stream: IO[str] | None = None) -> None:
    """Write `text`; on a terminal, through the pager when it is longer than the screen."""
    stream = stream if stream is not None else sys.stdout
    command = pager_command() if enabled and is_terminal(stream) else None
    if command is None or not _fills_the_screen(text):
        stream.write(text)
        stream.flush()
        return
    import subprocess

    env = dict(os.environ)
    env.setdefault("LESS", DEFAULT_LESS)
    try:
        pager = subprocess.Popen(command, stdin=subprocess.PIPE, env=env)
    except OSError:  # no such pager after all: just print
        stream.write(text)
        stream.flush()
        return
    assert pager.stdin is not None
    try:
        pager.stdin.write(text.encode(getattr(stream, "encoding", None) or "utf-8", "replace"))
        pager.stdin.close()
    except BrokenPipeError:
        pass  # the reader quit early (q in less): that is fine
    while True:
        try:
            pager.wait()
            break
        except KeyboardInterrupt:
            continue  # Ctrl-C belongs to the pager (less uses it); wait for it to end


def _fills_the_screen(text: str) -> bool:
    import shutil

    return text.count("\n") >= shutil.get_terminal_size((80, 24)).lines - 1


def read_clipboard(tools: Sequence[tuple[str, ...]] = CLIPBOARD_TOOLS) -> bytes:
    """The clipboard's text, through the first platform tool found; OSError when none
    works."""
    import shutil
    import subprocess

    tried = []
    for tool in tools:
        if shutil.which(tool[0]) is None:
            continue
        tried.append(tool[0])
        done = subprocess.run(list(tool), capture_output=True, timeout=10, check=False)
        if done.returncode == 0:
            return done.stdout
    if tried:
        raise OSError(f"cannot read the clipboard ({', '.join(tried)} failed)")
    names = ", ".join(tool[0] for tool in tools)
    raise OSError(f"cannot read the clipboard: none of {names} is installed")
