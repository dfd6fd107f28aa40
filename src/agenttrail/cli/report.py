"""Commands that report across sessions: usage (tokens and cost) and diff (where two sessions
part)."""

from __future__ import annotations

from datetime import date
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from agenttrail.cli._common import find_session, open_log, out
from agenttrail.cli._options import DbOption, JsonOption
from agenttrail.codec import json_line
from agenttrail.errors import InputError
from agenttrail.providers.prices import PRICE_SOURCE
from agenttrail.views.terminal import safe
from agenttrail.views.usage import GROUPS, Call, calls_of, totals_by

__all__ = ["usage"]


def usage(
    sessions: Annotated[
        list[str] | None,
        typer.Argument(metavar="[SESSION]...", help="Sessions (ids or prefixes); default all."),
    ] = None,
    by: Annotated[str, typer.Option("--by", help=f"Group by: {', '.join(GROUPS)}.")] = "session",
    since: Annotated[
        str | None,
        typer.Option("--since", metavar="DATE", help="Only calls made on or after this UTC date."),
    ] = None,
    db: DbOption = None,
    json: JsonOption = False,
) -> None:
    """Tokens by kind (input, output, cache read, cache write) and cost, grouped.

    Cost is what the source recorded (a Langfuse export's cost), else the price of the tokens
    in the offline price table at the call's date; `unknown` for a model it does not price.

    Example: `agenttrail usage --by model --since 2026-01-01`
    """
    group = next((g for g in GROUPS if g == by), None)
    if group is None:
        raise InputError(f"--by {by!r}: use one of {', '.join(GROUPS)}")
    if since is not None and not _is_date(since):
        raise InputError(f"--since {since!r}: expected a date, YYYY-MM-DD")
    calls: list[Call] = []
    with open_log(db) as store:
        chosen = [find_session(store, s) for s in sessions] if sessions else store.sessions()
        for session in chosen:
            calls += calls_of(session, store.read(session.id))
    if since is not None:
        calls = [c for c in calls if c.created_at[:10] >= since]
    groups = totals_by(calls, group)
    if json:
        for key, totals in groups.items():
            out.print(json_line({by: key, **totals.record()}), markup=False)
        return
    table = Table(expand=True, caption=f"prices: {PRICE_SOURCE}", caption_justify="left")
    table.add_column(by, no_wrap=True)  # whole, so that an id can be copied
    table.add_column("calls", justify="right", no_wrap=True)
    for kind in ("input", "output", "cache read", "cache write"):
        table.add_column(kind, justify="right", no_wrap=True)
    table.add_column("cost", justify="right", no_wrap=True)
    for key, totals in groups.items():
        counts = (totals.tokens[k] for k in ("input", "output", "cache_read", "cache_write"))
        table.add_row(
            escape(safe(key)),
            str(totals.calls),
            *("-" if n is None else f"{n:,}" for n in counts),
            totals.cost_text(),
        )
    out.print(table)


def _is_date(text: str) -> bool:
    try:
        date.fromisoformat(text)
    except ValueError:
        return False
    return len(text) == 10
