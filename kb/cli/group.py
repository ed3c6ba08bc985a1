"""The `kb` command group: its global options, and each command found by name (kb.cli)."""

from __future__ import annotations

import importlib
from typing import cast

import click

from kb import __version__
from kb.cli.shared import KbGroup

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
