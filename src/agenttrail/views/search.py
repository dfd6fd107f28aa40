"""Text search across sessions: their titles, agents, users and the text of every event.

A plain case-insensitive substring search over what a reader sees (message text, tool names,
arguments and results, errors, shell commands and output, context, notes), never inside the
bytes of an image, document or file: an attachment is searched by the name a view gives it
(:meth:`agenttrail.model.Attachment.label`, docs/log-format.md, Attachments). An API message
stored in growing parts is searched once, as the whole message at its first part's seq
(:class:`agenttrail.model.parts.MessageParts`, docs/log-format.md, Reading a session). It
reads every event of every session it is given (:meth:`agenttrail.model.LogReader.read`), so
its cost grows with the log (about a second per 100,000 events here); there is no index to
keep in step.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from agenttrail.model import LogReader, Session, payload_attachments, prose_text
from agenttrail.model.parts import MessageParts
from agenttrail.views.terminal import safe

__all__ = ["HITS_PER_SESSION", "SNIPPET_CHARS", "SearchHit", "SessionMatch", "event_text", "search"]

SNIPPET_CHARS = 60
"""Characters shown on each side of a match."""

HITS_PER_SESSION = 5
"""Hits kept per session; ``total`` still counts every matching event."""

MAX_SESSIONS = 50
"""Sessions with matches returned by default, in the log's order."""


@dataclass(frozen=True)
class SearchHit:
    """One event whose text matches."""

    seq: int
    """The event's seq."""
    type: str | None
    """The payload's ``type``."""
    actor: str
    """Who authored it."""
    snippet: str
    """The match with up to :data:`SNIPPET_CHARS` characters either side, on one line."""


@dataclass(frozen=True)
class SessionMatch:
    """A session that matches: in its own fields, its events, or both."""

    session_id: str
    """The session."""
    fields: list[str] = field(default_factory=list)
    """Session fields that match (``id``, ``title``, ``agent``, ``user``, ``workspace``)."""
    hits: list[SearchHit] = field(default_factory=list)
    """The first :data:`HITS_PER_SESSION` matching events, in seq order."""
    total: int = 0
    """How many events match."""

    def body(self) -> dict[str, Any]:
        """The match as a JSON-ready mapping."""
        return {
            "session_id": self.session_id,
            "fields": self.fields,
            "total": self.total,
            "hits": [
                {"seq": h.seq, "type": h.type, "actor": h.actor, "snippet": h.snippet}
                for h in self.hits
            ],
        }


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=repr)


def event_text(payload: dict[str, Any]) -> str:
    """The searchable text of a payload: what the transcript shows of it.

    Messages give their content (and thinking), tool calls their name and arguments, tool
    results their output and error, ``shell`` its command and output, other shapes their JSON.
    Attachments give their label (``image/png, 12,345 bytes, sha256 ab12cd34``), never their
    bytes: text is read without them (:func:`agenttrail.model.prose_text`).
    """
    kind = payload.get("type")
    labels = "".join(f"\n{a.label()}" for a in payload_attachments(payload))
    if kind == "message":
        parts = [prose_text(payload.get("content"))]
        blocks = payload.get("blocks")
        if isinstance(blocks, list):
            parts += [
                b["thinking"]
                for b in blocks
                if isinstance(b, dict) and isinstance(b.get("thinking"), str)
            ]
        return "\n".join(parts) + labels
    if kind == "tool_call":
        value = payload.get("input", payload.get("arguments"))
        return f"{payload.get('name', '')} {value if isinstance(value, str) else _json(value)}"
    if kind == "tool_result":
        error = payload.get("error")
        output = prose_text(payload.get("output"))
        return f"{output} {error if isinstance(error, str) else ''}{labels}"
    if kind == "error":
        return str(payload.get("message", ""))
    if kind == "shell":
        return f"{payload.get('command', '')}\n{prose_text(payload.get('output'))}"
    if kind == "annotation" and isinstance(payload.get("text"), str):
        return str(payload["text"])
    return _json({k: v for k, v in payload.items() if k != "type"})


def _snippet(text: str, query: str) -> str | None:
    lowered = text.lower()
    at = lowered.find(query)
    if at < 0:
        return None
    at = min(at, len(text))  # lower() can change a length (İ): stay inside the original
    start, end = max(0, at - SNIPPET_CHARS), min(len(text), at + len(query) + SNIPPET_CHARS)
    body = " ".join(text[start:end].split())
    return safe(("…" if start else "") + body + ("…" if end < len(text) else ""))


def _session_fields(session: Session, query: str) -> list[str]:
    values = {
        "id": session.id,
        "title": session.title,
        "agent": session.agent,
        "user": session.user,
        "workspace": session.workspace,
    }
    return [name for name, value in values.items() if value and query in value.lower()]


def search(
    store: LogReader,
    query: str,
    sessions: Iterable[Session],
    *,
    hits_per_session: int = HITS_PER_SESSION,
    max_sessions: int = MAX_SESSIONS,
) -> list[SessionMatch]:
    """Find ``query`` (case-insensitive substring) in sessions and their events.

    Args:
        store: the log.
        query: the text to find; surrounding blanks are ignored, and a blank query matches
            nothing.
        sessions: the sessions to search (the caller decides which it may read).
        hits_per_session: events kept per session (all are counted).
        max_sessions: stop after this many matching sessions.

    Returns:
        One :class:`SessionMatch` per matching session, in the order given.
    """
    needle = query.strip().lower()
    if not needle:
        return []
    matches: list[SessionMatch] = []
    for session in sessions:
        hits, total = _event_hits(store, session.id, needle, keep=hits_per_session)
        fields = _session_fields(session, needle)
        if fields or total:
            matches.append(SessionMatch(session.id, fields, hits, total))
            if len(matches) >= max_sessions:
                break
    return matches


def _event_hits(
    store: LogReader, session_id: str, needle: str, *, keep: int
) -> tuple[list[SearchHit], int]:
    """The first ``keep`` matching events of the session in seq order, and how many match,
    each API message counted once.

    One pass over the events. Whether a message event is a part read in another's place
    (:class:`MessageParts`) is only known once a later part has arrived, so the hits of
    events of an API message are all kept and settled at the end: the whole message's hit
    stands at the first part's seq and the other parts' hits are dropped. Of the other events
    only the first ``keep`` hits are kept (and all are counted).
    """
    parts = MessageParts()
    others: list[SearchHit] = []
    counted = 0
    maybe: dict[int, SearchHit] = {}
    for event in store.read(session_id):
        parts.add(event)
        snippet = _snippet(event_text(event.payload), needle)
        if snippet is None:
            continue
        hit = SearchHit(event.seq, safe(event.type) if event.type else None, event.actor, snippet)
        if parts.related(event.seq):
            maybe[event.seq] = hit
        else:
            counted += 1
            if len(others) < keep:
                others.append(hit)
    settled: list[SearchHit] = []
    for seq, hit in maybe.items():
        first = parts.part_of(seq)
        if first is not None:  # a later part: it stands at the first part when it is the whole
            if parts.read_as(first) == seq:
                settled.append(replace(hit, seq=first))
        elif parts.read_as(seq) in (None, seq):
            settled.append(hit)
    hits = sorted([*others, *settled], key=lambda h: h.seq)[:keep]
    return hits, counted + len(settled)
