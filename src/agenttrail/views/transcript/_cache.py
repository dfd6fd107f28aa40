"""Indexes of recently read sessions, shared by the viewer's requests.

A :class:`~agenttrail.views.transcript._index.TranscriptIndex` costs a read of the whole
session to build and little to extend, so the server keeps the indexes of the sessions read
last and brings each up to the log's head before it is used.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Protocol

from agenttrail.evidence.audit import audit
from agenttrail.log.chain import ChainReader
from agenttrail.model import LogReader
from agenttrail.views.liveness import TurnReader, is_live
from agenttrail.views.safe import safe
from agenttrail.views.transcript._index import TranscriptIndex, TranscriptPage
from agenttrail.views.transcript._rows import Row

__all__ = ["INDEX_CACHE_SIZE", "IndexCache", "OverviewReader"]

INDEX_CACHE_SIZE = 16
"""Sessions whose index :class:`IndexCache` keeps: an index costs about 100 bytes per event."""


class OverviewReader(ChainReader, TurnReader, Protocol):
    """What an overview reads: the chain (to check it) and the turn lock (to tell a live
    session); every ``LogStore`` is one."""


class IndexCache:
    """Indexes of recently read sessions, kept up to date with the log; thread-safe.

    Args:
        size: sessions kept; the least recently used index is dropped beyond it.
    """

    def __init__(self, size: int = INDEX_CACHE_SIZE) -> None:
        self._size = size
        self._indexes: OrderedDict[str, TranscriptIndex] = OrderedDict()
        self._guard = threading.Lock()
        self._locks: dict[str, threading.Lock] = {}

    def use(self, store: LogReader, session_id: str, fn: Callable[[TranscriptIndex], Any]) -> Any:
        """Call ``fn`` with the session's index brought up to the log's head.

        Raises:
            SessionNotFound: no such session.
        """
        with self._guard:
            lock = self._locks.setdefault(session_id, threading.Lock())
        with lock:
            session = store.get_session(session_id)
            with self._guard:
                index = self._indexes.get(session_id)
            if index is None or index.created_at != session.created_at:
                index = TranscriptIndex(session_id, session.created_at, dated=session.dated)
            if session.head_seq > index.head:
                index.extend(store.read(session_id, after_seq=index.head))
            with self._guard:
                self._indexes[session_id] = index
                self._indexes.move_to_end(session_id)
                while len(self._indexes) > self._size:
                    self._indexes.popitem(last=False)
            return fn(index)

    def page(
        self, store: LogReader, session_id: str, *, after_seq: int, limit: int, full: bool = False
    ) -> TranscriptPage:
        """:meth:`TranscriptIndex.page` of the session, index brought up to date first."""
        page: TranscriptPage = self.use(
            store,
            session_id,
            lambda index: index.page(store, after_seq=after_seq, limit=limit, full=full),
        )
        return page

    def run_rows(
        self, store: LogReader, session_id: str, agent_id: str, *, full: bool = False
    ) -> list[Row]:
        """:meth:`TranscriptIndex.run_rows` of the session.

        Raises:
            KeyError: the session has no finished run ``agent_id``.
        """
        rows: list[Row] = self.use(
            store, session_id, lambda index: index.run_rows(store, agent_id, full=full)
        )
        return rows

    def overview(self, store: OverviewReader, session_id: str) -> dict[str, Any]:
        """Counts of :meth:`TranscriptIndex.summary`, the chain status, checked now, and
        ``live`` (:func:`agenttrail.views.liveness.is_live`).

        The chain and the trace rows are checked on every call
        (:func:`agenttrail.evidence.audit.audit`): a badge must not vouch for a log from memory.
        """
        (summary,) = self.overviews(store, [session_id])
        return summary

    def overviews(self, store: OverviewReader, session_ids: list[str]) -> list[dict[str, Any]]:
        """:meth:`overview` of each session, in order, their chains checked in one pass
        (the viewer's sessions list asks for all of them at once)."""
        now = datetime.now(UTC)

        def overview(index: TranscriptIndex) -> dict[str, Any]:
            summary = index.summary()
            ended = index.ended  # an ended session needs no look at its turn lock
            writing = not ended and store.current_turn(index.session_id) is not None
            summary["live"] = is_live(
                last_event_at=index.last_event_at, ended=ended, writing=writing, now=now
            )
            return summary

        summaries: list[dict[str, Any]] = [
            self.use(store, session_id, overview) for session_id in session_ids
        ]
        for summary, verdict in zip(summaries, audit(store, session_ids), strict=True):
            summary["chain"] = verdict.record(escape=safe)
        return summaries
