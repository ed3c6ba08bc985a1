"""What every command shares: errors turned into messages and exit codes, the option bundles,
opening the knowledge base, output for people, and status lines of a slow step."""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import click

from kb.errors import EXIT_DATABASE, EXIT_INTERRUPTED, Ambiguous, Interrupted, KbError, NotFound

if TYPE_CHECKING:
    from kb.knowledge import KnowledgeBase


F = TypeVar("F", bound=Callable[..., Any])
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE: what a shell reports for a writer whose reader left
# Set by a command whose process holds nothing worth tearing down when it ends (`kb match`:
# the index, the log's lines and the Hyperscan databases go with the process; `kb import`, once
# it has committed and closed its connections): the `kb` program (kb.cli.program) then ends it
# without the interpreter's finalization (kb.cli.exit_now).
ONE_SHOT: dict[str, bool] = {"ends_quickly": False}


class KbGroup(click.Group):
    """Turns every KbError into its one-line message, next step and exit code."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except KbError as exc:
            from kb.render import safe

            prefix = "" if isinstance(exc, Interrupted) else "Error: "
            click.echo(prefix + safe(exc.message, multiline=False), err=True)
            listed = exc.candidates if isinstance(exc, Ambiguous) else []
            if isinstance(exc, NotFound) and exc.suggestions:
                click.echo("Did you mean:", err=True)
                listed = exc.suggestions
            for found in listed:
                click.echo(
                    f"  {found.id}  {safe(found.repo, multiline=False)}/"
                    f"{safe(found.slug, multiline=False)}  "
                    f"{safe(found.detail, multiline=False)}",
                    err=True,
                )
            if exc.hint:
                click.echo(exc.hint, err=True)
            ctx.exit(exc.exit_code)
        except KeyboardInterrupt:
            # Ctrl-C: one line and 130, not click's "Aborted!" and 1 ("nothing found").
            # Commands that write catch it first and say what was stored.
            click.echo("Interrupted.", err=True)
            ctx.exit(EXIT_INTERRUPTED)
        except BrokenPipeError:
            # The reader of stdout went away (`kb export - | head`): stop as a program killed
            # by SIGPIPE would, without a second error when Python flushes stdout at exit.
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            ctx.exit(EXIT_BROKEN_PIPE)
        except Exception as exc:
            # A database failure outside the library's own checks (a lock, a dropped server).
            # (SQLAlchemy's wrapper, or psycopg's own error on the quick path)
            sa_exc = sys.modules.get("sqlalchemy.exc")
            psycopg = sys.modules.get("psycopg")
            if sa_exc is not None and isinstance(exc, sa_exc.DBAPIError):
                cause: BaseException = exc.orig
            elif psycopg is not None and isinstance(exc, psycopg.Error):
                cause = exc
            else:
                raise
            from kb.config import masked

            reason = " ".join(masked(str(cause)).split())
            click.echo(f"Error: database error: {reason}", err=True)
            ctx.exit(EXIT_DATABASE)


def completer(kind: str) -> Callable[[click.Context, Any, str], list[str]]:
    """Shell completion of ids, slugs, repositories, tags or classes from the knowledge base
    (`--db` as typed so far, else the default one)."""

    def complete(ctx: click.Context, _param: Any, incomplete: str) -> list[str]:
        from kb.complete import candidates

        root = ctx.find_root()
        return candidates(kind, incomplete, root.params.get("db"))

    return complete


def min_score_option(func: F) -> F:
    """How sure a match must be, the same on every command that matches."""
    return click.option(
        "--min-score",
        type=click.FloatRange(0, 1),
        default=None,
        callback=lambda _ctx, _param, value: a_number(value),
        help="Report errors scoring at least this (default: the matcher's, 0.5).",
    )(func)


def terminal_options(func: F) -> F:
    """--color and --no-pager, on every command that prints for people."""
    func = click.option("--no-pager", is_flag=True, help="Never page long output on a terminal.")(
        func
    )
    return click.option(
        "--color",
        type=click.Choice(["auto", "always", "never"]),
        default="auto",
        show_default=True,
        help="Colour: on a terminal (auto; never with NO_COLOR, always with FORCE_COLOR).",
    )(func)


def style_for(color: str) -> Any:
    """Terminal styling: colour as asked, prose as wide as the terminal."""
    from kb import render, terminal

    return render.Style(terminal.use_color(color), width=terminal.width())


def show_text(text: str, no_pager: bool) -> None:
    """Output for people: on a terminal, through the pager when longer than the screen."""
    from kb import terminal

    terminal.page(text, enabled=not no_pager)


class SlowNotice:
    """Status lines of a slow step (fetching or building the matcher index) on a terminal: the
    first only once the step has taken NOTICE_AFTER_S (most take less), the closing one, with
    the step's true elapsed time, only when the first was shown."""

    NOTICE_AFTER_S = 0.3  # below this a step needs no explaining

    def __init__(self) -> None:
        self._timer: Any = None
        self._shown = False

    def __call__(self, line: str) -> None:
        import threading

        if self._timer is None:
            self._timer = threading.Timer(self.NOTICE_AFTER_S, self._show, (line,))
            self._timer.daemon = True
            self._timer.start()
            return
        self._timer.cancel()
        self._timer = None
        if self._shown:
            click.echo(line, err=True)
        self._shown = False

    def _show(self, line: str) -> None:
        self._shown = True
        click.echo(line, err=True)


def slow_notice() -> SlowNotice | None:
    return SlowNotice() if sys.stderr.isatty() else None


def a_number(value: float | None) -> float | None:
    """click's FloatRange lets NaN through (every comparison with it is false)."""
    if value is not None and math.isnan(value):
        raise click.BadParameter("must be a number, not NaN")
    return value


def open_kb(ctx: click.Context) -> KnowledgeBase:
    from kb.knowledge import KnowledgeBase
    from kb.render import safe

    def note(text: str) -> None:
        click.echo("note: " + safe(text, multiline=False), err=True)

    return KnowledgeBase(ctx.obj.get("db"), notify=note)


def format_option(func: F) -> F:
    """The same output choice on every command that prints records."""
    return click.option(
        "--format",
        "fmt",
        type=click.Choice(["text", "json", "markdown"]),
        default="text",
        show_default=True,
        help="Text for people, markdown for tickets, JSON for programs.",
    )(func)
