"""The options many commands take: ``--db``, ``SESSION``, ``--json``, ``--max-bytes`` and
``--no-redact``,
defined once so that every command spells and explains them alike."""

from __future__ import annotations

from typing import Annotated

import typer

from agenttrail.limits import DEFAULT_MAX_IMPORT_BYTES

__all__ = ["DbOption", "JsonOption", "MaxBytesOption", "NoRedactOption", "SessionArg"]

DbOption = Annotated[
    str | None,
    typer.Option(
        "--db",
        help="Database: a file path, sqlite:///path or postgresql://user@host/dbname "
        "(?schema=S for a schema). Default: $AGENTTRAIL_DATABASE_URL, else ./agenttrail.db.",
        show_default=False,
    ),
]
SessionArg = Annotated[
    str, typer.Argument(metavar="SESSION", help="Session id or a unique prefix of it.")
]
JsonOption = Annotated[bool, typer.Option("--json", help="One JSON object per line.")]
MaxBytesOption = Annotated[
    int | None,
    typer.Option(
        "--max-bytes",
        help="Largest file read, in bytes. Default: $AGENTTRAIL_MAX_IMPORT_BYTES, else "
        f"{DEFAULT_MAX_IMPORT_BYTES:,} (256 MiB).",
        show_default=False,
    ),
]
NoRedactOption = Annotated[
    bool,
    typer.Option(
        "--no-redact",
        help="Store payloads verbatim, secrets included (as AGENTTRAIL_REDACT=0). Default: "
        "API keys, tokens, passwords and secret fields are replaced by markers before they "
        "are stored (docs/redaction.md).",
    ),
]
