"""The Typer app of the ``agenttrail`` command, built from the command groups in the order
``agenttrail --help`` lists them (:data:`COMMANDS`); :func:`agenttrail.cli.main` runs it.

A flag (``--json``, ``--help``) is listed in ``--help`` as itself: Typer's Rich help shows a
parameter's metavar in place of its type when one is given (``TyperOption.display_type_rich``)
and otherwise the type, ``<bool>`` for a flag, which reads as if the flag took a value; the
commands and the app give each flag the empty metavar before their help is written, as
Click's own help does (it never shows a flag's type)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

import typer
from typer.core import TyperCommand, TyperGroup

from agenttrail import __version__
from agenttrail.cli import admin, evidence, log, push, quickstart, report, search, watch
from agenttrail.cli._common import out

__all__ = ["COMMANDS", "app"]


def _plain_flags(command: Any, ctx: Any) -> None:
    """Give each flag of ``command`` without a metavar the empty one (module docstring)."""
    for param in command.get_params(ctx):
        if getattr(param, "is_flag", False) and param.metavar is None:
            param.metavar = ""


class _Command(TyperCommand):
    """A command whose ``--help`` lists flags without a type."""

    def format_help(self, ctx: Any, formatter: Any) -> None:
        _plain_flags(self, ctx)
        super().format_help(ctx, formatter)


class _Group(TyperGroup):
    """The app, whose ``--help`` lists flags without a type."""

    def format_help(self, ctx: Any, formatter: Any) -> None:
        _plain_flags(self, ctx)
        super().format_help(ctx, formatter)


app = typer.Typer(
    name="agenttrail",
    cls=_Group,
    help="A flight recorder for AI agents: import, read and verify agent session logs.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode="markdown",
)

COMMANDS: tuple[tuple[str, Callable[..., Any]], ...] = (
    ("import", log.import_command),
    ("watch", watch.watch),
    ("sessions", log.sessions),
    ("show", log.show),
    ("search", search.search_command),
    ("export", log.export),
    ("push", push.push),
    ("fountain", log.fountain),
    ("usage", report.usage),
    ("diff", report.diff),
    ("verify", evidence.verify),
    ("reconcile", evidence.reconcile_command),
    ("claims", evidence.claims),
    ("quickstart", quickstart.quickstart),
    ("traces", evidence.traces),
    ("trace", evidence.trace),
    ("retain", admin.retain),
    ("erase", admin.erase),
    ("keygen", evidence.keygen),
    ("checkpoint", evidence.checkpoint),
    ("replay", log.replay),
    ("serve", admin.serve),
    ("proxy", admin.proxy),
    ("token", admin.token),
    ("migrate", admin.migrate_command),
)
"""Every command and its function, in the order ``agenttrail --help`` lists them."""

for _name, _command in COMMANDS:
    app.command(_name, cls=_Command)(_command)


def _version(value: bool) -> None:
    if value:
        out.print(f"agenttrail {__version__}", markup=False)
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version.")
    ] = False,
) -> None:
    """A flight recorder for AI agents: import, read and verify agent session logs."""
