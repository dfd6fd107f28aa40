"""One API message stored as several events, read back as one: the logical session.

A log is append-only, so a source that grows after it was imported leaves its earlier state
in the log. Claude Code writes one line per content block of one API response, all lines
repeating ``message.id`` (docs/log-format.md, Reading a session): a transcript imported in
the middle of such a message, and again once it is whole, holds the part seen first and then
the whole message, each an assistant ``message`` event with that ``messageId`` and a
``source`` naming the transcript lines it was made from. Every reader that shows or sends
messages (the terminal transcript, Fountain, replay) reads the events through
:func:`whole_messages`, so that such a message is shown and sent once, with its usage counted
once.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from itertools import pairwise
from typing import Any

from agenttrail.model.events import Event

__all__ = ["whole_messages"]


def whole_messages(events: Iterable[Event]) -> list[Event]:
    """``events`` with each API message that was stored in growing parts shown once, whole.

    Rule: the assistant ``message`` events that share a ``messageId`` and whose ``source``
    names transcript lines (``{"uuid"}`` or ``{"uuids": [...]}``) are parts of one message when
    their sets of lines are nested (each one's lines among the next one's). Such a group is
    read as its largest part, placed at the first part's seq (the place the message had in the
    conversation), followed by the ``tool_call`` events of that ``messageId``, in seq order:
    the layout one import of the whole source gives. Groups whose lines are not nested, and
    messages without ``messageId`` or line sources, are left as they are. Nothing is merged
    across sessions' boundaries: give one session's events.

    Args:
        events: one session's events in seq order.

    Returns:
        A new list; an event shown in another's place is an :class:`Event` with the first
        part's ``seq``, ``created_at`` and ``hash`` and the whole message's payload (the chain
        is checked on stored rows, never on this view).
    """
    chosen = list(events)
    groups: dict[str, list[Event]] = {}
    for event in chosen:
        message_id = _part_id(event)
        if message_id is not None:
            groups.setdefault(message_id, []).append(event)
    whole: dict[str, Event] = {}
    for message_id, parts in groups.items():
        if len(parts) > 1:
            largest = _largest_if_nested(parts)
            if largest is not None:
                whole[message_id] = largest
    if not whole:
        return chosen
    calls: dict[str, list[Event]] = {message_id: [] for message_id in whole}
    for event in chosen:
        message_id = event.payload.get("messageId") if event.type == "tool_call" else None
        if isinstance(message_id, str) and message_id in calls:
            calls[message_id].append(event)
    out: list[Event] = []
    placed: set[str] = set()
    for event in chosen:
        message_id = _part_id(event)
        if message_id in whole:
            if message_id not in placed:
                placed.add(message_id)
                out.append(replace(event, data=whole[message_id].data))
                out.extend(calls[message_id])
            continue
        if event.type == "tool_call" and event.payload.get("messageId") in placed:
            continue  # placed behind its message
        out.append(event)
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


def _largest_if_nested(parts: list[Event]) -> Event | None:
    """The part naming the most lines when every part's lines are among the next's; the
    later part on a tie (the same lines read again)."""
    lines = {e.seq: _lines(e.payload) or frozenset() for e in parts}
    ordered = sorted(parts, key=lambda e: (len(lines[e.seq]), e.seq))
    for smaller, larger in pairwise(ordered):
        if not lines[smaller.seq] <= lines[larger.seq]:
            return None
    return ordered[-1]
