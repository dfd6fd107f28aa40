"""The search index as the layers above the store see it: rows of text per event, and a query.

The store keeps the index (tables beside the events, docs/search.md) but never reads a
payload's text: the rows it indexes are computed above it, from what a reader sees of each
event (:func:`agenttrail.views.search.event_text`), and handed to :meth:`SearchIndex.index`.
A per-session watermark, the last seq indexed, says how far each session's rows go, so that a
search brings the index up to date with the appends made since (the append path knows nothing
of it) before it queries.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from agenttrail.model.reader import LogReader

__all__ = [
    "IndexHit",
    "IndexRow",
    "SearchFilter",
    "SearchIndex",
    "SearchableLog",
    "names_model",
    "same_name",
]


@dataclass(frozen=True)
class IndexRow:
    """The searchable text of one event, as the index stores it."""

    seq: int
    created_at: str
    """The event's ``created_at`` (RFC 3339 UTC), for ``since`` and ``until``; empty for an
    event of a session whose source gives no times (``Session.dated``), which neither takes."""
    type: str | None
    """The payload's ``type``."""
    actor: str
    tool: str | None
    """The tool's name: a ``tool_call``'s own, a ``tool_result``'s from its call (found by
    call id, :func:`agenttrail.views.search.bring_up_to_date`), else from the result itself."""
    error: bool
    """An ``error`` event, or a tool result or shell command that failed
    (:func:`agenttrail.model.tool_status`: as every view marks it)."""
    model: str | None
    """The model a message names (``meta.model``), for ``sessions --model``."""
    message_id: str | None
    """``messageId`` of an assistant message stored in parts (:mod:`agenttrail.model.parts`):
    hits on parts of one message are shown once, at the first."""
    call_id: str | None
    """A ``tool_call``'s ``id`` or a ``tool_result``'s ``toolCallId`` (``None`` when empty):
    how a result finds its call's name."""
    text: str
    """What a reader sees of the event (snippets are cut from it)."""
    folded: str
    """``text`` folded for matching (case folded, accents removed): queries are folded the
    same way and matched as substrings of it."""


@dataclass(frozen=True)
class SearchFilter:
    """Which events a query may match; ``None`` (or False) leaves a field open."""

    session_ids: Sequence[str] | None = None
    """Only these sessions (a token's one session, ``--session``)."""
    tool: str | None = None
    """Only events of this tool (its name in any case)."""
    errors: bool = False
    """Only errors, failed tool results and failed shell commands."""
    agent: str | None = None
    """Only sessions of this agent (:func:`same_name`)."""
    since: str | None = None
    """Only events created at or after this: a date (``YYYY-MM-DD``) or a ``created_at``
    (``agenttrail.views.session_list.checked_time``), compared with as many characters."""
    until: str | None = None
    """Only events created at or before this, as ``since`` (a date takes the whole day)."""


@dataclass(frozen=True)
class IndexHit:
    """One indexed event whose folded text holds the query."""

    session_id: str
    seq: int
    type: str | None
    actor: str
    message_id: str | None
    first_seq: int
    """Where the hit stands: the seq of the first indexed event with its ``message_id`` (a
    part of an API message stands at the first part, :mod:`agenttrail.model.parts`), else
    ``seq``."""
    text: str


class SearchIndex(Protocol):
    """The store's search index (``sqlite.py``: FTS5 trigram; ``postgres.py``: pg_trgm)."""

    def index_marks(self) -> list[tuple[str, int]]:
        """``(session_id, seq indexed up to)`` of every session with events past its
        watermark (0 for a session never indexed), in the order sessions were created. Rows of
        sessions removed by retention are dropped from the index on the way."""
        ...

    def index(
        self, session_id: str, after_seq: int, upto_seq: int, rows: Sequence[IndexRow]
    ) -> bool:
        """Add ``rows`` (events ``after_seq`` < seq <= ``upto_seq``) to the index and move the
        session's watermark to ``upto_seq``, in one write transaction. False (nothing
        written) when the watermark is no longer ``after_seq``: another process indexed them."""
        ...

    def call_tools(self, session_id: str, call_ids: Sequence[str]) -> dict[str, str]:
        """The tool names of the indexed ``tool_call`` events of ``session_id`` whose id is one
        of ``call_ids``: ``{call id: name}``, the last call (highest seq) of an id that two
        share; ids with no indexed call are left out. Read through an index on the call id."""
        ...

    def flagged_sessions(self, *, errors: bool = False, model: str | None = None) -> set[str]:
        """Ids of the indexed sessions with an error or failed tool result (``errors``) and a
        message of a model ``model`` names (:func:`names_model`, when given); every indexed
        session when neither is asked."""
        ...

    def query(self, folded: str, where: SearchFilter, *, limit: int) -> list[IndexHit]:
        """Up to ``limit`` indexed events whose folded text contains ``folded`` (every event
        ``where`` picks when ``folded`` is empty), in the order the index gives them (not
        sorted: sorting every match of a common word before the limit would cost more than
        the search; the caller orders what it keeps)."""
        ...


class SearchableLog(LogReader, SearchIndex, Protocol):
    """A log with its search index: what :func:`agenttrail.views.search.search` reads."""


def same_name(asked: str, name: str | None) -> bool:
    """Whether ``--agent asked`` (or ``--user``) names a session's agent (or user): the same
    name in any case (``harvey`` names ``Harvey``, ``rsdoiel`` a Harvey file's user
    ``RSDOIEL``; the store's search compares with the lowering of ``Statements.lower``,
    which is Python's on SQLite too)."""
    return name is not None and name.lower() == asked.lower()


_SNAPSHOT = re.compile(r"[-@](?:[0-9]{4}-[0-9]{2}-[0-9]{2}|[0-9]{8})")
"""The date a provider appends to a model's name for a snapshot of it: OpenAI's
``gpt-4o-mini-2024-07-18``, Anthropic's ``claude-sonnet-4-5-20250929``, Vertex's
``claude-3-5-sonnet@20240620``."""


def names_model(asked: str, model: str) -> bool:
    """Whether ``--model asked`` names a model a message recorded: the same name in any case,
    or that name with a snapshot's date after it (a response names the snapshot that answered
    ``gpt-4o-mini``: ``gpt-4o-mini-2024-07-18``). ``gpt-4o`` does not name ``gpt-4o-mini``."""
    asked, model = asked.lower(), model.lower()
    if model == asked:
        return True
    return model.startswith(asked) and _SNAPSHOT.fullmatch(model, len(asked)) is not None
