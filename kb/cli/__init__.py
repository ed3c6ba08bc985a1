"""The `kb` command: parses flags, calls the library, renders, and maps errors to exit codes.

Only this package imports click, and nothing imports it. Each command's module is imported only
when that command runs (or a help lists it), and heavy modules (SQLAlchemy, the matcher's
engines) only inside the commands that need them, so `kb --help` and `kb match` are quick.
"""

from __future__ import annotations

import importlib
import sys
from typing import cast

import click

from kb import __version__
from kb.cli.shared import ONE_SHOT, KbGroup

# Where each command lives, "module:name": imported when it runs or a help lists it.
COMMANDS = {
    "db": "kb.cli.database:db_group",
    "delete": "kb.cli.database:delete_command",
    "export": "kb.cli.records:export",
    "import": "kb.cli.database:import_command",
    "match": "kb.cli.matching:match",
    "run": "kb.cli.matching:run",
    "search": "kb.cli.records:search",
    "serve": "kb.cli.serve:serve",
    "show": "kb.cli.records:show",
    "stats": "kb.cli.records:stats",
}


class LazyGroup(KbGroup):
    """The top-level group: its commands' modules imported by name, as they are needed."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *COMMANDS})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        where = COMMANDS.get(cmd_name)
        if where is None:
            return super().get_command(ctx, cmd_name)
        module, _, name = where.partition(":")
        return cast(click.Command, getattr(importlib.import_module(module), name))


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--db",
    metavar="URL",
    help="Database URL or SQLite path. Default: $KB_DATABASE_URL, then the user data dir.",
)
@click.version_option(__version__, "--version", prog_name="kb")
@click.pass_context
def cli(ctx: click.Context, db: str | None) -> None:
    """kb: paste an error log, get what is known about every error in it.

    \b
    Example:
      kb import data/
      kb match data/logs/service-with-tracebacks.log
    """
    ctx.ensure_object(dict)
    ctx.obj["db"] = db


def program() -> None:
    """The `kb` program (its console script, and `python -m kb`): main(), then, where the
    command allows it, the process's end without the interpreter's finalization (exit_now).
    main() itself returns or raises SystemExit, for callers that go on after it."""
    try:
        main()
    except SystemExit as done:
        if ONE_SHOT["ends_quickly"] and (done.code is None or isinstance(done.code, int)):
            exit_now(done.code or 0)
        raise


def main() -> None:
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
