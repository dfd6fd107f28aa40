"""A page of sessions read whole in a few statements: what a list of many sessions reads.

The viewer's sessions list builds each session's overview (its counts, its chain checked,
its trace rows checked, its turn lock, its usage) with the same per-session code the
``…/summary`` route runs. Over the store that code costs about sixteen statements a session;
over a :class:`SessionsSnapshot` of a page of sessions it costs six statements a page, all
read in one transaction, one per table (sessions, events, erasures, trace rows, idempotency
keys, turn leases), with the session ids in an ``IN`` list. The snapshot answers the
per-session reads (``get_session``, ``read``, ``chain_pages``, ``trace_chain``, ``key_chain``,
``traces``, ``current_turn``) from those rows, built by the same functions as the store's own
answers (``_rules.py``), so the code above cannot tell it from the store.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import TYPE_CHECKING, Any

from agenttrail.codec import now_timestamp
from agenttrail.errors import SessionNotFound
from agenttrail.log.store import ChainPage, TraceChain, TurnLease
from agenttrail.log.store._backend import CHAIN_PAGE_ROWS
from agenttrail.log.store._rules import (
    START_COLUMNS,
    TRACE_FIELDS,
    chain_start,
    event_of,
    session_from_row,
    trace_row,
)
from agenttrail.log.store._sql import SESSION_COLUMNS, Tx
from agenttrail.model import Event, Session, TraceRow

if TYPE_CHECKING:
    from agenttrail.log.store._base import StoreBase

__all__ = ["SessionsSnapshot"]

_TRACES = ", ".join(TRACE_FIELDS)
_SESSION_AT = len(SESSION_COLUMNS.split(","))
_START_AT = _SESSION_AT + len(START_COLUMNS.split(","))


def _by_session(rows: list[Any]) -> dict[str, list[Any]]:
    """Rows whose first column is a session id, grouped by it, the rest of each row kept in
    the order read."""
    grouped: dict[str, list[Any]] = {}
    for row in rows:
        grouped.setdefault(row[0], []).append(tuple(row[1:]))
    return grouped


class SessionsSnapshot:
    """The reads of a page of sessions, from rows read in one read transaction.

    Args:
        store: the backend to read (its ``_read`` and its dialect's statements).
        session_ids: the sessions of the page (at most ``SNAPSHOT_SESSIONS``).

    Raises:
        StoreError: the rows cannot be read (as the store's reads raise it).
    """

    def __init__(self, store: StoreBase[Any], session_ids: Sequence[str]) -> None:
        self.store = store
        self.ids = tuple(session_ids)
        sql = store.sql
        among = f"IN ({', '.join([sql.param] * len(self.ids))})" if self.ids else "IN (NULL)"
        queries = (
            f"SELECT {SESSION_COLUMNS}, {START_COLUMNS}, trace_count, trace_hash, key_count, "
            f"key_hash FROM sessions WHERE id {among}",
            "SELECT session_id, seq, created_at, payload, hash, salt, digest "
            f"FROM session_events WHERE session_id {among} ORDER BY session_id, seq",
            f"SELECT session_id, seq, erasure_seq FROM erasures WHERE session_id {among} "
            "ORDER BY session_id, seq",
            f"SELECT session_id, {_TRACES}, id, hash FROM trace_rows "
            f"WHERE session_id {among} ORDER BY session_id, id",
            "SELECT session_id, session_id, key, seq, hash FROM session_event_keys "
            f"WHERE session_id {among} ORDER BY session_id, {sql.key_order}",
            "SELECT session_id, turn_id, holder, expires_at FROM turn_leases "
            f"WHERE session_id {among} AND expires_at > {sql.param}",
        )

        def read(tx: Tx) -> list[list[Any]]:
            tx.execute(sql.begin_snapshot)  # one snapshot: heads and rows agree
            try:
                found = [tx.execute(q, self.ids).fetchall() for q in queries[:-1]]
                leases = tx.execute(queries[-1], (*self.ids, now_timestamp())).fetchall()
            finally:
                tx.execute("ROLLBACK")  # nothing to keep
            return [*found, leases]

        sessions, events, erasures, traces, keys, leases = store._read(read)
        self._sessions = {row[0]: tuple(row) for row in sessions}
        self._events = _by_session(events)
        self._erasures = _by_session(erasures)
        self._traces = _by_session(traces)
        self._keys = _by_session(keys)
        self._leases = _by_session(leases)

    # -- LogReader --------------------------------------------------------------------------

    def get_session(self, session_id: str) -> Session:
        """The session row (``LogReader``). Raises ``SessionNotFound``, ``SessionRowDamaged``."""
        row = self._sessions.get(session_id)
        if row is None:
            raise SessionNotFound(session_id)
        return session_from_row(row[:_SESSION_AT])

    def sessions(self) -> list[Session]:
        """The sessions of the page that exist, in the page's order."""
        return [self.get_session(sid) for sid in self.ids if sid in self._sessions]

    def session_ids(self) -> list[str]:
        """The ids of the page's sessions that exist, in the page's order."""
        return [sid for sid in self.ids if sid in self._sessions]

    def event_session_ids(self) -> set[str]:
        """The page's session ids that have events."""
        return set(self._events)

    def read(
        self, session_id: str, *, after_seq: int = 0, limit: int | None = None
    ) -> Iterator[Event]:
        """A session's events with seq > ``after_seq``, at most ``limit`` (``LogReader``)."""
        rows = [row for row in self._events.get(session_id, ()) if row[0] > after_seq]
        for row in rows if limit is None else rows[:limit]:
            yield event_of(session_id, row)

    def traces(self, session_id: str, *, turn_seq: int | None = None) -> list[TraceRow]:
        """A session's trace rows in result order, or those of the turn at ``turn_seq``."""
        rows = [trace_row(row[:-1]) for row in self._traces.get(session_id, ())]
        if turn_seq is not None:
            rows = [row for row in rows if row.turn_seq == turn_seq]
        return sorted(rows, key=lambda row: row.result_seq)

    def trace(self, trace_id: int) -> TraceRow:
        """A trace row by its id, from the store (``LogReader``)."""
        return self.store.trace(trace_id)

    # -- ChainReader ------------------------------------------------------------------------

    def chain_pages(self, session_id: str) -> AbstractContextManager[Iterator[ChainPage]]:
        """A session's rows and its head, read together (``ChainReader``), a page at a time
        as the store gives them."""
        row = self._sessions.get(session_id)
        start = chain_start(
            session_id,
            None if row is None else row[_SESSION_AT:_START_AT],
            self._erasures.get(session_id, []),
        )
        rows = self._events.get(session_id, [])
        size = CHAIN_PAGE_ROWS

        @contextmanager
        def pages() -> Iterator[Iterator[ChainPage]]:
            yield (
                start._replace(rows=rows[at : at + size]) for at in range(0, len(rows) + 1, size)
            )

        return pages()

    def log_chains(self) -> dict[str, TraceChain]:
        """The chains of the log's own rows, from the store (``ChainReader``)."""
        return self.store.log_chains()

    def trace_chain(self, session_id: str) -> TraceChain:
        """A session's trace head and rows with their hashes (``ChainReader``)."""
        rows = [(*row[:-2], row[-1]) for row in self._traces.get(session_id, ())]
        row = self._sessions.get(session_id)
        if row is None:
            return TraceChain(1, 0, None, rows)
        version, (count, last) = row[_SESSION_AT - 1], row[_START_AT : _START_AT + 2]
        return TraceChain(version, count, None if last is None else bytes(last), rows)

    def key_chain(self, session_id: str) -> TraceChain:
        """A session's key head and idempotency keys with their hashes (``ChainReader``)."""
        rows = self._keys.get(session_id, [])
        row = self._sessions.get(session_id)
        if row is None:
            return TraceChain(1, 0, None, rows)
        count, last = row[_START_AT + 2 :]
        return TraceChain(2, count, None if last is None else bytes(last), rows)

    # -- TurnReader -------------------------------------------------------------------------

    def current_turn(self, session_id: str) -> TurnLease | None:
        """The lease in force for the session as of the snapshot, or ``None``."""
        found = self._leases.get(session_id)
        return TurnLease(session_id, *found[0]) if found else None
