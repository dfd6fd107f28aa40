"""The store, written once: every role of the contract over the small part each backend owns.

Each role of :mod:`agenttrail.log.store` (:class:`EventLog`, :class:`TraceLog`,
:class:`TurnLocks`, :class:`Archive`) has one implementation here, a mixin of
:class:`StoreBase`, so the two backends cannot drift apart: a check one of them skipped, or a
statement one of them wrote differently, is not possible any more. What a backend module
adds is :class:`Backend`, the part that is locking or dialect:

- how a transaction is opened (:meth:`Backend._write`, :meth:`Backend._read`): SQLite takes
  its write lock with ``BEGIN IMMEDIATE`` under a mutex; PostgreSQL takes a pooled
  connection, pipelines the statements and retries a serialization failure or a deadlock;
- how the session row is locked and the seq allocated (:meth:`Backend._lock_head`), the two
  strategies ``docs/log-format.md`` documents, and how the head is then moved;
- how rows are inserted in bulk, how retention removes a session (SQLite deletes under its
  triggers; PostgreSQL calls a SECURITY DEFINER function), and LISTEN/NOTIFY;
- the statements, from :func:`agenttrail.log.store._sql.statements` for its dialect.

Driver errors are translated by the backend, at the edge of :meth:`Backend._write` and
:meth:`Backend._read`: the code here sees agenttrail's errors only.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from datetime import UTC, datetime, timedelta
from typing import Any, ClassVar, Generic, NamedTuple, Self, TypeVar

from agenttrail.codec import json_line, normalize_timestamp, now_timestamp
from agenttrail.errors import (
    ChainBroken,
    InputError,
    SessionExists,
    SessionNotFound,
    TurnInFlight,
)
from agenttrail.log.chain import GENESIS_HASH, chain_hasher
from agenttrail.log.redact import Redactor
from agenttrail.log.store import (
    Appended,
    AppendListener,
    ChainPage,
    Row,
    Tombstone,
    TraceBuilder,
    Traced,
    TurnLease,
)
from agenttrail.log.store._rules import (
    TRACE_FIELDS,
    Encoded,
    as_new_session,
    chain_events,
    check_created_at,
    check_new_session,
    check_session,
    check_session_fields,
    check_text,
    check_trace,
    encode_events,
    session_from_row,
    stored_head,
    stored_trace,
    trace_row,
    with_id,
)
from agenttrail.log.store._sql import Statements, Tx
from agenttrail.model import Event, NewEvent, NewSession, NewTrace, Session, TraceRow

__all__ = ["CHAIN_PAGE_ROWS", "READ_PAGE_ROWS", "Backend", "LockedHead", "StoreBase"]

READ_PAGE_ROWS = 1000
"""Rows fetched per query when streaming a session; keyset pages keep memory flat on large
sessions and let appends interleave between pages. Also the rows per insert of a copy."""

CHAIN_PAGE_ROWS = 512
"""Rows per page of a chain snapshot (``fetchmany``): about 550 KiB of 1 KiB events, hashed
while still in the CPU cache. With verify's read-ahead, pages of 64 to 1,024 rows were
measured and 512 was the fastest (bench/append.py)."""


C = TypeVar("C", bound=Tx)
"""The backend's connection type, which its own parts of a transaction receive."""

T = TypeVar("T")


class LockedHead(NamedTuple):
    """A session's head as an append found it, with the session's append lock held."""

    seq: int
    """``head_seq`` before the append."""
    hash: bytes
    """``head_hash`` before the append (``GENESIS_HASH`` for an empty session)."""
    stored: Mapping[str, Appended]
    """The append's idempotency keys that the session already has, each with its event."""


class Backend(ABC, Generic[C]):
    """The part of a store that is locking or dialect: what ``sqlite.py`` and ``postgres.py``
    implement. Everything else is :class:`StoreBase`'s."""

    url: str
    max_payload_bytes: int
    redactor: Redactor  # applied before anything is encoded: docs/redaction.md
    sql: ClassVar[Statements]
    """The shared statements in the backend's dialect."""

    @abstractmethod
    def _write(self, what: str, fn: Callable[[C], T]) -> T:
        """Run ``fn`` in one write transaction and return what it returns; roll back when it
        raises. ``what`` names the operation in messages (``append``, ``add_traces``)."""

    @abstractmethod
    def _read(self, fn: Callable[[Tx], T]) -> T:
        """Run ``fn`` on a connection for reading (each statement sees committed rows)."""

    @abstractmethod
    def _lock_head(
        self,
        tx: C,
        session_id: str,
        encoded: Sequence[Encoded],
        keys: Sequence[str],
        create: NewSession | None,
    ) -> LockedHead:
        """Take the session's append lock and read its head and its stored ``keys``,
        creating the session from ``create`` when it is missing.

        After this, the new events' seqs (``head + 1`` …) are the append's alone until the
        transaction ends, and :meth:`_set_head` moves the head past them.

        Raises:
            SessionNotFound: no such session and ``create`` is None.
            SessionExists: the id was removed by retention.
        """

    @abstractmethod
    def _set_head(self, tx: C, session_id: str, seq: int, digest: bytes) -> None:
        """Move the session's head to ``(seq, digest)``, the last row just inserted."""

    @abstractmethod
    def _cover_rows(self, tx: C, session_id: str, seq: int) -> None:
        """Let rows up to ``seq`` be inserted by a copy, before :meth:`_set_head` (the
        backends' guard triggers admit different orders: ``docs/log-format.md``)."""

    @abstractmethod
    def _insert_rows(self, tx: C, session_id: str, rows: Sequence[Row]) -> None:
        """Insert event rows, in seq order."""

    @abstractmethod
    def _insert_keys(self, tx: C, session_id: str, keys: Sequence[tuple[str, int]]) -> None:
        """Insert ``(key, seq)`` idempotency keys; a key already stored is left as it is."""

    @abstractmethod
    def _insert_session_row(self, tx: C, values: Sequence[Any]) -> None:
        """Run :attr:`Statements.insert_session` with ``values``.

        Raises:
            SessionExists: another transaction inserted the id first.
        """

    @abstractmethod
    def _remove(
        self, tx: C, session_id: str, deleted_at: str, reason: str
    ) -> tuple[Any, Any] | None:
        """Write the session's tombstone and remove its rows (retention's one sanctioned
        path); ``(head_seq, head_hash)`` it had, ``None`` when there is no such session."""

    @abstractmethod
    def _copy_tombstone(self, tx: C, stone: Tombstone) -> bool:
        """Insert a copied tombstone; False when it is already here.

        Raises:
            AppendOnlyViolation: a live session here has that id.
        """

    @abstractmethod
    def chain_pages(self, session_id: str) -> AbstractContextManager[Iterator[ChainPage]]:
        """Every event row of a session a page at a time, each with the head read together
        with it (``LogStore.chain_pages``)."""

    @abstractmethod
    def listen(self) -> AppendListener | None:
        """A listener that wakes on appends by any process, or ``None`` (``LogStore.listen``)."""

    @abstractmethod
    def close(self) -> None:
        """Release the store's connections; further calls fail."""

    # -- what the roles share ---------------------------------------------------------------

    def _query(self, query: str, params: Sequence[Any] = ()) -> list[Any]:
        return self._read(lambda tx: tx.execute(query, params).fetchall())

    def _insert_session(self, tx: C, new: NewSession, *, created_at: str | None = None) -> str:
        """Insert a session row; its id (drawn when ``new.id`` is None).

        Raises:
            InputError: the id or a text field would not be stored as given.
            SessionExists: the id is taken, or was removed by retention.
        """
        session_id = check_new_session(new)
        if tx.execute(self.sql.session_taken, (session_id, session_id)).fetchone():
            raise SessionExists(session_id)
        metadata = json_line(new.metadata)
        fields = (new.title, new.agent, new.user, new.workspace, new.started, metadata)
        self._insert_session_row(tx, (session_id, *fields, created_at or now_timestamp()))
        return session_id

    def _live_lease(self, tx: Tx, session_id: str) -> TurnLease | None:
        row = tx.execute(self.sql.live_lease, (session_id, now_timestamp())).fetchone()
        return TurnLease(session_id, row[0], row[1], row[2]) if row else None

    def _append(
        self,
        conn: C,
        session_id: str,
        encoded: Sequence[Encoded],
        create: NewSession | None,
        unless_turn: bool,
    ) -> list[Appended]:
        """The body of an append, inside the transaction the caller opened."""
        keys = sorted({key for _, _, key in encoded if key is not None})
        head = self._lock_head(conn, session_id, encoded, keys, create)
        if unless_turn:
            lease = self._live_lease(conn, session_id)
            if lease is not None:
                raise TurnInFlight(session_id, lease.turn_id, lease.expires_at)
        plan = chain_events(
            session_id,
            encoded,
            head_seq=head.seq,
            head_hash=head.hash,
            stored=head.stored,
            now=now_timestamp(),
        )
        if plan.rows:
            self._insert_rows(conn, session_id, plan.rows)
            if plan.keys:
                self._insert_keys(conn, session_id, plan.keys)
            self._set_head(conn, session_id, plan.head_seq, plan.head_hash)
        return plan.results

    def _insert_traces(self, conn: C, rows: Iterable[NewTrace]) -> list[TraceRow]:
        """Insert trace rows (checked by the caller); those whose result already has one are
        skipped. Returns the rows written, with their ids."""
        written: list[TraceRow] = []
        for row in rows:
            values = [getattr(row, name) for name in TRACE_FIELDS]
            got = conn.execute(self.sql.insert_trace, values).fetchone()
            if got is not None:
                written.append(stored_trace(row, int(got[0])))
        return written

    def _events_in(self, conn: C, session_id: str) -> list[Event]:
        """Every event of a session as the transaction on ``conn`` sees it (its own rows too)."""

        def page(query: str, params: Sequence[Any]) -> list[Any]:
            return conn.execute(query, params).fetchall()

        rows = self._rows(page, session_id, 0, None)
        return [Event(session_id, s, at, bytes(d), bytes(h)) for s, at, d, h in rows]

    def _rows(
        self,
        query: Callable[[str, Sequence[Any]], list[Any]],
        session_id: str,
        after_seq: int,
        limit: int | None,
    ) -> Iterator[Row]:
        """A session's rows after ``after_seq`` (at most ``limit``), a keyset page per
        ``query`` call: :meth:`_query`, or statements on an open transaction."""
        remaining = limit
        while remaining is None or remaining > 0:
            size = READ_PAGE_ROWS if remaining is None else min(READ_PAGE_ROWS, remaining)
            rows: list[Row] = query(self.sql.read_page, (session_id, after_seq, size))
            yield from rows
            if len(rows) < size:
                return
            after_seq = rows[-1][0]
            if remaining is not None:
                remaining -= len(rows)


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
    ) -> list[Appended]:
        """Append events to a session in one transaction: all are written or none.

        Args:
            session_id: the session; created from ``create`` (whose id is ignored) when it
                does not exist and ``create`` is given.
            events: payloads with optional ``created_at`` and idempotency ``key``.
            unless_turn: refuse (``TurnInFlight``) while an agent turn holds the session's
                turn lock, checked under the session's append lock (a user's own tool call).

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
        encoded = encode_events(self.redactor.events(events), self.max_payload_bytes)
        create = check_session_fields(self.redactor.session(create))
        return self._write(
            "append", lambda conn: self._append(conn, session_id, encoded, create, unless_turn)
        )

    def read(
        self, session_id: str, *, after_seq: int = 0, limit: int | None = None
    ) -> Iterator[Event]:
        """Events of a session with seq > ``after_seq``, in seq order, at most ``limit``.

        Streams in keyset pages of :data:`READ_PAGE_ROWS`; an empty or unknown session
        yields nothing (use ``get_session`` to tell them apart).
        """
        for seq, created_at, data, digest in self._rows(self._query, session_id, after_seq, limit):
            yield Event(session_id, seq, created_at, data, digest)

    def read_rows(self, session_id: str) -> Iterator[Row]:
        """``(seq, created_at, payload, hash)`` of every row in seq order, undecoded."""
        return self._rows(self._query, session_id, 0, None)

    def event_keys(self, session_id: str) -> list[tuple[str, int]]:
        """``(key, seq)`` of every idempotency key of a session, in seq order."""
        return [(key, seq) for key, seq in self._query(self.sql.event_keys, (session_id,))]


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
    ) -> Traced:
        """Append events and the trace rows ``traces`` builds from the seqs they get, in one
        transaction: both are written or neither (see :meth:`TraceLog.append_traced`; the
        builder runs again when the transaction is retried).

        Raises:
            InputError: a trace row's text field would not be stored as given (nothing
                written, not the events either); and what :meth:`append_batch` raises.
        """
        encoded = encode_events(self.redactor.events(events), self.max_payload_bytes)
        create = check_session_fields(self.redactor.session(create))

        def tx(conn: C) -> Traced:
            appended = self._append(conn, session_id, encoded, create, False)
            rows = list(traces(appended, lambda: self._events_in(conn, session_id)))
            for row in rows:
                check_trace(row)
            return Traced(appended, self._insert_traces(conn, rows))

        return self._write("append_traced", tx)

    def traces(self, session_id: str, *, turn_seq: int | None = None) -> list[TraceRow]:
        """A session's trace rows in result order, or only those of the turn at ``turn_seq``."""
        if turn_seq is None:
            rows = self._query(self.sql.traces, (session_id,))
        else:
            rows = self._query(self.sql.turn_traces, (session_id, turn_seq))
        return [trace_row(row) for row in rows]

    def trace(self, trace_id: int) -> TraceRow:
        """One trace row by id. Raises ``InputError`` when there is none."""
        rows = self._query(self.sql.trace, (trace_id,))
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


class ArchiveBase(Backend[C]):
    """Removing and copying whole sessions (``Archive``)."""

    def remove_session(self, session_id: str, *, reason: str) -> Tombstone:
        """Remove a session, its events, keys and trace rows, leaving a tombstone.

        The tombstone is written first, in the same transaction: the database refuses these
        deletes for any session without one (schema triggers), so this is the only way.

        Raises:
            SessionNotFound: no such session.
        """
        check_text("retention reason", reason)
        deleted_at = now_timestamp()
        row = self._write(
            "remove_session", lambda tx: self._remove(tx, session_id, deleted_at, reason)
        )
        if row is None:
            raise SessionNotFound(session_id)
        return Tombstone(session_id, row[0], bytes(row[1]), deleted_at, reason)

    def tombstones(self) -> list[Tombstone]:
        """Every tombstone, oldest first."""
        rows = self._query(self.sql.tombstones)
        return [Tombstone(r[0], r[1], bytes(r[2]), r[3], r[4]) for r in rows]

    def copy_session(
        self, session: Session, rows: Iterable[Row], *, keys: Sequence[tuple[str, int]] = ()
    ) -> int:
        """Write a session copied from another log, in one transaction (see
        :meth:`agenttrail.log.store.Archive.copy_session`)."""
        check_session(session)
        for key, _ in keys:
            check_text("idempotency key", key)

        def tx(conn: C) -> int:
            head = conn.execute(self.sql.lock_head, (session.id,)).fetchone()
            if head is None:
                self._insert_session(conn, as_new_session(session), created_at=session.created_at)
                head = (0, GENESIS_HASH)
            seq, prev = stored_head(session.id, *head)
            hash_row = chain_hasher(session.id)
            written = 0
            batch: list[Row] = []
            for row_seq, created_at, data, digest in rows:
                if row_seq <= seq:
                    continue
                check_created_at(created_at)
                if row_seq != seq + 1 or hash_row(prev, row_seq, created_at, data) != digest:
                    raise ChainBroken(session.id, row_seq, "the copied row does not chain")
                seq, prev = row_seq, digest
                batch.append((row_seq, created_at, data, digest))
                written += 1
                if len(batch) >= READ_PAGE_ROWS:
                    self._copy_rows(conn, session.id, batch)
            self._copy_rows(conn, session.id, batch)
            if written:
                self._set_head(conn, session.id, seq, prev)
            if keys:
                self._insert_keys(conn, session.id, [(k, n) for k, n in keys if n <= seq])
            return written

        return self._write("copy_session", tx)

    def _copy_rows(self, tx: C, session_id: str, batch: list[Row]) -> None:
        """Insert a batch of copied rows and empty it."""
        if batch:
            self._cover_rows(tx, session_id, batch[-1][0])
            self._insert_rows(tx, session_id, batch)
            batch.clear()

    def copy_tombstone(self, stone: Tombstone) -> bool:
        """Keep a tombstone copied from another log; False when it is already here.

        Raises:
            AppendOnlyViolation: a live session here has that id.
        """
        return self._write("copy_tombstone", lambda tx: self._copy_tombstone(tx, stone))

    def event_session_ids(self) -> set[str]:
        """Every session id that has at least one event row."""
        return {row[0] for row in self._query(self.sql.event_session_ids)}


class StoreBase(EventLogBase[C], TraceLogBase[C], TurnLocksBase[C], ArchiveBase[C]):
    """Every role of the ``LogStore`` contract, over a :class:`Backend`; a context manager
    that closes the store on exit."""

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
