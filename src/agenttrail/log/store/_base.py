"""The store, written once: every role of the contract over the small part each backend owns.

Each role of :mod:`agenttrail.log.store` (:class:`EventLog`, :class:`TraceLog`,
:class:`TurnLocks`, :class:`Archive`) has one implementation, a mixin of :class:`StoreBase`
(the archive's in :mod:`agenttrail.log.store._archive`), so the two backends cannot drift
apart: a check one of them skipped, or a statement one of them wrote differently, is not
possible any more. What a backend module
adds is the locking and dialect of :class:`agenttrail.log.store._backend.Backend`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, Self

from agenttrail.codec import normalize_timestamp
from agenttrail.errors import (
    AgentTrailError,
    InputError,
    SessionNotFound,
    TurnInFlight,
)
from agenttrail.log.redact import Redactor
from agenttrail.log.store import (
    Appended,
    Row,
    TraceBuilder,
    Traced,
    TurnLease,
)
from agenttrail.log.store._archive import ArchiveBase
from agenttrail.log.store._backend import Backend, C
from agenttrail.log.store._rules import (
    BIGINT,
    Encoded,
    check_new_session,
    check_session_fields,
    check_text,
    check_trace,
    encode_events,
    event_of,
    is_text,
    session_from_row,
    stored_head,
    trace_row,
    with_id,
)
from agenttrail.log.store._snapshot import SessionsSnapshot
from agenttrail.model import Event, NewEvent, NewSession, NewTrace, Session, TraceRow

__all__ = ["StoreBase"]


class EventLogBase(Backend[C]):
    """Sessions and their events (``EventLog``)."""

    def create_session(self, new: NewSession) -> Session:
        """Create a session row.

        Raises:
            InputError: the id does not follow the id rule (``model.SESSION_ID_RULE``).
            SessionExists: the id is taken, or was removed by retention.
        """
        new = self.redactor.session(new)
        session_id = check_new_session(new)  # drawn once, not once per retry
        self._write("create_session", lambda tx: self._insert_session(tx, with_id(new, session_id)))
        return self.get_session(session_id)

    def get_session(self, session_id: str) -> Session:
        """The session row. Raises ``SessionNotFound``."""
        if not is_text(session_id):  # no id holds a lone surrogate (an argument not UTF-8)
            raise SessionNotFound(session_id)
        rows = self._query(self.sql.get_session, (session_id,))
        if not rows:
            raise SessionNotFound(session_id)
        return session_from_row(rows[0])

    def sessions(self) -> list[Session]:
        """Every session, in the order they were created."""
        return [session_from_row(row) for row in self._query(self.sql.sessions)]

    def session_ids(self) -> list[str]:
        """Every session's id, in the order they were created: the rows are not read, so a
        row changed by hand is listed all the same (verify lists sessions with this)."""
        return [row[0] for row in self._query(self.sql.session_ids)]

    def head(self, session_id: str) -> tuple[int, bytes] | None:
        """``(head_seq, head_hash)`` of the session row, or ``None`` if there is no row."""
        rows = self._query(self.sql.head, (session_id,))
        return stored_head(session_id, rows[0][0], rows[0][1]) if rows else None

    def append(
        self,
        session_id: str,
        payload: dict[str, Any],
        *,
        created_at: str | None = None,
        key: str | None = None,
    ) -> Appended:
        """Append one event (see :meth:`append_batch`)."""
        return self.append_batch(session_id, [NewEvent(payload, created_at, key)])[0]

    def append_batch(
        self,
        session_id: str,
        events: Sequence[NewEvent],
        *,
        create: NewSession | None = None,
        unless_turn: bool = False,
        redacted: bool = False,
    ) -> list[Appended]:
        """Append events to a session in one transaction: all are written or none.

        Args:
            session_id: the session; created from ``create`` (whose id is ignored) when it
                does not exist and ``create`` is given.
            events: payloads with optional ``created_at`` and idempotency ``key``.
            unless_turn: refuse (``TurnInFlight``) while an agent turn holds the session's
                turn lock, checked under the session's append lock (a user's own tool call).
            redacted: the caller has run :attr:`redactor` over ``events`` and it changed
                none (the importer's check of an export): they are not redacted again.

        Returns:
            One :class:`Appended` per event, in order. An event whose key is already in the
            session (or earlier in the batch) is not written and gets the first seq back.

        Raises:
            PayloadError: a payload would not round-trip (nothing written).
            PayloadTooLarge: a payload is above ``max_payload_bytes`` (nothing written).
            InputError: a ``created_at``, a key or a field of ``create`` would not be stored
                as given, or the session is to be created and its id does not follow the id
                rule (``agenttrail.model.SESSION_ID_RULE``); nothing written.
            SessionNotFound: the session does not exist and ``create`` is None.
            TurnInFlight: ``unless_turn`` and an agent turn is in flight (nothing written).
            StoreError: the database failed (PostgreSQL: after bounded retries of conflicts).
        """
        # Everything that can be refused is refused before the lock: it is held only for SQL.
        # Except the id rule, which applies only if the session is created (_insert_session):
        # sessions made before the rule are appended to as before.
        encoded = encode_events(_redacted(self.redactor, events, redacted), self.max_payload_bytes)
        create = check_session_fields(self.redactor.session(create))
        return self._write(
            "append", lambda conn: self._append(conn, session_id, encoded, create, unless_turn)
        )

    def append_group(
        self, batches: Sequence[tuple[str, Sequence[NewEvent], bool]]
    ) -> list[list[Appended] | AgentTrailError]:
        """The appends of independent callers, ``(session_id, events, unless_turn)`` each, in
        one transaction with one commit (one fsync for them all: group commit), each batch
        still all or nothing and refused alone.

        Each batch is appended as :meth:`append_batch` would (no session is created) under a
        savepoint of its own: a batch that is refused (a payload above the limit, an unknown
        session, an agent turn in flight) is rolled back to its savepoint and its error put in
        its place, and the others commit. When the transaction itself fails (the database
        refused a row, a disk error), each batch is appended again alone, so one batch's
        failure is never another's. Batches of one session keep their order (their seqs
        follow it); sessions are locked in id order, as :meth:`append_sessions` does.

        Returns:
            For each batch, in the order given: what :meth:`append_batch` returns, or the
            :class:`~agenttrail.errors.AgentTrailError` it would raise. Nothing is returned
            before the commit: a list of seqs is durable.
        """
        outcomes: list[list[Appended] | AgentTrailError | None] = [None] * len(batches)
        prepared: list[tuple[int, str, list[Encoded], bool]] = []
        for i, (session_id, events, unless_turn) in enumerate(batches):
            try:
                encoded = encode_events(self.redactor.events(events), self.max_payload_bytes)
            except AgentTrailError as e:
                outcomes[i] = e
                continue
            prepared.append((i, session_id, encoded, unless_turn))
        prepared.sort(key=lambda p: p[1])  # stable: a session's batches keep their order

        def one(conn: C, session_id: str, encoded: list[Encoded], unless_turn: bool) -> Any:
            try:
                with self._savepoint(conn):
                    return self._append(conn, session_id, encoded, None, unless_turn)
            except AgentTrailError as e:
                return e

        def group(conn: C) -> list[Any]:
            return [
                one(conn, session_id, encoded, turn) for _, session_id, encoded, turn in prepared
            ]

        try:
            done = self._write("append", group) if prepared else []
        except AgentTrailError as e:
            if len(prepared) == 1:
                done = [e]
            else:  # each alone: the one that broke the transaction fails, and only it
                done = [
                    self._append_alone(session_id, encoded, turn)
                    for _, session_id, encoded, turn in prepared
                ]
        for (i, *_), outcome in zip(prepared, done, strict=True):
            outcomes[i] = outcome
        return [outcome for outcome in outcomes if outcome is not None]

    def _append_alone(
        self, session_id: str, encoded: list[Encoded], unless_turn: bool
    ) -> list[Appended] | AgentTrailError:
        try:
            return self._write(
                "append", lambda conn: self._append(conn, session_id, encoded, None, unless_turn)
            )
        except AgentTrailError as e:
            return e

    def read(
        self, session_id: str, *, after_seq: int = 0, limit: int | None = None
    ) -> Iterator[Event]:
        """Events of a session with seq > ``after_seq``, in seq order, at most ``limit``.

        Streams in keyset pages of :data:`READ_PAGE_ROWS`; an empty or unknown session
        yields nothing (use ``get_session`` to tell them apart).
        """
        if after_seq >= BIGINT.stop:  # no seq is after it (nor can it be bound)
            return
        after_seq = max(after_seq, -1)
        for row in self._rows(self._query, session_id, after_seq, limit):
            yield event_of(session_id, row)

    def read_rows(self, session_id: str) -> Iterator[Row]:
        """``(seq, created_at, payload, hash, salt, digest)`` of every row in seq order,
        undecoded."""
        return self._rows(self._query, session_id, 0, None)

    def event_keys(self, session_id: str) -> list[tuple[str, int]]:
        """``(key, seq)`` of every idempotency key of a session, in seq order."""
        return [(key, seq) for key, seq in self._query(self.sql.event_keys, (session_id,))]

    def holds_key(self, session_id: str, prefix: str) -> bool:
        """Whether an idempotency key of the session begins with ``prefix`` (a format's
        name, ``otlp:``): one look in the keys' index, where :meth:`event_keys` reads them
        all (the OTLP receiver asks it of every request, docs/otel.md)."""
        return bool(self._query(self.sql.key_with_prefix, (session_id, len(prefix), prefix)))


class TraceLogBase(Backend[C]):
    """Trace rows (``TraceLog``)."""

    def add_traces(self, rows: Sequence[NewTrace]) -> list[TraceRow]:
        """Write trace rows in one transaction, skipping any already stored for its result.

        Raises:
            InputError: a text field of a row would not be stored as given, naming the field
                (nothing written).
        """
        for row in rows:
            check_trace(row)
        return self._write("add_traces", lambda conn: self._insert_traces(conn, rows))

    def append_traced(
        self,
        session_id: str,
        events: Sequence[NewEvent],
        traces: TraceBuilder,
        *,
        create: NewSession | None = None,
        redacted: bool = False,
    ) -> Traced:
        """Append events and the trace rows ``traces`` builds from the seqs they get, in one
        transaction: both are written or neither (see :meth:`TraceLog.append_traced`; the
        builder runs again when the transaction is retried; ``redacted`` as in
        :meth:`append_batch`).

        Raises:
            InputError: a trace row's text field would not be stored as given (nothing
                written, not the events either); and what :meth:`append_batch` raises.
        """
        encoded = encode_events(_redacted(self.redactor, events, redacted), self.max_payload_bytes)
        create = check_session_fields(self.redactor.session(create))
        return self._write(
            "append_traced", lambda conn: self._traced(conn, session_id, encoded, create, traces)
        )

    def append_chunks(
        self,
        session_id: str,
        chunks: Callable[[], Iterable[Sequence[NewEvent]]],
        traces: TraceBuilder,
        *,
        create: NewSession | None = None,
        redacted: bool = False,
    ) -> Traced:
        """:meth:`append_traced` of the events ``chunks()`` yields, each chunk redacted,
        checked and appended as it comes, in one transaction: what is held at a time is one
        chunk, whatever the session's length (``agenttrail.ingest.export`` imports a large
        export so). ``chunks`` is called once per attempt of the transaction, so a retried
        one (PostgreSQL) reads its source again.

        Raises:
            What :meth:`append_traced` raises, and what ``chunks`` raises (nothing written).
        """
        create = check_session_fields(self.redactor.session(create))

        def tx(conn: C) -> Traced:
            appended: list[Appended] = []
            for chunk in chunks():
                events = _redacted(self.redactor, chunk, redacted)
                encoded = encode_events(events, self.max_payload_bytes)
                appended += self._append(conn, session_id, encoded, create, False)
            return self._with_traces(conn, session_id, appended, traces)

        return self._write("append_chunks", tx)

    def append_sessions(
        self,
        batches: Sequence[tuple[str, Sequence[NewEvent], NewSession | None]],
        *,
        traces: Sequence[TraceBuilder | None] = (),
    ) -> list[Traced]:
        """:meth:`append_batch` of each ``(session_id, events, create)``, with the trace rows
        ``traces[i]`` builds for batch ``i`` (as :meth:`append_traced`; none when it is
        ``None`` or missing), all in one transaction: every batch and row is written or
        none, and they share one commit (one fsync, where a commit per session costs one
        each: an OTLP request spans many sessions).

        The sessions' append locks are taken in session id order, whatever the order of
        ``batches``, so that two such appends cannot deadlock on PostgreSQL.

        Returns:
            One :class:`Traced` per batch, in the order given.

        Raises:
            What :meth:`append_traced` raises, for any batch (nothing written).
        """
        prepared = [
            (
                session_id,
                encode_events(self.redactor.events(events), self.max_payload_bytes),
                check_session_fields(self.redactor.session(create)),
                traces[i] if i < len(traces) else None,
            )
            for i, (session_id, events, create) in enumerate(batches)
        ]
        order = sorted(range(len(prepared)), key=lambda i: prepared[i][0])

        def tx(conn: C) -> list[Traced]:
            done: dict[int, Traced] = {}
            for i in order:
                done[i] = self._traced(conn, *prepared[i])
            return [done[i] for i in range(len(prepared))]

        return self._write("append_sessions", tx)

    def _traced(
        self,
        conn: C,
        session_id: str,
        encoded: Sequence[Encoded],
        create: NewSession | None,
        traces: TraceBuilder | None,
    ) -> Traced:
        """The body of an append with its trace rows, inside the caller's transaction."""
        appended = self._append(conn, session_id, encoded, create, False)
        return self._with_traces(conn, session_id, appended, traces)

    def _with_traces(
        self, conn: C, session_id: str, appended: list[Appended], traces: TraceBuilder | None
    ) -> Traced:
        """An append's outcome with the trace rows ``traces`` builds of it, written in the
        caller's transaction."""
        if traces is None:
            return Traced(appended, [])
        rows = list(traces(appended, lambda: self._events_in(conn, session_id)))
        for row in rows:
            check_trace(row)
        return Traced(appended, self._insert_traces(conn, rows))

    def traces(self, session_id: str, *, turn_seq: int | None = None) -> list[TraceRow]:
        """A session's trace rows in result order, or only those of the turn at ``turn_seq``."""
        if turn_seq is None:
            rows = self._query(self.sql.traces, (session_id,))
        else:
            rows = self._query(self.sql.turn_traces, (session_id, turn_seq))
        return [trace_row(row) for row in rows]

    def trace(self, trace_id: int) -> TraceRow:
        """One trace row by id. Raises ``InputError`` when there is none."""
        rows = self._query(self.sql.trace, (trace_id,)) if trace_id in BIGINT else []
        if not rows:
            raise InputError(f"no trace row {trace_id}")
        return trace_row(rows[0])


class TurnLocksBase(Backend[C]):
    """The turn lock (``TurnLocks``)."""

    def acquire_turn(
        self,
        session_id: str,
        *,
        turn_id: str,
        holder: str,
        ttl_s: float,
        take_over: bool = False,
    ) -> TurnLease:
        """Take or renew the session's turn lock for ``ttl_s`` seconds.

        The session row is locked first, as an append locks it, so a lease and a user's
        append (``unless_turn``) are decided one after the other, on any replica.

        With ``take_over``, a lease that another turn of the same ``holder`` still holds is
        taken over at once: a holder runs one turn of a session at a time, so its other turn
        is one it abandoned (a crashed agent restarted: docs/server.md, The turn lock).

        Raises:
            SessionNotFound: no such session.
            TurnInFlight: another turn holds a lease that has not expired (of another holder,
                or of any holder without ``take_over``).
        """
        check_text("turn id", turn_id)
        check_text("turn holder", holder)

        def tx(conn: C) -> TurnLease:
            if conn.execute(self.sql.lock_head, (session_id,)).fetchone() is None:
                raise SessionNotFound(session_id)
            held = self._live_lease(conn, session_id)
            if (
                held is not None
                and held.turn_id != turn_id
                and not (take_over and held.holder == holder)
            ):
                raise TurnInFlight(session_id, held.turn_id, held.expires_at)
            expires = normalize_timestamp(datetime.now(UTC) + timedelta(seconds=ttl_s))
            conn.execute(self.sql.take_lease, (session_id, turn_id, holder, expires))
            return TurnLease(session_id, turn_id, holder, expires)

        return self._write("acquire_turn", tx)

    def current_turn(self, session_id: str) -> TurnLease | None:
        """The lease in force for the session, or ``None`` when no agent turn is in flight."""
        return self._read(lambda tx: self._live_lease(tx, session_id))

    def release_turn(self, session_id: str, turn_id: str) -> None:
        """Give the turn lock back; a no-op when ``turn_id`` does not hold it."""
        self._write(
            "release_turn", lambda tx: tx.execute(self.sql.release_lease, (session_id, turn_id))
        )


class StoreBase(EventLogBase[C], TraceLogBase[C], TurnLocksBase[C], ArchiveBase[C]):
    """Every role of the ``LogStore`` contract, over a :class:`Backend`; a context manager
    that closes the store on exit."""

    def snapshot(self, session_ids: Sequence[str]) -> SessionsSnapshot:
        """The reads of a page of sessions (at most ``SNAPSHOT_SESSIONS``) from one snapshot,
        six statements in all (``LogStore.snapshot``, ``_snapshot.py``).

        Raises:
            StoreError: the rows cannot be read.
        """
        return SessionsSnapshot(self, session_ids)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _redacted(redactor: Redactor, events: Sequence[NewEvent], checked: bool) -> Sequence[NewEvent]:
    """``events`` redacted, unless the caller ``checked`` that redaction changes none."""
    return events if checked else redactor.events(events)
