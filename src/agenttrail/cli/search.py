"""``agenttrail search``: find text in sessions through the search index (docs/search.md)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from typing import Annotated

import typer
from rich.markup import escape

from agenttrail.cli._common import err, find_session, open_log, out, refuse_blank, say_undated
from agenttrail.cli._listing import is_terminal, print_tsv
from agenttrail.cli._options import DbOption, JsonOption
from agenttrail.codec import json_line
from agenttrail.errors import InputError
from agenttrail.model.search import SearchFilter
from agenttrail.views.safe import safe
from agenttrail.views.search import HITS_PER_SESSION, SessionMatch, narrows_events, search
from agenttrail.views.session_list import checked_range
from agenttrail.views.units import counted

__all__ = ["search_command"]


def search_command(
    query: Annotated[
        str,
        typer.Argument(
            metavar="[QUERY]",
            help="Text to find (any case). Left out with --errors, --tool, --since or --until:"
            " every event they pick.",
            show_default=False,
        ),
    ] = "",
    session: Annotated[
        str | None,
        typer.Option("--session", metavar="SESSION", help="Only this session (id or prefix)."),
    ] = None,
    tool: Annotated[
        str | None,
        typer.Option(
            "--tool", metavar="NAME", help="Only calls and results of this tool (in any case)."
        ),
    ] = None,
    errors: Annotated[
        bool,
        typer.Option(
            "--errors", help="Only errors, failed tool results and failed shell commands."
        ),
    ] = False,
    agent: Annotated[
        str | None,
        typer.Option("--agent", metavar="A", help="Only sessions of this agent (in any case)."),
    ] = None,
    since: Annotated[
        str | None,
        typer.Option(
            "--since", metavar="DATE", help="Only events on or after this UTC date or time."
        ),
    ] = None,
    until: Annotated[
        str | None,
        typer.Option(
            "--until", metavar="DATE", help="Only events on or before this UTC date or time."
        ),
    ] = None,
    hits: Annotated[
        int, typer.Option("--hits", min=1, help="Matching events shown per session.")
    ] = HITS_PER_SESSION,
    db: DbOption = None,
    json: JsonOption = False,
) -> None:
    """Find text in message text, tool names, inputs and outputs, errors and session fields.

    Case and accents are ignored (STRASSE finds Straße, cafe finds café), in any script.
    Events appended since the last search are indexed first. Prints each matching session
    with its first matching events (--hits of them) and a snippet of each; --json prints
    one object per session. In a pipe, one tab-separated line per matching event shown:
    session, seq, type, snippet; a session whose own fields match has a line first:
    session, (empty), session, and the fields that match (`matches id, title, agent`).

    Without QUERY, --errors, --tool, --since and --until list the events they pick, each
    with the start of its text: `agenttrail search --errors` finds every error, failed tool
    result and failed shell command.

    Example:

    - `agenttrail search "undefined variable" --session sample-harvey-session`
    - `agenttrail search --errors --since 2026-06-24`
    """
    refuse_blank(agent=agent, tool=tool)
    since, until = checked_range(since, until, ("--since", "--until"))
    where = SearchFilter(tool=tool, errors=errors, agent=agent, since=since, until=until)
    if not query.strip() and not narrows_events(where):  # it would match nothing: a slip
        picked = [name for name, given in (("--agent", agent), ("--session", session)) if given]
        verb = "picks" if len(picked) == 1 else "pick"
        why = f" ({' and '.join(picked)} {verb} sessions, not events)" if picked else ""
        raise InputError(
            "the query is blank: give the text to find, or --errors, --tool, --since or "
            f"--until for every event they pick{why}"
        )
    with open_log(db) as store:
        chosen = [find_session(store, session)] if session else store.sessions()
        where = replace(where, session_ids=[s.id for s in chosen] if session else None)
        found = search(store, query, chosen, where=where, hits_per_session=hits)
        if since is not None or until is not None:  # the undated with events that match
            undated = [s for s in chosen if not s.dated]
            ids = [s.id for s in undated]
            anytime = replace(where, since=None, until=None, session_ids=ids)
            missed = search(store, query, undated, where=anytime) if undated else []
            say_undated(sum(1 for match in missed if match.total))
    if json:
        for match in found:
            out.print(json_line(match.body()), markup=False)
        return
    if not found:  # said on stderr: stdout stays what matched (nothing), for a pipe
        err.print(_no_match(query, session, where), markup=False)
    if not is_terminal():
        print_tsv(_tsv_lines(found))
        return
    from rich.table import Table

    for match in found:
        also = f"  (matches {', '.join(match.fields)})" if match.fields else ""
        count = counted(match.total, "event")
        out.print(f"[bold]{escape(safe(match.session_id))}[/bold]  {count}{also}")
        if not match.hits:
            continue
        # a snippet longer than the terminal goes on under itself, not under the seqs
        grid = Table.grid(padding=(0, 2))
        grid.add_column(justify="right", min_width=8, no_wrap=True)
        grid.add_column(min_width=11, no_wrap=True)
        grid.add_column(ratio=1, overflow="fold")
        for hit in match.hits:
            grid.add_row(str(hit.seq), escape(hit.type or "-"), escape(hit.snippet))
        out.print(grid)
        if match.total > len(match.hits):  # the header counted them: say where they are
            more = match.total - len(match.hits)
            out.print(f"{'…':>8}  {more} more: --hits {match.total} shows them", style="dim")


def _no_match(query: str, session: str | None, where: SearchFilter) -> str:
    """``no match for 'QUERY'``, with the filters that narrowed the search, and what a user
    of shell globs or search engines may not know: the text is found as written."""
    narrowed = [
        said
        for said, given in (
            (f"session {session}", session),
            (f"tool {where.tool}", where.tool),
            ("errors only", where.errors),
            (f"agent {where.agent}", where.agent),
            (f"since {where.since}", where.since),
            (f"until {where.until}", where.until),
        )
        if given
    ]
    what = f"no match for {query!r}" if query.strip() else "no event"
    line = what + (f" ({', '.join(narrowed)})" if narrowed else "")
    if any(c in query for c in "*?"):
        return f"{line}; the query is text as written: * and ? are not wildcards"
    if len(query) > 1 and query[0] == query[-1] and query[0] in "\"'":
        return f"{line}; the query is text as written: its quotes are searched for too"
    return line


def _tsv_lines(found: list[SessionMatch]) -> Iterator[tuple[object, ...]]:
    """A search's lines in a pipe: a session matched by its own fields first gets a line of
    its own (seq empty, type ``session``), as on a terminal; then one per matching event."""
    for match in found:
        if match.fields:
            yield match.session_id, None, "session", f"matches {', '.join(match.fields)}"
        for hit in match.hits:
            yield match.session_id, hit.seq, hit.type, hit.snippet
