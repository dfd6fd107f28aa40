"""The ``agenttrail`` command. Each command parses its arguments, calls the library and prints.

Data goes to stdout and messages to stderr, so ``agenttrail export … | jq`` works. Every
agenttrail error ends as one ``error: …`` line on stderr and exit code 2 for bad input or usage,
1 for a check that found a problem (``verify``, ``reconcile``, ``claims``) or a store failure —
never a traceback.

The commands live in one module per group: :mod:`.log` (import, sessions, show, export,
fountain, replay, quickstart), :mod:`.evidence` (verify, reconcile, claims, traces, trace,
keygen, checkpoint), :mod:`.admin` (retain, serve, proxy, token, migrate), :mod:`.report`
(usage, diff), :mod:`.watch` (watch) and :mod:`.push` (push); :mod:`._options` and
:mod:`._common` hold the options and helpers they share. This module builds the app from them,
in the order ``agenttrail --help`` lists them (:data:`COMMANDS`).
"""

from __future__ import annotations

import signal
from collections.abc import Callable
from typing import Annotated, Any

import typer

from agenttrail import __version__
from agenttrail.cli import admin, evidence, log, push, report, search, watch
from agenttrail.cli._common import err, out
from agenttrail.errors import AgentTrailError

__all__ = ["app", "main"]

app = typer.Typer(
    name="agenttrail",
    help="A flight recorder for AI agents: import, read and verify agent session logs.",
    add_completion=False,
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


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; return the exit code (``agenttrail`` console script).

    Usage errors are Typer's own (a usage line, exit 2); an :class:`AgentTrailError` becomes
    one ``error: …`` line on stderr and the error's exit code.
    """
    # Die quietly when the reader of our output goes away (`agenttrail export … | head`),
    # as Unix tools do, instead of a broken-pipe error at exit. `serve` ignores SIGPIPE
    # again once it has printed its address (cli/admin.py): its sockets must not kill it.
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    try:
        app(args=argv, prog_name="agenttrail")
    except SystemExit as e:
        return e.code if isinstance(e.code, int) else 0 if e.code is None else 1
    except AgentTrailError as e:
        err.print(f"error: {e}", markup=False)
        return e.exit_code
    return 0
