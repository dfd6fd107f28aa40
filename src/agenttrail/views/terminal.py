"""The terminal transcript: a session as rows (Harvey's shape), printed a chunk at a time;
what each row says is written by :mod:`agenttrail.views.terminal_text`.

Each row shows the seq, the time, the actor and what happened. A tool call and its result
share one row (seq ``4→7``), whatever stood between them in the log; what could not be paired
is flagged with ⚠ and the reason. Text from the log is never read as Rich markup.
"""

from __future__ import annotations

from array import array
from collections import deque
from collections.abc import Collection, Iterable, Iterator
from itertools import chain
from typing import Literal

from rich.console import Console
from rich.table import Table
from rich.text import Text

from agenttrail.model import UNDATED_NOTE, Event, LogReader, Session
from agenttrail.model.parts import MessageParts, whole_messages
from agenttrail.views.order import Shown, reading_order, text_runs
from agenttrail.views.pairing import (
    ANOMALY_TEXT,
    Pairing,
    SeqPairing,
    ToolRef,
    erased_notes,
    pair_refs,
    pair_tool_calls,
    tool_refs,
)
from agenttrail.views.safe import safe
from agenttrail.views.table import StyledText, cell_width, print_table
from agenttrail.views.terminal_text import row_label, row_text, run_text
from agenttrail.views.units import counted
from agenttrail.views.usage import Totals, totals_in, usage_totals_of

__all__ = ["READ_AHEAD", "print_session", "render_session", "transcript_table"]

_ACTOR_STYLE = {"user": "bold cyan", "agent": "green", "system": "grey50", "trigger": "magenta"}


def render_session(
    console: Console,
    session: Session,
    events: Iterable[Event],
    *,
    full: bool = False,
    broken_at: int | None = None,
    since: int = 1,
) -> None:
    """Print a session's header and its transcript table.

    Args:
        console: where to print.
        session: the session row (title, agent, user, workspace, started).
        events: the session's events in seq order (an API message stored in growing parts
            is shown once, :func:`agenttrail.model.parts.whole_messages`). The rows are
            printed a chunk at a time (:func:`agenttrail.views.table.print_table`).
        full: show whole tool results instead of their first lines
            (:data:`agenttrail.views.terminal_text.RESULT_LINES`).
        broken_at: the first seq whose chain does not verify, marked on its row.
        since: print only the rows from this seq on (a call is paired with its result
            wherever either falls, so a window reads as the whole session does there: a
            call before the window whose result is in it is shown, first).
    """
    shown = whole_messages(events)
    _print_header(console, session, usage_totals_of(shown))
    pairing = pair_tool_calls(shown)
    order = reading_order(shown)
    clock = _time_column(session.dated, {row.event.created_at[:10] for row in order})
    widest = [0] * 5  # the text column's is not measured
    for row in _shown_rows(order, pairing, since):
        result = pairing.result_of.get(row.event.seq)
        seq, time, (actor, _, (label, _)) = _heads(
            row, None if result is None else result.seq, clock
        )
        for i, head in enumerate((seq, time, actor, label)):
            widest[i] = max(widest[i], cell_width(head))
    print_table(
        console,
        _template(console.width),
        lambda: _transcript_rows(
            order, pairing, clock, full=full, broken_at=broken_at, since=since
        ),
        widest=widest,
    )


def _print_header(console: Console, session: Session, usage: Totals) -> None:
    """The session's title, id and fields, and its usage and cost when it made model calls."""
    header = Text()
    header.append(safe(session.title or "(untitled session)"), style="bold")
    header.append(f"\nsession {safe(session.id)}", style="dim")
    for label, value in (
        ("agent", session.agent),
        ("user", session.user),
        ("workspace", session.workspace),
        ("started", session.started),
    ):
        if value:
            header.append(f"\n{label}: {safe(value)}", style="dim")
    if not session.dated:
        header.append(f"\ntimes: {UNDATED_NOTE}", style="dim")
    if usage.calls:
        calls = counted(usage.calls, "model call")
        # the cost on a line of its own: with its price table's name, one line was ~110
        # columns (docs/usage.md, Output: 80-column terminals)
        line = f"\nusage: {calls} · {usage.tokens_text()}\ncost: {safe(usage.cost_line())}"
        header.append(line, style="dim")
    console.print(header)


def transcript_table(
    events: list[Event],
    *,
    full: bool = False,
    broken_at: int | None = None,
    width: int | None = None,
    dated: bool = True,
) -> Table:
    """The transcript of ``events`` as a Rich table (columns: seq, time, actor, event, text),
    for a console ``width`` columns wide (narrower than :data:`NARROW_COLUMNS`: event labels
    cut shorter; ``None``: any width).

    The time is ``HH:MM:SS`` (UTC) while every event falls on one day, ``MM-DD HH:MM:SS``
    when the session spans days (a session resumed later), none when the session is not
    ``dated`` (``Session.dated``: its source gives no times). The row holding seq
    ``broken_at`` (an event, or the result shown on its call's row) is marked.
    :func:`render_session` prints the same rows a chunk at a time.
    """
    pairing = pair_tool_calls(events)
    table = _template(width)
    order = reading_order(events)
    clock = _time_column(dated, {event.created_at[:10] for event in events})
    for row in _transcript_rows(order, pairing, clock, full=full, broken_at=broken_at):
        table.add_row(*row)
    return table


LABEL_CHARS = 24
"""Widest event label (``assistant HARVEY``) shown whole; a longer one ends in an ellipsis, so
that one long character name does not narrow every row's text."""


NARROW_COLUMNS = 100
"""Below this terminal width event labels are cut at :data:`NARROW_LABEL_CHARS`."""

NARROW_LABEL_CHARS = 16
"""Widest event label on a narrow terminal (``assistant LLAMA3`` whole, ``file-history-sn…``
cut): at 80 columns a 21-character label left the text column 27 columns, so that JSON and
paths folded every few words."""


def _template(width: int | None) -> Table:
    """The transcript's columns, without rows, for a console ``width`` columns wide
    (``None``: any width)."""
    narrow = width is not None and width < NARROW_COLUMNS
    table = Table(show_lines=False, expand=True, pad_edge=False)
    table.add_column("seq", justify="right", no_wrap=True, style="dim")
    table.add_column("time", no_wrap=True, style="dim")
    table.add_column("actor", no_wrap=True)
    label = NARROW_LABEL_CHARS if narrow else LABEL_CHARS
    table.add_column("event", no_wrap=True, overflow="ellipsis", max_width=label)
    table.add_column("text", ratio=1, overflow="fold")
    return table


def _transcript_rows(
    order: list[Shown],
    pairing: Pairing,
    clock: TimeColumn,
    *,
    full: bool,
    broken_at: int | None,
    since: int = 1,
) -> Iterator[TableRow]:
    """One row per shown event (``seq, time, actor, event, text``) from seq ``since`` on."""
    for shown in _shown_rows(order, pairing, since):
        yield _row(shown, pairing, full=full, broken_at=broken_at, clock=clock)


TimeColumn = Literal["time", "day and time", "none"]
"""What the time column shows: ``HH:MM:SS`` (UTC) while every event falls on one day,
``MM-DD HH:MM:SS`` when the session spans days (a session resumed later), nothing for a
session whose source gives no times (:func:`_time_column`)."""


def _time_column(dated: bool, days: Collection[str]) -> TimeColumn:
    """The time column of a session's rows, ``days`` the UTC days (``YYYY-MM-DD``) of its
    events: none when its source gives no times (not ``dated``, ``Session.dated``: the log's
    time is the import's, not the event's)."""
    if not dated:
        return "none"
    return "time" if len(days) <= 1 else "day and time"


def _shown_rows(order: list[Shown], pairing: Pairing, since: int) -> Iterator[Shown]:
    """What has a row of its own from seq ``since`` on: all but the results shown on their
    call's row; a call before ``since`` whose result is from ``since`` on has its row too,
    where the call is (so first)."""
    for shown in order:
        seq = shown.event.seq
        if seq in pairing.call_of:  # a result, or an erased one kept paired: on its call's row
            continue
        result = pairing.result_of.get(seq)
        if seq >= since or (result is not None and result.seq >= since):
            yield shown


TableRow = tuple[StyledText, StyledText, StyledText, StyledText, StyledText]


def _row(
    shown: Shown,
    pairing: Pairing,
    *,
    full: bool,
    broken_at: int | None,
    clock: TimeColumn,
    names: Names | None = None,
) -> TableRow:
    """The row of ``shown``; ``names``: its event's :func:`_names`, when known already."""
    event = shown.event
    if shown.run is not None:  # one run of a message whose text and calls interleave
        text = run_text(event, shown.run, shown.first)
    else:
        text = row_text(event, pairing, full)
    anomaly = pairing.anomalies.get(event.seq)
    if anomaly is not None:
        text.append(f"\n⚠ {ANOMALY_TEXT[anomaly.kind]}", style="bold red")
    result = pairing.result_of.get(event.seq)
    if broken_at is not None and broken_at in (event.seq, result and result.seq):
        text.append(f"\n⚠ the chain breaks at seq {broken_at}", style="bold red")
    seq, time, (actor, actor_style, (label, label_style)) = _heads(
        shown, None if result is None else result.seq, clock, names
    )
    return (
        StyledText(seq),
        StyledText(time),
        StyledText(actor, style=actor_style),
        StyledText(label, style=label_style),
        text,
    )


def _heads(
    shown: Shown, result_seq: int | None, clock: TimeColumn, names: Names | None = None
) -> tuple[str, str, Names]:
    """The seq, time, actor and event columns of ``shown``'s row (the last two with their
    styles, ``names`` when known already), ``result_seq`` the seq of the result paired with
    it, if any."""
    event = shown.event
    paired = result_seq if event.type in _PAIRED_TYPES else None
    return (
        _seq_text(event.seq, paired, first=shown.first),
        _time_text(event, clock),
        names or _names(event),
    )


Names = tuple[str, str, tuple[str, str]]
"""An event's actor column and its style, and its event column with its style."""


def _names(event: Event) -> Names:
    """The actor and event columns of ``event``'s row, each with its style."""
    return safe(event.actor), _ACTOR_STYLE.get(event.actor, ""), row_label(event)


_PAIRED_TYPES = frozenset({"tool_call", "erased"})
"""The types whose row shows the result paired with them (``4→7``)."""


def _seq_text(seq: int, result_seq: int | None, *, first: bool = True) -> str:
    """The seq column: ``4``; ``4→7`` for a call shown with its result (seq ``result_seq``,
    ``None`` for a row showing none), ``4 (cont.)`` for a message's second and later runs."""
    if result_seq is not None:
        return f"{seq}→{result_seq}"
    return str(seq) if first else f"{seq} (cont.)"


def _time_text(event: Event, clock: TimeColumn) -> str:
    """The time column of ``event``'s row (:data:`TimeColumn`)."""
    if clock == "time":
        return event.created_at[11:19]
    return event.created_at[5:19].replace("T", " ") if clock == "day and time" else ""


READ_AHEAD = 1000
"""Events :func:`print_session` reads ahead to reach a tool call's result; a result further
away is read on its own."""


def print_session(
    console: Console,
    session: Session,
    log: LogReader,
    *,
    full: bool = False,
    broken_at: int | None = None,
    since: int = 1,
) -> None:
    """:func:`render_session` of a session in ``log``, read as it is printed: what is held is
    which call pairs with which result (a few integers per tool call) and a shape number
    per event (4 bytes, :class:`_Shapes`), never the events.

    The session is read twice: for what pairs with what, its usage, whether any message
    is stored in parts or split into runs (then it is printed by :func:`render_session`,
    which holds the session) and the width of each row's seq, time, actor and event
    (:class:`_Shapes`); then to print. A call's row shows its result, read ahead (at most
    :data:`READ_AHEAD` events) or on its own.
    """
    refs: list[ToolRef] = []
    erased: dict[int, str] = {}
    days: set[str] = set()
    parts = MessageParts()
    ordered = False
    shapes = _Shapes(since)

    def first_read() -> Iterator[Event]:
        nonlocal ordered
        for event in log.read(session.id):
            days.add(event.created_at[:10])
            if event.type in _REF_TYPES:  # others have no tool ref
                refs.extend(tool_refs(event))
                if event.type == "erasure":
                    erased.update(erased_notes(event))
            parts.add(event)
            if event.type == "message" and text_runs(event.payload) is not None:
                ordered = True
                return
            shapes.add(event)
            yield event

    # the usage as read, each event one message: right unless a message is in parts
    usage = totals_in(first_read())
    if ordered or parts.any_whole():
        events = log.read(session.id)
        render_session(console, session, events, full=full, broken_at=broken_at, since=since)
        return
    _print_header(console, session, usage)
    seqs = pair_refs(refs)
    refs.clear()  # paired: the seqs are what is kept
    early = _calls_before(seqs, since)
    clock = _time_column(session.dated, days)

    def rows() -> Iterator[TableRow]:
        ahead: deque[Event] = deque()
        stream = iter(log.read(session.id, after_seq=since - 1))
        found: dict[int, Event] = {}  # the result of the row being written, if any
        pairing = Pairing(result_of=found, anomalies=seqs.anomalies, erased=erased)
        for event in _window(log, session.id, early, ahead, stream):
            if event.seq in seqs.call_seq:
                continue  # shown on its call's row
            found.clear()
            result_seq = seqs.result_seq.get(event.seq)
            if result_seq is not None:
                found[event.seq] = _result(log, session.id, result_seq, ahead, stream)
            yield _row(
                Shown(event),
                pairing,
                full=full,
                broken_at=broken_at,
                clock=clock,
                names=shapes.names_of(event.seq),
            )

    widest = shapes.widest(seqs, early, clock=clock)
    print_table(console, _template(console.width), rows, widest=widest)


_REF_TYPES = frozenset({"tool_call", "tool_result", "erasure"})
"""The types :func:`tool_refs` reads anything of (:func:`erased_notes`: erasures)."""


def _calls_before(seqs: SeqPairing, since: int) -> list[int]:
    """The calls before seq ``since`` whose result is from ``since`` on, in seq order: a
    window shows their rows first (the result's row is its call's)."""
    return sorted(call for result, call in seqs.call_seq.items() if call < since <= result)


def _window(
    log: LogReader,
    session_id: str,
    early: list[int],
    ahead: deque[Event],
    stream: Iterator[Event],
) -> Iterator[Event]:
    """The events a window's rows are made of: the calls ``early`` (:func:`_calls_before`),
    then ``stream``'s, those :func:`_result` has read ahead from it first."""
    for call in early:
        yield _event_at(log, session_id, call)
    while (event := ahead.popleft() if ahead else next(stream, None)) is not None:
        yield event


class _Shapes:
    """What the seq, time, actor and event columns of a streamed session's rows need to be
    measured, read with each event (:func:`print_session` measures them without building
    a row): the event's shape (the widths of its time both ways, its actor, its label and
    whether its row can show a paired result) as a number per event, in an array; and each
    shape's actor and event columns, which the rows then take from here."""

    def __init__(self, since: int) -> None:
        self.since = since
        """The first seq shown (a call before it whose result is from it on is shown too)."""
        self.kinds: dict[tuple[int | str, Names, bool], int] = {}
        """Each shape (``created_at``'s length when it is printable ASCII, else itself; the
        actor and event columns, whether the row can show a paired result) → its number."""
        self.names: list[Names] = []
        """Each shape's actor and event columns (:func:`_names`)."""
        self.widths: list[tuple[int, int, int, int, bool]] = []
        """Each shape's widths: its time's on one day and over days, its actor's and its
        label's; whether its row can show a paired result."""
        self.shape_of = array("I")
        """Event ``1 + i``'s shape number (seqs are gapless)."""

    def add(self, event: Event) -> None:
        """Note the shape of the next event, in seq order."""
        created, names = event.created_at, _names(event)
        paired = event.type in _PAIRED_TYPES
        stamp = len(created) if created.isascii() and created.isprintable() else created
        kind = (stamp, names, paired)
        number = self.kinds.get(kind)
        if number is None:
            number = self.kinds[kind] = len(self.widths)
            self.widths.append(
                (
                    cell_width(_time_text(event, "time")),
                    cell_width(_time_text(event, "day and time")),
                    cell_width(names[0]),
                    cell_width(names[2][0]),
                    paired,
                )
            )
            self.names.append(names)
        self.shape_of.append(number)

    def names_of(self, seq: int) -> Names | None:
        """The actor and event columns of event ``seq``; ``None`` for an event appended
        after it was read (a live session)."""
        return self.names[self.shape_of[seq - 1]] if seq <= len(self.shape_of) else None

    def widest(self, seqs: SeqPairing, early: list[int], *, clock: TimeColumn) -> list[int]:
        """The widest cell of each column (:func:`print_table`'s ``widest``; the text
        column's 0) over the rows shown: the calls ``early`` (:func:`_calls_before`), then
        seq :attr:`since` on, where a result paired with its call has none."""
        shown = [False] * len(self.widths)
        seq_width, last = 0, None  # the last seq shown alone is the widest
        for seq in chain(early, range(self.since, len(self.shape_of) + 1)):
            shape = self.shape_of[seq - 1]
            if seq in seqs.call_seq:
                continue  # shown on its call's row
            shown[shape] = True
            result = seqs.result_seq.get(seq) if self.widths[shape][4] else None
            if result is None:
                last = seq
            else:
                seq_width = max(seq_width, cell_width(_seq_text(seq, result)))
        if last is not None:
            seq_width = max(seq_width, cell_width(_seq_text(last, None)))
        widest = [seq_width, 0, 0, 0, 0]
        for (day, days, actor, label, _), is_shown in zip(self.widths, shown, strict=True):
            if is_shown:
                widest[1] = max(widest[1], {"time": day, "day and time": days}.get(clock, 0))
                widest[2] = max(widest[2], actor)
                widest[3] = max(widest[3], label)
        return widest


def _result(
    log: LogReader, session_id: str, seq: int, ahead: deque[Event], stream: Iterator[Event]
) -> Event:
    """Event ``seq`` (a result after its call, or before it): from the events read ahead,
    by reading ahead up to it, or on its own."""
    if ahead and ahead[0].seq <= seq <= ahead[-1].seq:
        return ahead[seq - ahead[0].seq]
    if not ahead or seq > ahead[-1].seq:
        while len(ahead) < READ_AHEAD:
            event = next(stream, None)
            if event is None:
                break
            ahead.append(event)
            if event.seq == seq:
                return event
    return _event_at(log, session_id, seq)


def _event_at(log: LogReader, session_id: str, seq: int) -> Event:
    """Event ``seq`` of the session, read on its own."""
    (event,) = log.read(session_id, after_seq=seq - 1, limit=1)
    return event
