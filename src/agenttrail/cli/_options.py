"""The options many commands take: ``--db``, ``SESSION`` (completed from the log's session
ids), ``--json``, ``--max-bytes`` and ``--no-redact``, defined once so that every command
spells and explains them alike; and the parsers of a seq and a count of seqs, which say
what they take when given something else."""

from __future__ import annotations

from typing import Annotated

import typer

from agenttrail.limits import DEFAULT_MAX_IMPORT_BYTES

__all__ = [
    "DbOption",
    "JsonOption",
    "MaxBytesOption",
    "NoRedactOption",
    "SessionArg",
    "complete_session",
    "parse_count",
    "parse_seq",
]

DbOption = Annotated[
    str | None,
    typer.Option(
        "--db",
        help="Database: a file path, sqlite:///path or postgresql://user@host/dbname "
        "(?schema=S for a schema). Default: $AGENTTRAIL_DATABASE_URL, else ./agenttrail.db.",
        show_default=False,
    ),
]


def complete_session(ctx: typer.Context, incomplete: str) -> list[str]:
    """Shell completion of a SESSION: the ids in the log (``--db`` if given before it) that
    start with what is typed; none when the log cannot be opened (completion never fails)."""
    from agenttrail.cli._common import open_log
    from agenttrail.errors import AgentTrailError

    try:
        with open_log(ctx.params.get("db")) as store:
            return [s.id for s in store.sessions() if s.id.startswith(incomplete)]
    except AgentTrailError:
        return []


SessionArg = Annotated[
    str,
    typer.Argument(
        metavar="SESSION",
        help="Session id or a unique prefix of it.",
        autocompletion=complete_session,
    ),
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


def parse_seq(value: str) -> int:
    """A seq given to an option (``show --since``), 1 or more; a date is told apart, as
    ``sessions``, ``usage`` and ``search`` take one for their ``--since``.

    Raises:
        typer.BadParameter: not a whole number of 1 or more.
    """
    if not value.strip().isdecimal():
        raise typer.BadParameter(
            f"{value!r} is not a seq: show starts at an event's seq (1, 2, 3 …), not a date"
        )
    if int(value) < 1:
        raise typer.BadParameter(f"{value!r}: seqs start at 1")
    return int(value)


def parse_count(value: str) -> int:
    """A count of seqs given to an option (``show --tail``), 1 or more.

    Raises:
        typer.BadParameter: not a whole number of 1 or more.
    """
    if not value.strip().isdecimal() or int(value) < 1:
        raise typer.BadParameter(f"{value!r} is not a count of seqs (1, 2, 3 …)")
    return int(value)
