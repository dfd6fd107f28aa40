"""The terminal transcript: a session as rows, one writer per kind of row (Harvey's shape).

Each row shows the seq, the time, the actor and what happened. A tool call and its result
share one row (seq ``4→7``), whatever stood between them in the log; what could not be paired
is flagged with ⚠ and the reason. Text from the log is never read as Rich markup.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from agenttrail.codec import json_line
from agenttrail.model import (
    Attachment,
    Event,
    LogReader,
    Session,
    attachment_of,
    context_text,
    payload_attachments,
    prose_text,
    text_of,
    tool_status,
    usage_of,
)
from agenttrail.model.parts import MessageParts, whole_messages
from agenttrail.views.order import Shown, TextRun, reading_order, text_runs
from agenttrail.views.pairing import (
    ANOMALY_TEXT,
    Pairing,
    ToolRef,
    erased_lines,
    erased_notes,
    pair_refs,
    pair_tool_calls,
    tool_refs,
)
from agenttrail.views.safe import safe
from agenttrail.views.table import print_table
from agenttrail.views.units import duration_text, size_text
from agenttrail.views.usage import Totals, calls_in, totals_of, usage_totals_of

__all__ = ["READ_AHEAD", "print_session", "render_session", "transcript_table"]

ARGS_CHARS = 160
"""Widest tool-call argument text shown in a row before it is cut (characters)."""

ANNOTATION_CHARS = 100
"""Characters of a runtime annotation's data shown: annotations are quiet asides."""

RESULT_LINES = 6
"""Lines of a tool result shown under its call unless ``full`` is asked for."""

RESULT_CHARS = 480
"""Characters of a tool result shown under its call unless ``full`` is asked for: one line
of minified JSON can otherwise fill the screen."""

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
        full: show whole tool results instead of their first :data:`RESULT_LINES` lines.
        broken_at: the first seq whose chain does not verify, marked on its row.
        since: print only the rows from this seq on (a call is paired with its result
            wherever either falls, so a window reads as the whole session does there).
    """
    shown = whole_messages(events)
    _print_header(console, session, usage_totals_of(session, shown))
    pairing = pair_tool_calls(shown)
    order = reading_order(shown)
    print_table(
        console,
        _template(console.width),
        lambda: _transcript_rows(order, pairing, full=full, broken_at=broken_at, since=since),
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
    if usage.calls:
        calls = f"{usage.calls} model call{'' if usage.calls == 1 else 's'}"
        line = f"\nusage: {calls} · {usage.tokens_text()} · cost {usage.cost_text()}"
        if usage.sources:
            line += f" ({', '.join(sorted(usage.sources))})"
        header.append(line, style="dim")
    console.print(header)


def transcript_table(
    events: list[Event],
    *,
    full: bool = False,
    broken_at: int | None = None,
    width: int | None = None,
) -> Table:
    """The transcript of ``events`` as a Rich table (columns: seq, time, actor, event, text),
    for a console ``width`` columns wide (narrower than :data:`NARROW_COLUMNS`: event labels
    cut shorter; ``None``: any width).

    The time is ``HH:MM:SS`` (UTC) while every event falls on one day, ``MM-DD HH:MM:SS``
    when the session spans days (a session resumed later). The row holding seq
    ``broken_at`` (an event, or the result shown on its call's row) is marked.
    :func:`render_session` prints the same rows a chunk at a time.
    """
    pairing = pair_tool_calls(events)
    table = _template(width)
    for row in _transcript_rows(reading_order(events), pairing, full=full, broken_at=broken_at):
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
    order: list[Shown], pairing: Pairing, *, full: bool, broken_at: int | None, since: int = 1
) -> Iterator[TableRow]:
    """One row per shown event (``seq, time, actor, event, text``) from seq ``since`` on."""
    one_day = len({shown.event.created_at[:10] for shown in order}) <= 1
    for shown in order:
        event = shown.event
        if event.seq < since:
            continue
        if event.seq in pairing.call_of:  # a result, or an erased one kept paired
            continue  # shown on its call's row
        yield _row(shown, pairing, full=full, broken_at=broken_at, one_day=one_day)


TableRow = tuple[Text, Text, Text, Text, Text]


def _row(
    shown: Shown, pairing: Pairing, *, full: bool, broken_at: int | None, one_day: bool
) -> TableRow:
    event = shown.event
    if shown.run is not None:  # one run of a message whose text and calls interleave
        seq, kind, text = _message_run(event, shown.run, shown.first)
    else:
        writer = _WRITERS.get(event.type or "", _generic)
        seq, kind, text = writer(event, pairing, full)
    anomaly = pairing.anomalies.get(event.seq)
    if anomaly is not None:
        text.append(f"\n⚠ {ANOMALY_TEXT[anomaly.kind]}", style="bold red")
    result = pairing.result_of.get(event.seq)
    if broken_at is not None and broken_at in (event.seq, result and result.seq):
        text.append(f"\n⚠ the chain breaks at seq {broken_at}", style="bold red")
    return (
        Text(seq),
        Text(event.created_at[11:19] if one_day else event.created_at[5:19].replace("T", " ")),
        Text(safe(event.actor), style=_ACTOR_STYLE.get(event.actor, "")),
        kind,
        text,
    )


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
    which call pairs with which result (a few integers per tool call), never the events.

    The session is read three times: for what pairs with what, its usage and whether any
    message is stored in parts or split into runs (then it is printed by
    :func:`render_session`, which holds the session); to measure the columns; to print. A
    call's row shows its result, read ahead (at most :data:`READ_AHEAD` events) or on its
    own.
    """
    refs: list[ToolRef] = []
    erased: dict[int, str] = {}
    days: set[str] = set()
    parts = MessageParts()
    messages: list[int] = []
    ordered = False

    def first_read() -> Iterator[Event]:
        nonlocal ordered
        for event in log.read(session.id):
            days.add(event.created_at[:10])
            refs.extend(tool_refs(event))
            erased.update(erased_notes(event))
            parts.add(event)
            if event.type == "message":
                ordered = text_runs(event.payload) is not None
                if ordered:
                    return
                messages.append(event.seq)
            yield event

    # the usage as read, each event one message: right unless a message is in parts
    usage = totals_of(calls_in(session, first_read()))
    if ordered or any(parts.read_as(seq) is not None for seq in messages):
        events = log.read(session.id)
        render_session(console, session, events, full=full, broken_at=broken_at, since=since)
        return
    _print_header(console, session, usage)
    seqs = pair_refs(refs)
    refs.clear()  # paired: the seqs are what is kept

    def rows() -> Iterator[TableRow]:
        ahead: deque[Event] = deque()
        stream = iter(log.read(session.id, after_seq=since - 1))
        while True:
            event = ahead.popleft() if ahead else next(stream, None)
            if event is None:
                return
            if event.seq in seqs.call_seq:
                continue  # shown on its call's row
            found: dict[int, Event] = {}
            result_seq = seqs.result_seq.get(event.seq)
            if result_seq is not None:
                found[event.seq] = _result(log, session.id, result_seq, ahead, stream)
            pairing = Pairing(result_of=found, anomalies=seqs.anomalies, erased=erased)
            yield _row(
                Shown(event), pairing, full=full, broken_at=broken_at, one_day=len(days) <= 1
            )

    print_table(console, _template(console.width), rows)


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
    (event,) = log.read(session_id, after_seq=seq - 1, limit=1)
    return event


Row = tuple[str, Text, Text]


def _message(event: Event, pairing: Pairing, full: bool) -> Row:
    return _message_row(event, event.payload)


def _message_run(event: Event, run: TextRun, first: bool) -> Row:
    """One run of an ordered message: its blocks' text, the meta on the first run only."""
    view = {**event.payload, "content": text_of(run.blocks) or "", "blocks": run.blocks}
    if not first:
        view.pop("meta", None)
    seq, kind, text = _message_row(event, view)
    return seq if first else f"{seq} (cont.)", kind, text


def _message_row(event: Event, payload: dict[str, Any]) -> Row:
    role = str(payload.get("role", "?"))
    text = Text(safe(prose_text(payload.get("content")).strip()))
    blocks = payload.get("blocks")
    if isinstance(blocks, list):
        kinds = {str(b.get("type")) for b in blocks if isinstance(b, dict) and not attachment_of(b)}
        if kinds - {"text"}:
            text.append(safe(f"\n[{', '.join(sorted(kinds - {'text'}))} blocks kept]"), style="dim")
    text.append(_attachment_lines(payload_attachments(payload)), style="cyan")
    text.append(safe(_meta_line(payload.get("meta"))), style="dim")
    name = payload.get("character")
    label = safe(f"{role} {name}" if isinstance(name, str) and name else role)
    style = "grey50" if event.actor == "system" else ""
    return str(event.seq), Text(label, style=style), text


def _tool_call(event: Event, pairing: Pairing, full: bool) -> Row:
    payload = event.payload
    args = payload.get("input")
    args_text = args if isinstance(args, str) else json_line(args, spaced=True)
    if len(args_text) > ARGS_CHARS:
        args_text = args_text[:ARGS_CHARS] + "…"
    who = payload.get("character")
    prefix = f"{who}." if isinstance(who, str) and who else ""
    text = Text(safe(f"{prefix}{payload.get('name', '?')}({args_text})"))
    result = pairing.result_of.get(event.seq)
    seq = str(event.seq)
    if result is not None and result.erased:  # its type and call id kept by the erasure
        seq = f"{event.seq}→{result.seq}"
        said = pairing.erased.get(result.seq, f"erased seq {result.seq}")
        text.append(safe(f" — {said}"), style="grey50")
    elif result is not None:
        seq = f"{event.seq}→{result.seq}"
        status = tool_status(result.payload)
        text.append(safe(f" — {status}"), style="green" if status.ok else "bold red")
        output = _output_text(result.payload.get("output"))
        if not status.ok and output.strip().removeprefix("error:").strip() == status.detail:
            output = ""  # the status line already says all of it
        if output:
            text.append("\n" + safe(_clip(output, full)), style="dim")
        text.append(_attachment_lines(payload_attachments(result.payload)), style="cyan")
    return seq, Text("tool", style="yellow"), text


def _output_text(output: Any) -> str:
    """A tool's output as a row shows it: its text (:func:`prose_text`), or, when that text is
    the output's JSON, that JSON with a space after each ``,`` and ``:``, so that the row
    wraps between tokens (a string with spaces may wrap at them; a token longer than the
    column is folded)."""
    text = prose_text(output)
    if not isinstance(output, str) and text and text == json_line(output):
        return json_line(output, spaced=True)  # the output read as its JSON
    return text


def _attachment_lines(found: list[Attachment]) -> str:
    """One ``[attachment: image/png, 12.1 KiB, sha256 ab12cd34]`` line per attachment
    (:class:`agenttrail.model.Attachment`): named, never shown as base64."""
    return "".join(safe(f"\n[attachment: {a.label(size_text)}]") for a in found)


def _tool_result(event: Event, pairing: Pairing, full: bool) -> Row:
    payload = event.payload
    status = tool_status(payload)
    text = Text(
        safe(f"{payload.get('name') or ''} result for {payload.get('toolCallId')!r} — {status}")
    )
    text.append("\n" + safe(_clip(_output_text(payload.get("output")), full)), style="dim")
    text.append(_attachment_lines(payload_attachments(payload)), style="cyan")
    return str(event.seq), Text("tool result", style="yellow"), text


def _error(event: Event, pairing: Pairing, full: bool) -> Row:
    text = Text(safe(str(event.payload.get("message", ""))), style="red")
    return str(event.seq), Text("error", style="bold red"), text


def _context(event: Event, pairing: Pairing, full: bool) -> Row:
    """A rag or shell event: its headline, a shell's output under it; a recall: its lines."""
    said = context_text(event.payload)
    assert said is not None  # written for the types context_text reads
    headline, body = said
    if event.type == "recall":
        text = Text(safe(body))
    else:
        text = Text(safe(headline))
        if event.type == "shell":
            text.append("\n" + safe(_clip(body, full)), style="dim")
    return str(event.seq), Text(safe(str(event.type)), style="blue"), text


def _annotation(event: Event, pairing: Pairing, full: bool) -> Row:
    p = event.payload
    body = p.get("text")
    if not isinstance(body, str):
        body = json_line(p.get("data"), spaced=True)
        body = body if full else _clip(body, False, chars=ANNOTATION_CHARS)
    return (
        str(event.seq),
        Text(safe(str(p.get("kind", "note"))), style="grey50"),
        Text(safe(body), style="grey50"),
    )


def _session_end(event: Event, pairing: Pairing, full: bool) -> Row:
    reason = event.payload.get("reason") or "closed"
    return (
        str(event.seq),
        Text("end", style="grey50"),
        Text(safe(f"session {reason}"), style="grey50"),
    )


def _erasure(event: Event, pairing: Pairing, full: bool) -> Row:
    said = context_text(event.payload)
    assert said is not None
    return str(event.seq), Text("erasure", style="grey50"), Text(safe(said[0]), style="grey50")


def _erased(event: Event, pairing: Pairing, full: bool) -> Row:
    """An erased event: who erased it and why; an erased tool call's row also shows its
    result (kept paired by the erasure record, :func:`agenttrail.views.pairing.tool_refs`)."""
    result = pairing.result_of.get(event.seq)
    seq = str(event.seq) if result is None else f"{event.seq}→{result.seq}"
    text = Text(safe("\n".join(erased_lines(event, pairing))), style="grey50")
    return seq, Text("erased", style="grey50"), text


def _generic(event: Event, pairing: Pairing, full: bool) -> Row:
    body = {k: v for k, v in event.payload.items() if k != "type"}
    kind = event.type or "(untyped)"
    return (
        str(event.seq),
        Text(safe(kind), style="italic"),
        Text(safe(_clip(json_line(body, spaced=True), full))),
    )


_WRITERS: dict[str, Callable[[Event, Pairing, bool], Row]] = {
    "message": _message,
    "tool_call": _tool_call,
    "tool_result": _tool_result,
    "error": _error,
    "rag": _context,
    "recall": _context,
    "shell": _context,
    "annotation": _annotation,
    "session_end": _session_end,
    "erasure": _erasure,
    "erased": _erased,
}


def _meta_line(meta: Any) -> str:
    if not isinstance(meta, dict):
        return ""
    parts = [str(meta[k]) for k in ("model", "provider", "location") if meta.get(k)]
    usage = usage_of(meta)  # one meaning for every provider, older OpenAI events included
    if usage is not None:
        counts = [
            f"{label} {usage[key]}"
            for key, label in (
                ("input", "in"),
                ("output", "out"),
                ("cache_read", "cache read"),
                ("cache_write", "cache write"),
            )
            if usage.get(key) is not None  # unknown counts are left out, never shown as 0
        ]
        if counts:
            parts.append("tokens " + ", ".join(counts))
    duration = meta.get("duration_ms")
    if isinstance(duration, int | float) and not isinstance(duration, bool):
        parts.append(duration_text(duration))
    return "\nⓘ " + " · ".join(parts) if parts else ""


def _clip(text: str, full: bool, *, chars: int | None = None) -> str:
    if chars is not None and len(text) > chars:
        return text[:chars] + "…"
    if full:
        return text
    lines = text.splitlines()
    if len(lines) <= RESULT_LINES and len(text) <= RESULT_CHARS:
        return text
    shown = "\n".join(lines[:RESULT_LINES])[:RESULT_CHARS]
    hidden = len(text) - len(shown)
    return f"{shown}… ({hidden:,} more characters; --full shows them)"
