"""The Typer app of the ``agenttrail`` command, built from the command groups in the order
``agenttrail --help`` lists them (:data:`COMMANDS`); :func:`agenttrail.cli.main` runs it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

import typer

from agenttrail import __version__
from agenttrail.cli import admin, evidence, log, push, report, search, watch
from agenttrail.cli._common import out

__all__ = ["COMMANDS", "app"]

app = typer.Typer(
    name="agenttrail",
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
    ("quickstart", log.quickstart),
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
    app.command(_name)(_command)


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
