"""The options many commands take: ``--db``, ``SESSION`` and ``--json``, defined once so that
every command spells and explains them alike."""

from __future__ import annotations

from typing import Annotated

import typer

__all__ = ["DbOption", "JsonOption", "SessionArg"]

DbOption = Annotated[
    str | None,
    typer.Option(
        "--db",
        help="Database: a file path, sqlite:///path or postgresql://user@host/dbname[?schema=S]. "
        "Default: $AGENTTRAIL_DATABASE_URL, else ./agenttrail.db.",
        show_default=False,
    ),
]
SessionArg = Annotated[
    str, typer.Argument(metavar="SESSION", help="Session id or a unique prefix of it.")
]
JsonOption = Annotated[bool, typer.Option("--json", help="One JSON object per line.")]
