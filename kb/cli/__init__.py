"""The `kb` command: parses flags, calls the library, renders, and maps errors to exit codes.

Only this package imports click, and nothing imports it. The group (kb.cli.group) is loaded by
main(); each command's module only when that command runs (or a help lists it), and heavy
modules (SQLAlchemy, the matcher's engines) only inside the commands that need them, so `kb
--help` and `kb match` are quick. This module imports nothing of click: the program's first
step, a big log file's helper (kb.matcher.prescan), is taken before click loads.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kb.cli.group import cli

__all__ = ["cli", "exit_now", "main", "program"]


def __getattr__(name: str) -> Any:
    if name == "cli":  # the click group, for callers that invoke it (tests, wrappers)
        from kb.cli.group import cli

        return cli
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def program() -> None:
    """The `kb` program (its console script, and `python -m kb`): main(), then, where the
    command allows it, the process's end without the interpreter's finalization (exit_now).
    main() itself returns or raises SystemExit, for callers that go on after it.

    First, before click and the commands load, `kb match FILE` of a big file starts the
    helper that scans it (kb.matcher.prescan): big.log's helper at 150,000 records then started
    about 15 ms sooner than from the command (at 22-25 ms of the process, not 37-40), and the
    match waited for it 0.1 ms in most runs (at most 14 of six) instead of 16-19 ms."""
    started = _start_prescan(sys.argv[1:])
    try:
        main()
    except SystemExit as done:
        from kb.cli.shared import ONE_SHOT

        if started:
            _discard_prescan()
        if ONE_SHOT["ends_quickly"] and (done.code is None or isinstance(done.code, int)):
            exit_now(done.code or 0)
        raise
    finally:
        if started:
            _discard_prescan()


def _discard_prescan() -> None:
    """Stop a helper no command took (a command line read wrongly, an error before the match)."""
    from kb.matcher import prescan

    prescan.discard()


def _start_prescan(args: list[str]) -> bool:
    """The helper of `kb [--db DB] match ... FILE`, read from the words of the command line:
    the --db option before `match`, and the one word after it that names a file big enough
    (kb.matcher.bigfile) among those that are not options. Nothing for any other command line.
    A word read wrongly costs only the helper's work: the match takes the helper only for the
    database option and file it was given itself (prescan.take), and its result only for that
    file and cache unchanged (prescan.Helper.result). Whether one was started."""
    database: str | None = None
    at = 0
    while at < len(args) and args[at].startswith("--db"):
        if args[at] == "--db" and at + 1 < len(args):
            database, at = args[at + 1], at + 2
        elif args[at].startswith("--db="):
            database, at = args[at][len("--db=") :], at + 1
        else:
            return False
    if args[at : at + 1] != ["match"]:
        return False
    from kb.matcher.bigfile import big_enough

    files = [word for word in args[at + 1 :] if not word.startswith("-") and big_enough(word)]
    if len(files) != 1:
        return False
    from kb.matcher import prescan

    return prescan.start_early(database, files[0])


def main() -> None:
    from kb.cli.group import cli
    from kb.cli.shared import ONE_SHOT

    ONE_SHOT["ends_quickly"] = False  # set by the command this process runs, if it may
    try:
        cli(prog_name="kb")
    except Exception:
        # A bug, not a KbError: the traceback is for a bug report, with any password that a
        # database URL or a driver's message put in it masked.
        import traceback

        from kb.config import masked

        sys.stderr.write(masked(traceback.format_exc()))
        sys.exit(1)


def exit_now(code: int) -> None:
    """End the process with `code` as a normal exit would (output flushed, non-daemon threads
    waited for, the atexit handlers run) but without the interpreter's finalization, which frees
    every object and module one by one where the kernel frees the process's memory at once:
    6-7 ms after a `kb match` of big.log at 150,000 and 1M records (2026-12-05). Returns, and
    the exit goes on as usual, when the output cannot be flushed (a reader gone)."""
    import atexit
    import os
    import threading

    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):
        return
    main_thread = threading.main_thread()
    for thread in threading.enumerate():
        if thread is not main_thread and not thread.daemon:
            thread.join()
    atexit._run_exitfuncs()
    os._exit(code)
