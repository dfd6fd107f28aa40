"""Commands that read sessions out of the log: sessions, show, export, fountain and replay
(import is :mod:`.imports`; quickstart, which imports, shows and verifies, :mod:`.quickstart`)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from agenttrail.cli._common import (
    collector_paused,
    err,
    find_session,
    held_whole,
    open_log,
    out,
    output_file,
    refuse_blank,
    say_undated,
    write_output,
)
from agenttrail.cli._options import (
    DbOption,
    JsonOption,
    SessionArg,
    parse_count,
    parse_seq,
)
from agenttrail.errors import InputError
from agenttrail.views.units import counted

if TYPE_CHECKING:
    from agenttrail.log.store import LogStore
    from agenttrail.model import Session
    from agenttrail.views.session_list import SessionFilter
    from agenttrail.views.usage import Totals

# The formats, the importer, replay and Rich's tables are imported by the commands that use
# them, not here: `agenttrail --version` and every other command start without them.

FORMAT_NAMES = (
    "jsonl",
    "otlp",
    "fountain",
    "inspect",
    "claude_code",
    "anthropic",
    "langfuse",
    "toolbench",
    "openai",
)
"""Names ``--format`` accepts (``agenttrail.formats.FORMATS``; tests/cli keeps them equal)."""

__all__ = [
    "export",
    "fountain",
    "replay",
    "sessions",
    "show",
]


def sessions(
    db: DbOption = None,
    json: JsonOption = False,
    usage: Annotated[
        bool,
        typer.Option("--usage", help="Add each session's tokens and cost (reads every event)."),
    ] = False,
    agent: Annotated[
        str | None, typer.Option("--agent", help="Only this agent's (in any case).")
    ] = None,
    user: Annotated[str | None, typer.Option("--user", help="Only this user's (any case).")] = None,
    since: Annotated[
        str | None,
        typer.Option("--since", metavar="DATE", help="Started on or after this UTC date or time."),
    ] = None,
    until: Annotated[
        str | None,
        typer.Option("--until", metavar="DATE", help="Started on or before this UTC date or time."),
    ] = None,
    model: Annotated[
        str | None,
        typer.Option(
            "--model",
            help="Only those with a message of this model (in any case, its dated snapshots too).",
        ),
    ] = None,
    errors: Annotated[
        bool, typer.Option("--errors", help="Only those with an error or a failed tool result.")
    ] = False,
    limit: Annotated[
        int | None, typer.Option("--limit", min=1, help="At most this many sessions.")
    ] = None,
) -> None:
    """List sessions: id, started, agent, events, title.

    Oldest start first; a session whose source gave no date has no start time (blank, or
    null in JSON) and comes after the others, in the order they were created. With --usage,
    a column of tokens and cost (and `usage` in JSON, as `agenttrail usage --json` gives it).
    --since and --until compare the start (else when the session was written; a session
    whose source gave no times is in no range); --model and --errors read the search index
    (docs/search.md).

    On a terminal, a table; on a terminal too narrow for whole ids and a readable title, ids
    are cut to a prefix that names one session (every command takes it). In a pipe or a
    file, one line per session, tab-separated and whole: id, started (as recorded), agent,
    events, title (its first line), then tokens and cost with --usage. --json: one object
    per line (docs/usage.md, Output).

    Example:

    - `agenttrail sessions --agent harvey --since 2026-01-01 --limit 20`
    """
    from agenttrail.cli._listing import is_terminal, print_json_lines, print_tsv
    from agenttrail.views.session_list import SessionFilter, by_start, checked_range, list_sessions

    refuse_blank(agent=agent, user=user, model=model)
    since, until = checked_range(since, until, ("--since", "--until"))  # named as typed
    where = SessionFilter(agent, user, since, until, model, errors, limit)
    with open_log(db) as store:
        # the row's created_at is when it was written, not when the session started
        every = store.sessions()
        ordered = by_start(every)
        rows = list_sessions(store, ordered, where).sessions
        if since is not None or until is not None:  # the undated the rest of where takes
            undated = [s for s in ordered if not s.dated]
            anytime = replace(where, since=None, until=None, limit=None)
            say_undated(len(list_sessions(store, undated, anytime).sessions))
        if usage:
            from agenttrail.views.usage import usage_totals_of

            totals = {s.id: usage_totals_of(store.read(s.id)) for s in rows}
    if every and not rows:  # filters that left none: say so, as search does
        err.print(f"no session matches ({', '.join(_filters_said(where))})", markup=False)
        return  # not a table's header over no rows
    if json:
        print_json_lines(
            {**s.record(), **({"usage": totals[s.id].record()} if usage else {})} for s in rows
        )
        return
    if not is_terminal():
        print_tsv(
            (
                s.id,
                s.started,
                s.agent,
                s.head_seq,
                _first_line(s.title),
                *((totals[s.id].token_total(), totals[s.id].cost_text()) if usage else ()),
            )
            for s in rows
        )
        return
    _print_session_table(rows, [s.id for s in every], totals if usage else None)


def _filters_said(where: SessionFilter) -> list[str]:
    """The filters ``sessions`` was given, as its note of no match names them."""
    return [
        said
        for said, given in (
            (f"agent {where.agent}", where.agent),
            (f"user {where.user}", where.user),
            (f"model {where.model}", where.model),
            (f"since {where.since}", where.since),
            (f"until {where.until}", where.until),
            ("errors only", where.errors),
        )
        if given
    ]


TITLE_COLUMNS = 24
"""Columns the title keeps on a terminal (fewer when no title is that long): when whole ids
and start times leave it fewer, ids are cut to a unique prefix, then start times to the date
(a title folded into a column of a few letters is unreadable, as `sessions` printed at 80
columns before)."""


def _print_session_table(
    rows: list[Session], ids: list[str], totals: dict[str, Totals] | None
) -> None:
    from rich.cells import cell_len
    from rich.text import Text

    from agenttrail.cli._listing import list_table, unique_prefix
    from agenttrail.views.safe import safe
    from agenttrail.views.table import print_table

    agents = [min(len(s.agent or ""), AGENT_COLUMNS) for s in rows]
    widths = [
        max((len(s.id) for s in rows), default=2),
        16,  # YYYY-MM-DD HH:MM
        max([5, *agents]),
        max([6, *(len(str(s.head_seq)) for s in rows)]),
    ]
    extra: list[tuple[str, str]] = []
    if totals is not None:
        for s in rows:
            tokens = totals[s.id].token_total()
            extra.append(("-" if tokens is None else f"{tokens:,}", totals[s.id].cost_text()))
        widths += [max([6, *(len(t) for t, _ in extra)]), max([4, *(len(c) for _, c in extra)])]
    gaps = 2 * len(widths)  # two spaces before each column but the first, and the title's
    titles = [cell_len(safe(_first_line(s.title))) for s in rows]
    title_room = min(TITLE_COLUMNS, max([len("title"), *titles]))
    prefix = None
    if _room(widths, gaps) < title_room:
        prefix = unique_prefix([s.id for s in rows], ids)
        widths[0] = min(widths[0], prefix)
    date_only = _room(widths, gaps) < title_room
    if date_only:
        widths[1] = 10  # YYYY-MM-DD
    # still short of room: the events column goes (with --usage, tokens say more of a
    # session's size), then agent names are cut (to 5 columns at least)
    with_events = _room(widths, gaps) >= title_room
    if not with_events:
        gaps -= 2
        widths[3] = 0
    agent_width = max(5, min(widths[2], widths[2] - (title_room - _room(widths, gaps))))
    table = list_table()
    table.add_column("id", no_wrap=True)  # whole or a unique prefix: either can be copied
    table.add_column("started", no_wrap=True)
    table.add_column("agent", overflow="ellipsis", no_wrap=True, max_width=agent_width)
    if with_events:
        table.add_column("events", justify="right", no_wrap=True)
    table.add_column("title", overflow="fold", ratio=1, min_width=8)
    if totals is not None:
        table.add_column("tokens", justify="right", no_wrap=True)
        table.add_column("cost", justify="right", no_wrap=True)

    def cells() -> Iterator[tuple[Text, ...]]:
        for i, s in enumerate(rows):
            started = (s.started or "")[: 10 if date_only else 16].replace("T", " ")
            shown = s.id[:prefix] if prefix is not None else s.id
            values = [shown, started, s.agent or ""]
            values += [str(s.head_seq)] if with_events else []
            values.append(_first_line(s.title))
            if totals is not None:
                values += extra[i]
            yield tuple(Text(safe(v)) for v in values)

    print_table(out, table, cells)


AGENT_COLUMNS = 14
"""Widest agent name shown whole on a terminal; a longer one ends in an ellipsis."""


def _room(widths: list[int], gaps: int) -> int:
    """Columns left for the title beside columns of ``widths`` and ``gaps`` of space."""
    return out.width - sum(widths) - gaps


def _first_line(title: str | None) -> str:
    return title.splitlines()[0] if title else ""


def show(
    session: SessionArg,
    full: Annotated[
        bool, typer.Option("--full", help="Show tool results and runtime notes whole.")
    ] = False,
    since: Annotated[
        int | None,
        typer.Option(
            "--since", metavar="SEQ", parser=parse_seq, help="Show the rows from this seq on."
        ),
    ] = None,
    tail: Annotated[
        int | None,
        typer.Option(
            "--tail", metavar="N", parser=parse_count, help="Show the rows of the last N seqs."
        ),
    ] = None,
    json: Annotated[
        bool,
        typer.Option("--json", help="One JSON object per row: the web viewer's transcript rows."),
    ] = False,
    db: DbOption = None,
) -> None:
    """Print a session as a transcript: one row per event, a tool call and its result on one.

    The last line says whether the session's hash chain verifies: a transcript read from a
    log changed by hand says where. --since and --tail print a window of a long session
    (a tool call and its result share a row, shown when either falls in the window; a
    call from before it comes first). Durations read
    `980 µs`, `1.2 s`, `3 min 4 s`; sizes `12.1 KiB`.

    --json prints the rows the web viewer gets (`GET /v1/sessions/{id}/transcript`, one
    object per seq: seq, place, created_at, actor, type, hash, meta, anomaly, view and the
    view's fields; docs/server.md), texts clipped unless --full; no chain line.

    Example:

    - `agenttrail show sample-harvey-session --tail 20`
    """
    from agenttrail.log.chain import verify as verify_chain
    from agenttrail.views.terminal import print_session

    if since is not None and tail is not None:
        raise InputError("--since and --tail do not go together: give one")
    with open_log(db) as store, collector_paused():
        found = find_session(store, session)
        first = since or (max(1, found.head_seq - tail + 1) if tail is not None else 1)
        if first > max(found.head_seq, 1):
            err.print(f"no events from seq {first}: the last is seq {found.head_seq}", markup=False)
            return  # not the header over an empty table
        if json:
            _print_rows(store, found, first, full)
            return
        (verdict,) = verify_chain(store, [found.id])
        print_session(out, found, store, full=full, broken_at=verdict.bad_seq, since=first)
    if verdict.ok:
        line = (
            f"chain intact: {counted(verdict.events, 'event')}, head {verdict.head_hash.hex()[:16]}"
        )
        out.print(line, style="dim", markup=False)
    else:
        line = f"⚠ chain broken at seq {verdict.bad_seq}: {verdict.reason} (agenttrail verify)"
        out.print(line, style="bold red", markup=False)


SHOW_PAGE_ROWS = 500
"""Rows ``show --json`` reads and prints at a time: memory stays flat on a long session."""


def _print_rows(store: LogStore, session: Session, first: int, full: bool) -> None:
    """The transcript rows from seq ``first`` on, as JSON Lines."""
    from agenttrail.cli._listing import print_json_lines
    from agenttrail.views.transcript import TranscriptIndex

    index = TranscriptIndex(session.id, session.created_at)
    index.extend(store.read(session.id))
    after: int | None = first - 1
    while after is not None:
        page = index.page(store, after_seq=after, limit=SHOW_PAGE_ROWS, full=full)
        print_json_lines(page.rows)
        after = page.next_after_seq


EXPORT_FORMATS = ("jsonl", "otlp", "md", "html")
"""What ``export --format`` writes (``md`` and ``html``: ``views.document.DOCUMENT_FORMATS``;
tests/cli keeps them equal)."""


_FORMAT_OF_SUFFIX = {".html": "html", ".htm": "html", ".md": "md"}
"""The export format ``-o FILE`` names by its suffix when ``--format`` is not given (jsonl
otherwise)."""


def export(
    session: SessionArg,
    format: Annotated[
        str | None,
        typer.Option(
            "--format",
            help="Export format: jsonl, otlp (OTLP/JSON traces), md or html; by default html "
            "or md when -o ends in .html or .md, else jsonl.",
        ),
    ] = None,
    output: Annotated[
        Path | None, typer.Option("-o", "--output", help="Write to this file (- is stdout).")
    ] = None,
    db: DbOption = None,
) -> None:
    """Export a session as events (jsonl), OpenTelemetry traces (otlp) or a transcript (md, html).

    jsonl: each line holds session_id, seq, created_at, actor, payload, hash and anomalies
    (why a tool call or result is not paired; derived, not hashed), then the event's
    idempotency key (key) and, on the first line, the session's fields (session).

    otlp: one OTLP/JSON ExportTraceServiceRequest on one line, GenAI spans a turn at a time
    (docs/otel.md, Export); `agenttrail push` sends the same spans to a collector.

    md and html: the transcript `show` prints, whole; the HTML file is self-contained, runs no
    script, and shows everything from the log as text (docs/usage.md).

    A session whose hash chain does not verify is exported as stored, with a warning on
    stderr naming the first bad seq (`agenttrail verify` says more).

    Example:

    - `agenttrail export sample-harvey-session -o harvey.html` (html, by its suffix)
    """
    from agenttrail.log.chain import verify as verify_chain

    if format is None:
        suffix = output.suffix.lower() if output is not None else ""
        format = _FORMAT_OF_SUFFIX.get(suffix, "jsonl")
    if format not in EXPORT_FORMATS:
        raise InputError(f"unknown export format {format!r} (use {', '.join(EXPORT_FORMATS)})")
    output = output_file(output)
    with open_log(db) as store:
        found = find_session(store, session)
        _export(store, found, format, output)
        (verdict,) = verify_chain(store, [found.id])
    if not verdict.ok:
        err.print(
            f"warning: session {found.id}: the chain breaks at seq {verdict.bad_seq}: "
            f"{verdict.reason}; exported as stored (agenttrail verify)",
            markup=False,
        )


def _export(store: LogStore, found: Session, format: str, output: Path | None) -> None:
    """Write ``found`` in ``format`` (:data:`EXPORT_FORMATS`) to ``output`` (``None``:
    standard output)."""
    if format == "otlp":
        from agenttrail.formats.otlp.export import otlp_json, request_from_log

        request = request_from_log(store, [found])
        write_output(output, [otlp_json(request)])
        if not any(scope.spans for spans in request.resource_spans for scope in spans.scope_spans):
            err.print(
                f"warning: session {found.id}: none of its events makes a span (docs/otel.md, "
                "Export): the request holds no span, and agenttrail import refuses it",
                markup=False,
            )
        return
    if format in ("md", "html"):
        from agenttrail.views.document import document_from_events

        text = document_from_events(found, store.read(found.id), format)
        write_output(output, [text.removesuffix("\n")])
        return
    from agenttrail.formats.jsonl import jsonl_from_log

    keys = {seq: key for key, seq in store.event_keys(found.id)}
    write_output(output, jsonl_from_log(store, found.id, session=found, keys=keys))


def fountain(
    session: SessionArg,
    output: Annotated[
        Path | None, typer.Option("-o", "--output", help="Write to this file (- is stdout).")
    ] = None,
    dialect: Annotated[
        str,
        typer.Option(
            "--dialect",
            help="agenttrail (default), or harvey: scenes and cues Harvey's --continue reads, "
            "for a session that did not come from Harvey.",
        ),
    ] = "agenttrail",
    db: DbOption = None,
) -> None:
    """Render a session as a Fountain screenplay (Harvey session format v1.2).

    Example:

    - `agenttrail fountain sample-harvey-session -o harvey.spmd --dialect harvey`
    """
    from agenttrail.formats.fountain import fountain_from_events

    output = output_file(output)
    with open_log(db) as store:
        found = find_session(store, session)
        with held_whole(store.read(found.id)) as events:
            text = fountain_from_events(found, events, dialect=dialect)
    write_output(output, [text.removesuffix("\n")])


def replay(
    session: SessionArg,
    format: Annotated[
        str,
        typer.Option(
            "--format",
            help="Provider: openai (Chat Completions), anthropic (Messages) or responses.",
        ),
    ] = "openai",
    upto: Annotated[
        int | None,
        typer.Option("--upto", metavar="SEQ", min=0, help="Replay the events up to this seq only."),
    ] = None,
    db: DbOption = None,
) -> None:
    """Print the message list a model gets for a session, rebuilt from the log.

    Prints the JSON request body's messages (Anthropic: with system). What replay left out
    or filled in is printed on stderr, one note: line each (docs/replay.md).

    Example:

    - `agenttrail replay sample-harvey-session --format anthropic --upto 12`
    """
    from agenttrail.replay import replay as replay_events

    with open_log(db) as store:
        found = find_session(store, session)
        with held_whole(store.read(found.id)) as events:
            result = replay_events(events, format, upto_seq=upto)
    from agenttrail.views.safe import safe

    for note in result.notes:  # a note quotes tool names and event types from the log
        err.print(safe(f"note: {note}"), markup=False)
    if upto is not None and upto > found.head_seq:  # not an error: a replay of all of it
        err.print(f"note: --upto {upto} is past the last event (seq {found.head_seq})")
    for text in result.json_chunks(indent=2):  # written as made: never whole in memory
        sys.stdout.write(text)
    sys.stdout.write("\n")
