"""The Typer app of the ``agenttrail`` command, built from the command groups in the order
``agenttrail --help`` lists them (:data:`COMMANDS`); :func:`agenttrail.cli.main` runs it.

A flag (``--json``, ``--help``) is listed in ``--help`` as itself: Typer's Rich help shows a
parameter's metavar in place of its type when one is given (``TyperOption.display_type_rich``)
and otherwise the type, ``<bool>`` for a flag, which reads as if the flag took a value; the
commands and the app give each flag the empty metavar before their help is written, as
Click's own help does (it never shows a flag's type)."""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from typing import TYPE_CHECKING, Annotated, Any

import typer
from typer.core import TyperCommand, TyperGroup

from agenttrail import __version__
from agenttrail.cli._common import out

if TYPE_CHECKING:
    app: typer.Typer

__all__ = ["COMMANDS", "app", "app_for"]


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


COMMANDS: tuple[tuple[str, str, str], ...] = (
    ("import", "imports", "import_command"),
    ("watch", "watch", "watch"),
    ("sessions", "log", "sessions"),
    ("show", "log", "show"),
    ("search", "search", "search_command"),
    ("export", "log", "export"),
    ("push", "push", "push"),
    ("fountain", "log", "fountain"),
    ("usage", "report", "usage"),
    ("diff", "report", "diff"),
    ("verify", "evidence", "verify"),
    ("reconcile", "evidence", "reconcile_command"),
    ("claims", "evidence", "claims"),
    ("quickstart", "quickstart", "quickstart"),
    ("traces", "evidence", "traces"),
    ("trace", "evidence", "trace"),
    ("retain", "admin", "retain"),
    ("erase", "admin", "erase"),
    ("keygen", "evidence", "keygen"),
    ("checkpoint", "evidence", "checkpoint"),
    ("replay", "log", "replay"),
    ("serve", "admin", "serve"),
    ("proxy", "admin", "proxy"),
    ("token", "admin", "token"),
    ("migrate", "admin", "migrate_command"),
)
"""Every command: its name, its module in :mod:`agenttrail.cli` and its function there, in
the order ``agenttrail --help`` lists them."""


def app_for(args: Sequence[str]) -> typer.Typer:
    """The app to run the command line ``args`` (without the program's name) with: one
    holding only the command ``args`` starts with, when they start with a command's name,
    else one holding every command (for ``--help``, an unknown command, an option given
    before the command). Typer builds every option and help text of an app's commands
    before it parses anything, and their modules are imported to name them: building one
    command, not 25, takes 0.03 s off every command's start (bench/scale.py)."""
    named = [entry for entry in COMMANDS if args and entry[0] == args[0]]
    return _app(named or COMMANDS)


def _app(commands: Sequence[tuple[str, str, str]]) -> typer.Typer:
    """A Typer app of ``commands`` (entries of :data:`COMMANDS`) and the ``--version`` option."""
    built = typer.Typer(
        name="agenttrail",
        cls=_Group,
        help="A flight recorder for AI agents: import, read and verify agent session logs.",
        no_args_is_help=True,
        pretty_exceptions_enable=False,
        rich_markup_mode="markdown",
    )
    for name, module, function in commands:
        command = getattr(importlib.import_module(f"agenttrail.cli.{module}"), function)
        built.command(name, cls=_Command)(command)
    built.callback()(_root)
    return built


def __getattr__(name: str) -> Any:
    if name == "app":  # every command (tests, the docs' checks); main() builds app_for's
        return _app(COMMANDS)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _version(value: bool) -> None:
    if value:
        out.print(f"agenttrail {__version__}", markup=False)
        raise typer.Exit()


def _root(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version.")
    ] = False,
) -> None:
    """A flight recorder for AI agents: import, read and verify agent session logs."""
