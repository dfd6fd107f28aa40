"""Text search across sessions: their titles, agents, users and the text of every event.

What is searched is what a reader sees (message text, tool names, arguments and results,
errors, shell commands and output, context, notes), never the bytes of an image, document or
file: an attachment is searched by the name a view gives it
(:meth:`agenttrail.model.Attachment.label`, docs/log-format.md, Attachments).

Events are found through the store's index (:class:`agenttrail.model.search.SearchIndex`,
docs/search.md): before each search the events appended since the last one are indexed
(:func:`bring_up_to_date`), so the index is in step with the log without the append path
knowing of it. A query matches as a substring after both it and the text are folded
(:func:`fold`: Unicode case folding, so ``STRASSE`` finds ``Straße``, Latin accents removed,
compatibility forms unified), in any script. An API message stored in growing parts
(:class:`agenttrail.model.parts.MessageParts`) is found once, at the first part's seq
(parts are told by their ``messageId`` alone here).
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from agenttrail.codec import escaped_surrogates
from agenttrail.model import (
    Event,
    Session,
    payload_attachments,
    prose_text,
    reasoning_of,
    tool_status,
)
from agenttrail.model.search import IndexHit, IndexRow, SearchableLog, SearchFilter, same_name
from agenttrail.views.safe import safe

__all__ = [
    "HITS_PER_SESSION",
    "HIT_LIMIT",
    "SNIPPET_CHARS",
    "SearchHit",
    "SessionMatch",
    "bring_up_to_date",
    "event_text",
    "fold",
    "index_row",
    "narrows_events",
    "search",
]

SNIPPET_CHARS = 60
"""Characters shown on each side of a match."""

HITS_PER_SESSION = 5
"""Hits kept per session; ``total`` still counts every matching event."""

MAX_SESSIONS = 50
"""Sessions with matches returned by default, in the log's order."""

HIT_LIMIT = 2000
"""Matching events read from the index per search, at most; past it ``total`` counts only
the events read (``SessionMatch.total``), and which ones are read is the index's order."""

INDEX_BATCH = 5000
"""Events read and indexed per write transaction while bringing the index up to date."""

_ACCENTS = re.compile("[\u0300-\u036f]")
"""Combining Diacritical Marks (the Latin, Greek and Cyrillic accents), removed by
:func:`fold`; other scripts' marks (Japanese voicing, Arabic vowels) are kept."""


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
    """How many events match (of the first :data:`HIT_LIMIT` matching events of a search)."""

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
            parts += [text for b in blocks if (text := reasoning_of(b)) is not None]
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


def fold(text: str) -> str:
    """``text`` as the index matches it: case folded (Unicode ``casefold``, so ``ß`` is
    ``ss``), compatibility forms decomposed (NFKD: full-width ``Ａ`` is ``a``), Latin, Greek
    and Cyrillic accents removed (:data:`_ACCENTS`), then composed again (NFC)."""
    decomposed = unicodedata.normalize("NFKD", text.casefold())
    return unicodedata.normalize("NFC", _ACCENTS.sub("", decomposed))


def index_row(event: Event, *, dated: bool = True) -> IndexRow:
    """The index's row of one event: its text (:func:`event_text`) and that text folded;
    its ``created_at`` empty when not ``dated`` (``Session.dated``: the session's source
    gives no times, and the event's is the import's), so that no ``since`` or ``until``
    takes it.

    A ``tool_result`` is named here by its own ``name`` when it has one; most results carry
    only their call's id, and :func:`bring_up_to_date` names them from their call."""
    payload = event.payload
    text = escaped_surrogates(event_text(payload))
    name = payload.get("name")
    tool = name if isinstance(name, str) and event.type in ("tool_call", "tool_result") else None
    call_id = payload.get(
        "id" if event.type == "tool_call" else "toolCallId" if event.type == "tool_result" else ""
    )
    error = event.type == "error" or (
        event.type in ("tool_result", "shell") and not tool_status(payload).ok
    )
    message_id = payload.get("messageId") if event.type == "message" else None
    meta = payload.get("meta")
    model = meta.get("model") if isinstance(meta, dict) and event.type == "message" else None
    return IndexRow(
        event.seq,
        event.created_at if dated else "",
        _indexed(event.type),
        escaped_surrogates(event.actor),
        _indexed(tool),
        error,
        _indexed(model if isinstance(model, str) and model else None),
        _indexed(message_id if isinstance(message_id, str) else None),
        _indexed(call_id if isinstance(call_id, str) and call_id else None),
        text,
        fold(text),
    )


def _indexed(value: str | None) -> str | None:
    """A text of the index as a database stores it: its lone surrogates as escapes (the log
    keeps them; the index holds text a reader searches for, which cannot type them)."""
    return None if value is None else escaped_surrogates(value)


def bring_up_to_date(store: SearchableLog) -> int:
    """Index every event appended since the last search, each session from its watermark on,
    :data:`INDEX_BATCH` events per write transaction. Returns how many events were indexed
    (by this call: another process may have indexed some of them first).

    A tool result is indexed under its call's tool name (:func:`_named_by_call`), so that
    ``--tool`` finds the results of a tool as well as its calls."""
    indexed = 0
    marks = store.index_marks()
    # one read of the session rows, not one a session: a first search indexes every session
    undated = {s.id for s in store.sessions() if not s.dated} if marks else set()
    for session_id, mark in marks:
        dated = session_id not in undated
        while True:
            batch = list(store.read(session_id, after_seq=mark, limit=INDEX_BATCH))
            if not batch:
                break
            upto = batch[-1].seq
            rows = [index_row(event, dated=dated) for event in batch]
            rows = _named_by_call(store, session_id, rows)
            if not store.index(session_id, mark, upto, rows):
                break  # another process moved the watermark: it indexes this session
            indexed += len(batch)
            mark = upto
    return indexed


def _named_by_call(store: SearchableLog, session_id: str, rows: list[IndexRow]) -> list[IndexRow]:
    """``rows`` (one batch, in seq order) with each tool result named after its call: the
    last ``tool_call`` before it with the id the result names (``toolCallId``), looked for in
    the batch, then among the session's indexed calls (:meth:`SearchIndex.call_tools`, one
    indexed lookup per batch). A result whose call is not found keeps its own ``name``.
    Pairing's rule (:mod:`agenttrail.views.pairing`): by call id, never by position."""
    asked = {r.call_id for r in rows if r.type == "tool_result" and r.call_id is not None}
    if not asked:
        return rows
    names = store.call_tools(session_id, sorted(asked))
    named: list[IndexRow] = []
    for row in rows:
        if row.type == "tool_call" and row.call_id is not None and row.tool is not None:
            names[row.call_id] = row.tool
        elif row.type == "tool_result" and row.call_id in names:
            row = replace(row, tool=names[row.call_id])
        named.append(row)
    return named


def _snippet(text: str, needle: str) -> str:
    """The match of the folded ``needle`` in ``text``, with :data:`SNIPPET_CHARS` either side."""
    origin: Sequence[int]
    if text.isascii():  # folding is lower(), one character for one
        folded, origin = text.lower(), range(len(text))
    else:
        pieces = [char.lower() if char.isascii() else fold(char) for char in text]
        folded = "".join(pieces)
        # the index in text of each folded character
        origin = [at for at, piece in enumerate(pieces) for _ in piece]
    found = folded.find(needle) if needle and text else -1  # no needle: the text's start
    at = origin[found] if found >= 0 else 0  # per character folding may differ: start then
    end_at = origin[found + len(needle) - 1] + 1 if found >= 0 and needle else at
    start, end = max(0, at - SNIPPET_CHARS), min(len(text), end_at + SNIPPET_CHARS)
    body = " ".join(text[start:end].split())
    return safe(("…" if start else "") + body + ("…" if end < len(text) else ""))


def _session_fields(session: Session, needle: str) -> list[str]:
    values = {
        "id": session.id,
        "title": session.title,
        "agent": session.agent,
        "user": session.user,
        "workspace": session.workspace,
    }
    return [name for name, value in values.items() if value and needle in fold(value)]


def search(
    store: SearchableLog,
    query: str,
    sessions: Iterable[Session],
    *,
    where: SearchFilter | None = None,
    hits_per_session: int = HITS_PER_SESSION,
    max_sessions: int = MAX_SESSIONS,
) -> list[SessionMatch]:
    """Find ``query`` in sessions' fields and their events, through the index.

    Args:
        store: the log and its search index; the index is brought up to date first.
        query: the text to find (folded, :func:`fold`); surrounding blanks are ignored. A
            blank query matches every event ``where`` narrows to (its tool, errors, since or
            until: ``agenttrail search --errors``), and nothing when it narrows to none.
        sessions: the sessions that may be found (the caller decides which it may read), in
            the order to return them. Their fields (id, title, agent, user, workspace) match
            too, unless ``where`` narrows the events (tool, errors, since).
        where: filters on the events (default none); ``where.session_ids`` narrows the index
            query itself, for a caller that may read few sessions.
        hits_per_session: events kept per session (all read are counted).
        max_sessions: stop after this many matching sessions.

    Returns:
        One :class:`SessionMatch` per matching session, in the order given.
    """
    where = where or SearchFilter()
    needle = fold(escaped_surrogates(query.strip()))  # as the index holds text (index_row)
    narrowed = narrows_events(where)
    if not needle and not narrowed:
        return []
    bring_up_to_date(store)
    by_session: dict[str, list[IndexHit]] = {}
    for hit in store.query(needle, where, limit=HIT_LIMIT):
        by_session.setdefault(hit.session_id, []).append(hit)
    matches: list[SessionMatch] = []
    for session in sessions:
        if where.agent is not None and not same_name(where.agent, session.agent):
            continue
        hits = _once_per_message(by_session.get(session.id, []))
        fields = [] if narrowed else _session_fields(session, needle)
        if fields or hits:
            shown = [
                SearchHit(
                    h.seq, safe(h.type) if h.type else None, h.actor, _snippet(h.text, needle)
                )
                for h in hits[:hits_per_session]
            ]
            matches.append(SessionMatch(session.id, fields, shown, len(hits)))
            if len(matches) >= max_sessions:
                break
    return matches


def narrows_events(where: SearchFilter) -> bool:
    """Whether ``where`` picks events by themselves (their tool, errors, time), not only by
    their session: then a search needs no text, and session fields do not match."""
    return where.tool is not None or where.errors or (where.since or where.until) is not None


def _once_per_message(hits: list[IndexHit]) -> list[IndexHit]:
    """The hits in seq order, an API message stored in parts (one ``messageId``) found once:
    its last part that matches (the most whole), standing at the first part's seq."""
    last: dict[str, IndexHit] = {}
    kept: list[IndexHit] = []
    for hit in sorted(hits, key=lambda h: h.seq):
        if hit.message_id is None:
            kept.append(hit)
        else:
            last[hit.message_id] = hit
    kept += [replace(h, seq=h.first_seq) for h in last.values()]
    return sorted(kept, key=lambda h: h.seq)
