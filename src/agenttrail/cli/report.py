"""Commands that report across sessions: usage (tokens and cost) and diff (where two sessions
part)."""

from __future__ import annotations

import difflib
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape

from agenttrail.cli._common import err, find_session, open_log, out, say_undated
from agenttrail.cli._listing import is_terminal, list_table, print_tsv, unique_prefix
from agenttrail.cli._options import DbOption, JsonOption, complete_session
from agenttrail.codec import json_line
from agenttrail.errors import InputError
from agenttrail.views.safe import safe
from agenttrail.views.session_list import by_start, checked_range, within
from agenttrail.views.units import counted
from agenttrail.views.usage import (
    GROUPS,
    NO_DAY,
    PARTIAL_NOTE,
    RECORDED,
    Call,
    Totals,
    calls_of,
    totals_by,
    totals_of,
    usage_totals_of,
)

if TYPE_CHECKING:  # the price table and diff load only in the commands that use them
    from agenttrail.views.diff import Change, Divergence

__all__ = ["diff", "usage"]

DIFF_LINES = 12
"""Lines of a changed text shown per field in ``diff``'s report (``--json`` has them whole)."""


def usage(
    sessions: Annotated[
        list[str] | None,
        typer.Argument(metavar="[SESSION]...", help="Sessions (ids or prefixes); default all."),
    ] = None,
    by: Annotated[str, typer.Option("--by", help=f"Group by: {', '.join(GROUPS)}.")] = "session",
    since: Annotated[
        str | None,
        typer.Option(
            "--since", metavar="DATE", help="Only calls made on or after this UTC date or time."
        ),
    ] = None,
    until: Annotated[
        str | None,
        typer.Option(
            "--until", metavar="DATE", help="Only calls made on or before this UTC date or time."
        ),
    ] = None,
    db: DbOption = None,
    json: JsonOption = False,
) -> None:
    """Tokens by kind (input, output, cache read, cache write) and cost, grouped.

    Cost is what the source recorded (a Langfuse export's cost), else the price of the tokens
    in the offline price table at the call's date; `unknown` for a model it does not price.
    On a terminal, a table, its last line the total when there are several groups. In a pipe,
    one tab-separated line per group (no total): the group, calls, input, output, cache read
    and cache write tokens (empty when not reported), cost.

    Example:

    - `agenttrail usage sample-harvey-session --by turn`
    """
    group = next((g for g in GROUPS if g == by), None)
    if group is None:
        raise InputError(f"--by {by!r}: use one of {', '.join(GROUPS)}")
    since, until = checked_range(since, until, ("--since", "--until"))  # as sessions reads them
    calls: list[Call] = []
    with open_log(db) as store:
        every = by_start(store.sessions())  # listed as `sessions` lists them
        chosen = [find_session(store, s) for s in sessions] if sessions else every
        for session in chosen:
            calls += calls_of(session, store.read(session.id))
    if since is not None or until is not None:
        say_undated(len({c.session_id for c in calls if not c.dated}))  # those with calls
        calls = [c for c in calls if within(c.created_at if c.dated else None, since, until)]
    if not calls:  # else nothing at all is printed, as for a log that could not be read
        after = f" on or after {since}" if since is not None else ""
        after += f" on or before {until}" if until is not None else ""
        err.print(
            f"no model calls with usage{after} in {counted(len(chosen), 'session')}", markup=False
        )
        return  # no table of no rows (its widths were worked out from none: a traceback)
    groups = totals_by(calls, group)
    if json:
        for key, totals in groups.items():
            shown = None if by == "day" and key == NO_DAY else key  # JSON's own "no value"
            out.print(json_line({by: shown, **totals.record()}), markup=False)
        return
    kinds = ("input", "output", "cache_read", "cache_write")
    if not is_terminal():
        print_tsv(
            (key, t.calls, *(t.tokens[k] for k in kinds), t.cost_text())
            for key, t in groups.items()
        )
        return
    from agenttrail.providers.prices import PRICE_SOURCE

    def cells(key: str, totals: Totals) -> tuple[str, ...]:
        return (key, str(totals.calls), *(totals.count_text(kind) for kind in kinds))

    # a recorded cost's currency comes from the log (Langfuse's costDetails): as the keys
    rows = [
        (*cells(escape(safe(key)), t), escape(safe(t.cost_text()))) for key, t in groups.items()
    ]
    # Several groups get a bold last line of their sum (one group's would repeat its row),
    # its cost on two lines when part is unknown: `$0.48 + unknown` is wider than any row's.
    total = totals_of(calls) if len(groups) > 1 else None
    footer = (
        () if total is None else (*cells("total", total), escape(safe(_lines(total.cost_text()))))
    )
    # a sum with a `+ ?` is said what it is under the table, as the prices are: the last
    # line's sum has one whenever a row has (and may when none has)
    last = total if total is not None else next(iter(groups.values()))
    # where the costs come from (the last line counts every call): the price table only
    # when it priced one of them, and why a cost is unknown
    named = sorted(last.sources - {PRICE_SOURCE, RECORDED})
    said = [f"prices: {PRICE_SOURCE}"] if PRICE_SOURCE in last.sources else []
    if named or RECORDED in last.sources:  # who recorded them, where the source says
        said.append("costs as recorded" + (f": {', '.join(named)}" if named else ""))
    if last.unpriced_models:
        said.append(f"unknown: no price for {', '.join(sorted(last.unpriced_models))}")
    said += [PARTIAL_NOTE] if last.partial() else []
    # the names come from the log, so they are made safe and escaped as the rows' are: a
    # "[/m]" in a model's name was Rich markup (a traceback), "\x1b[2J" a terminal control
    caption = escape(safe("\n".join(said))) if said else None
    table = list_table(caption=caption, caption_justify="left", show_footer=bool(footer))
    # folded where too long, never cut off
    table.add_column(by, overflow="fold", ratio=1, footer=footer[0] if footer else "")
    names = ("calls", "input", "output", "cache read", "cache write", "cost")
    keys = max((len(row[0]) for row in rows), default=0)
    keys = keys if by in ("session", "turn") else min(keys, MODEL_NAME_CELLS)
    # On a narrow terminal the headers of two words take two lines ("cache" / "read"), so
    # that a model's name is not folded for the width of a header; a session id still too
    # long is cut to a prefix that names it, as `sessions` does.
    headers = list(names)
    widest = [*rows, footer] if footer else rows
    if keys + _room_taken(headers, widest) > out.width:
        headers = [name.replace(" ", "\n") for name in names]
    if by in ("session", "turn") and keys + _room_taken(headers, widest) > out.width:
        ids = [str(key).partition("#")[0] for key in groups]
        prefix = unique_prefix(ids, [s.id for s in every])
        rows = [(_cut_id(row[0], prefix), *row[1:]) for row in rows]
    for n, header in enumerate(headers, start=1):
        table.add_column(header, justify="right", no_wrap=True, footer=footer[n] if footer else "")
    for row in rows:
        table.add_row(*row)
    out.print(table)


def _room_taken(headers: list[str], rows: list[tuple[str, ...]]) -> int:
    """Columns the numbers of ``usage``'s table take, with the gaps before them (a cell of
    two lines takes its longer line's)."""
    return sum(
        max(_width(header), *(_width(row[n]) for row in rows)) + 2
        for n, header in enumerate(headers, start=1)
    )


def _width(cell: str) -> int:
    return max(map(len, cell.split("\n")))


def _lines(cost: str) -> str:
    """A cost of known and unknown parts (``$0.48 + unknown``) on a line each."""
    return cost.replace(" + ", "\n+ ")


def _cut_id(key: str, prefix: int) -> str:
    """A session id, or a turn's ``<session id>#<seq>``, with the id cut to ``prefix``."""
    sid, mark, seq = key.partition("#")
    return sid[:prefix] + mark + seq


MODEL_NAME_CELLS = 30
"""The widest key ``usage``'s table keeps whole on a narrow terminal, two-line headers
first: a model's name with its date (``claude-haiku-4-5-20251001``); a longer one is
folded. A session id is cut to a prefix that names it instead (``unique_prefix``)."""


def diff(
    a: Annotated[
        str,
        typer.Argument(
            metavar="A",
            help="Session id or a unique prefix of it.",
            autocompletion=complete_session,
        ),
    ],
    b: Annotated[
        str,
        typer.Argument(
            metavar="B",
            help="Session id or a unique prefix of it.",
            autocompletion=complete_session,
        ),
    ],
    db: DbOption = None,
    b_db: Annotated[
        str | None,
        typer.Option(
            "--b-db",
            metavar="URL",
            help="The log B is in, when not the one --db names (a copy, an import).",
        ),
    ] = None,
    json: Annotated[bool, typer.Option("--json", help="The alignment as one JSON object.")] = False,
) -> None:
    """Align two sessions step by step and show the first point where they part.

    Steps are messages, tool calls and tool results, compared by what they say (role, text,
    model; tool name and arguments; output and status), not by ids or times. Exits 0 when
    every step is alike, 1 when they differ, as diff(1) does. B may be in another log
    (--b-db): a session and its copy, or its import from an export in another format.

    Example:

    - `agenttrail diff sample-harvey-session sample-harvey-session`
    """
    with open_log(db) as store:
        first = find_session(store, a)
        a_events = list(store.read(first.id))
        if b_db is None:
            second = find_session(store, b)
            b_events = list(store.read(second.id))
    if b_db is not None:
        with open_log(b_db) as other:
            second = find_session(other, b)
            b_events = list(other.read(second.id))
    from agenttrail.views.diff import diff_sessions

    result = diff_sessions(a_events, b_events)
    if json:
        out.print(json_line({"a": first.id, "b": second.id, **result.record()}), markup=False)
    else:
        spent = [usage_totals_of(events) for events in (a_events, b_events)]
        for name, session, steps, usage in zip(
            "AB", (first, second), (result.a, result.b), spent, strict=True
        ):
            # the tokens on a line of their own, under the id: one line was 124 columns
            spent_line = f"   {usage.tokens_text()}"
            if usage.calls:  # as show's header and the export: no model call, no cost
                spent_line += f" · cost {usage.cost_text()}"
            out.print(
                safe(f"{name}: {session.id} · {len(steps)} steps\n{spent_line}"), markup=False
            )
        _print_first(result.first, result.prefix)
        rest = result.divergences[1:]
        if rest:
            out.print(
                f"{len(rest)} more difference{'s' if len(rest) > 1 else ''} after it", markup=False
            )
    if result.divergences:
        raise typer.Exit(1)


def _print_first(first: Divergence | None, prefix: int) -> None:
    if first is None:
        out.print(f"identical: all {counted(prefix, 'step')} alike", markup=False)
        return
    alike = f"alike for the first {counted(prefix, 'step')}; " if prefix else ""
    out.print(f"{alike}they part at:", markup=False)
    for name, steps in (("A", first.a), ("B", first.b)):
        where = (
            f"seq {steps[0].seq} (turn {steps[0].turn}): {steps[0].label()}"
            if steps
            else "nothing here"
        )
        extra = f" and {counted(len(steps) - 1, 'more step')}" if len(steps) > 1 else ""
        out.print(safe(f"  {name} {where}{extra}"), markup=False)
    for change in first.changes:
        _print_change(change)


def _print_change(change: Change) -> None:
    a, b = (v if isinstance(v, str) else json_line(v) for v in (change.a, change.b))
    out.print(safe(f"  {change.field}:"), markup=False)
    if "\n" not in a and "\n" not in b:
        out.print(safe(f"    - {a}\n    + {b}"), markup=False)
        return
    lines = list(difflib.unified_diff(a.splitlines(), b.splitlines(), "A", "B", lineterm="", n=1))
    for line in lines[2 : 2 + DIFF_LINES]:
        out.print(safe(f"    {line}"), markup=False)
    if len(lines) > 2 + DIFF_LINES:
        out.print(f"    … {len(lines) - 2 - DIFF_LINES} more lines (--json has them)", markup=False)
