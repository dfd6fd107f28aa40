"""One API message stored as several events, read back as one: the logical session.

A log is append-only, so a source that grows after it was imported leaves its earlier state
in the log. Claude Code writes one line per content block of one API response, all lines
repeating ``message.id`` (docs/log-format.md, Reading a session): a transcript imported in
the middle of such a message, and again once it is whole, holds the part seen first and then
the whole message, each an assistant ``message`` event with that ``messageId`` and a
``source`` naming the transcript lines it was made from. Every reader that shows, sends or
searches messages reads the events by this one rule, so that such a message is shown, sent
and found once, with its usage counted once: the terminal transcript, Fountain, replay and
search through :func:`whole_messages` or :class:`MessageParts`, the web viewer's incremental
row index through :class:`MessageParts`, which :func:`whole_messages` is built on.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from itertools import pairwise
from typing import Any

from agenttrail.model.events import Event

__all__ = ["MessageParts", "whole_messages"]


@dataclass
class _Message:
    """What :class:`MessageParts` knows of one ``messageId``."""

    parts: list[tuple[int, frozenset[str]]] = field(default_factory=list)
    """Each part's seq and source lines, in the order added."""
    calls: list[int] = field(default_factory=list)
    """Seqs of the ``tool_call`` events of the message."""
    whole: int | None = None
    """The seq of the part read as the message, when the parts are read as one."""


class MessageParts:
    """The rule of :func:`whole_messages` in incremental form: which events of one session
    are parts of one API message, and how each is read, kept as events are added.

    Rule: the assistant ``message`` events that share a ``messageId`` and whose ``source``
    names transcript lines (``{"uuid"}`` or ``{"uuids": [...]}``) are parts of one message
    when their sets of lines are nested (each one's lines among the next one's). Such a group
    is read as its largest part (the later one on a tie: the same lines read again), placed
    at the first part's seq (the place the message had in the conversation), and the
    ``tool_call`` events of that ``messageId`` are placed right after it, in seq order: the
    layout one import of the whole source gives. A group of one part, a group whose lines are
    not nested, and messages without ``messageId`` or line sources are read as they are.

    Each :meth:`add` costs the size of the event's own group; the queries are lookups.
    Nothing is merged across sessions' boundaries: add one session's events, in seq order.
    """

    def __init__(self) -> None:
        self._messages: dict[str, _Message] = {}
        self._of_seq: dict[int, str] = {}
        self._first: dict[int, str] = {}

    def add(self, event: Event) -> None:
        """Take in the next event of the session (events must come in seq order)."""
        message_id = _part_id(event)
        if message_id is not None:
            message = self._messages.setdefault(message_id, _Message())
            message.parts.append((event.seq, _lines(event.payload) or frozenset()))
            self._of_seq[event.seq] = message_id
            message.whole = _largest_if_nested(message.parts) if len(message.parts) > 1 else None
            first = message.parts[0][0]
            if message.whole is None:
                self._first.pop(first, None)
            else:
                self._first[first] = message_id
            return
        call_of = event.payload.get("messageId") if event.type == "tool_call" else None
        if isinstance(call_of, str) and call_of:
            self._messages.setdefault(call_of, _Message()).calls.append(event.seq)
            self._of_seq[event.seq] = call_of

    def any_whole(self) -> bool:
        """Whether any message's parts are read as one (else every event reads as itself)."""
        return bool(self._first)

    def read_as(self, seq: int) -> int | None:
        """For the first part of a message read whole: the seq of the part read in its place
        (the whole message); ``None`` for every other event."""
        message_id = self._first.get(seq)
        return self._messages[message_id].whole if message_id is not None else None

    def part_of(self, seq: int) -> int | None:
        """For a later part of a message read whole (the whole message among them): the seq
        of the first part, where the message is read; ``None`` for every other event."""
        message = self._grouped(seq)
        if message is None or seq not in (s for s, _ in message.parts[1:]):
            return None
        return message.parts[0][0]

    def place(self, seq: int) -> int:
        """Where event ``seq`` is read in the session's order: a tool call of a message read
        whole right after the message's first part (this seq; calls among themselves in seq
        order), every other event at its own seq. Reading order is by ``(place, seq)``."""
        message = self._grouped(seq)
        if message is None or seq not in message.calls:
            return seq
        return message.parts[0][0]

    def related(self, seq: int) -> set[int]:
        """The seqs whose reading may change when event ``seq`` is added: every part and call
        of its message (``seq`` included); an empty set for an event of no message."""
        message_id = self._of_seq.get(seq)
        if message_id is None:
            return set()
        message = self._messages[message_id]
        return {s for s, _ in message.parts} | set(message.calls)

    def _grouped(self, seq: int) -> _Message | None:
        message_id = self._of_seq.get(seq)
        message = self._messages[message_id] if message_id is not None else None
        return message if message is not None and message.whole is not None else None


def whole_messages(events: Iterable[Event]) -> list[Event]:
    """``events`` with each API message that was stored in growing parts shown once, whole.

    The rule is :class:`MessageParts`'s: a group of nested parts is read as its largest part
    at the first part's seq, followed by the ``tool_call`` events of that ``messageId`` in seq
    order; every other event stays as it is, in seq order. Give one session's events.

    Args:
        events: one session's events in seq order.

    Returns:
        A new list; an event shown in another's place is an :class:`Event` with the first
        part's ``seq``, ``created_at`` and ``hash`` and the whole message's payload (the chain
        is checked on stored rows, never on this view).
    """
    chosen = list(events)
    parts = MessageParts()
    for event in chosen:
        if "messageId" in event.payload:  # no other event is a part or a part's call
            parts.add(event)
    if not parts.any_whole() and all(a.seq < b.seq for a, b in pairwise(chosen)):
        return chosen  # no message in parts: the events as they are, in their order
    by_seq = {event.seq: event for event in chosen}
    out: list[Event] = []
    for event in sorted(chosen, key=lambda e: (parts.place(e.seq), e.seq)):
        if parts.part_of(event.seq) is not None:
            continue  # read at the first part's place
        whole = parts.read_as(event.seq)
        out.append(event if whole is None else replace(event, data=by_seq[whole].data))
    return out


def _part_id(event: Event) -> str | None:
    """The ``messageId`` of an assistant message made from named source lines."""
    payload = event.payload
    if event.type != "message" or payload.get("role") != "assistant":
        return None
    message_id = payload.get("messageId")
    if not isinstance(message_id, str) or not message_id or _lines(payload) is None:
        return None
    return message_id


def _lines(payload: dict[str, Any]) -> frozenset[str] | None:
    """The source lines (uuids) a message was made from; ``None`` when it does not say."""
    source = payload.get("source")
    if not isinstance(source, dict):
        return None
    uuids = source.get("uuids")
    if isinstance(uuids, list) and uuids and all(isinstance(u, str) for u in uuids):
        return frozenset(uuids)
    uuid = source.get("uuid")
    return frozenset([uuid]) if isinstance(uuid, str) else None


def _largest_if_nested(parts: list[tuple[int, frozenset[str]]]) -> int | None:
    """The seq of the part naming the most lines when every part's lines are among the
    next's; the later part on a tie (the same lines read again)."""
    ordered = sorted(parts, key=lambda part: (len(part[1]), part[0]))
    for (_, smaller), (_, larger) in pairwise(ordered):
        if not smaller <= larger:
            return None
    return ordered[-1][0]
