"""The store, written once: every role of the contract over the small part each backend owns.

Each role of :mod:`agenttrail.log.store` (:class:`EventLog`, :class:`TraceLog`,
:class:`TurnLocks`, :class:`Archive`) has one implementation here, a mixin of
:class:`StoreBase`, so the two backends cannot drift apart: a check one of them skipped, or a
statement one of them wrote differently, is not possible any more. What a backend module
adds is the locking and dialect of :class:`agenttrail.log.store._backend.Backend`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, Self

from agenttrail.codec import encode_payload, normalize_timestamp, now_timestamp
from agenttrail.errors import (
    AgentTrailError,
    ChainBroken,
    InputError,
    SessionNotFound,
    TurnInFlight,
)
from agenttrail.log.chain import chain_hasher
from agenttrail.log.digests import chain_hasher_v2, payload_digest
from agenttrail.log.store import (
    Appended,
    Erasure,
    Row,
    Tombstone,
    TraceBuilder,
    Traced,
    TurnLease,
)
from agenttrail.log.store._backend import READ_PAGE_ROWS, Backend, C
from agenttrail.log.store._rules import (
    ERASURE,
    Encoded,
    as_new_session,
    check_created_at,
    check_new_session,
    check_session,
    check_session_fields,
    check_text,
    check_trace,
    encode_events,
    event_of,
    session_from_row,
    stored_head,
    trace_row,
    with_id,
)
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
        for row in self._rows(self._query, session_id, after_seq, limit):
            yield event_of(session_id, row)

    def read_rows(self, session_id: str) -> Iterator[Row]:
        """``(seq, created_at, payload, hash, salt, digest)`` of every row in seq order,
        undecoded."""
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
        return self._write(
            "append_traced", lambda conn: self._traced(conn, session_id, encoded, create, traces)
        )

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
        self,
        session: Session,
        rows: Iterable[Row],
        *,
        keys: Sequence[tuple[str, int]] = (),
        erasures: Sequence[tuple[int, int]] = (),
    ) -> int:
        """Write a session copied from another log, in one transaction (see
        :meth:`agenttrail.log.store.Archive.copy_session`)."""
        check_session(session)
        for key, _ in keys:
            check_text("idempotency key", key)

        erased = dict(erasures)

        def tx(conn: C) -> int:
            head = conn.execute(self.sql.head_version, (session.id,)).fetchone()
            if head is None:
                self._insert_session(conn, as_new_session(session), created_at=session.created_at)
                head = conn.execute(self.sql.head_version, (session.id,)).fetchone()
            seq, prev = stored_head(session.id, head[0], head[1])
            chains = _RowCheck(session.id, head[2], erased)
            written = 0
            copied: list[int] = []
            batch: list[Row] = []
            for row in rows:
                row_seq = row[0]
                if row_seq <= seq:
                    continue
                check_created_at(row[1])
                if row_seq != seq + 1 or not chains.holds(prev, row):
                    raise ChainBroken(session.id, row_seq, "the copied row does not chain")
                seq, prev = row_seq, row[3]
                if row[4] is None and row_seq in erased:
                    copied.append(row_seq)
                batch.append(row)
                written += 1
                if len(batch) >= READ_PAGE_ROWS:
                    self._copy_rows(conn, session.id, batch)
            self._copy_rows(conn, session.id, batch)
            if written:
                self._set_head(conn, session.id, seq, prev)
            if keys:
                stored = conn.execute(self.sql.event_keys, (session.id,)).fetchall()
                have = {key for key, _ in stored}
                new = [(k, n) for k, n in keys if n <= seq and k not in have]
                self._chain_keys(conn, session.id, new)
            for n in copied:  # rows copied earlier keep what they had then
                conn.execute(self.sql.insert_erasure, (session.id, n, erased[n]))
            return written

        return self._write("copy_session", tx)

    def _copy_rows(self, tx: C, session_id: str, batch: list[Row]) -> None:
        """Insert a batch of copied rows and empty it."""
        if batch:
            self._cover_rows(tx, session_id, batch[-1][0])
            self._insert_rows(tx, session_id, batch)
            batch.clear()

    def erase(self, session_id: str, seqs: Sequence[int], *, by: str, reason: str) -> Erasure:
        """Remove the payload bytes and salt of events of a v2 session (``Archive.erase``).

        In one transaction: the ``erasure`` event ``{"type": "erasure", "seqs", "by",
        "reason"}`` is appended (chained like any event; its ``created_at`` says when), one
        erasures row per seq names it, and each row's payload becomes ``b""`` and its salt
        NULL, which the schema's trigger admits only for a row with an erasures row. Then
        the backend scrubs its files (:meth:`Backend._scrub`).

        Raises:
            SessionNotFound: no such session.
            InputError: nothing to erase, the session is v1, a seq is not an event of it, is
                already erased, is an erasure event, or has a trace row.
        """
        check_text("erasure author", by)
        check_text("erasure reason", reason)
        wanted = sorted(set(seqs))
        if not wanted:
            raise InputError("name at least one seq to erase")
        payload = {"type": ERASURE, "seqs": wanted, "by": by, "reason": reason}
        encoded = [Encoded(encode_payload(payload), None, None, None)]

        def tx(conn: C) -> Erasure:
            self._check_erasable(conn, session_id, wanted)
            appended = self._append(conn, session_id, encoded, None, False)[0]
            for seq in wanted:
                conn.execute(self.sql.insert_erasure, (session_id, seq, appended.seq))
                conn.execute(self.sql.erase_row, (b"", session_id, seq))
            return Erasure(session_id, wanted, appended.seq)

        done = self._write("erase", tx)
        self._scrub()
        return done

    def _check_erasable(self, conn: C, session_id: str, seqs: Sequence[int]) -> None:
        """Raise ``InputError`` (or ``SessionNotFound``) unless every seq can be erased."""
        head = conn.execute(self.sql.head_version, (session_id,)).fetchone()
        if head is None:
            raise SessionNotFound(session_id)
        if head[2] != 2:
            raise InputError(
                f"session {session_id} is chained as v1: its chain hashes the payload bytes, "
                "so they cannot be erased without breaking it (docs/log-format.md, Erasure)"
            )
        traced = {
            trace_row(row).result_seq
            for row in conn.execute(self.sql.traces, (session_id,)).fetchall()
        }
        for seq in seqs:
            row = next(iter(self._rows(_on(conn), session_id, seq - 1, 1)), None)
            if row is None or row[0] != seq:
                raise InputError(f"session {session_id} has no event at seq {seq}")
            if row[4] is None:
                raise InputError(f"session {session_id}: seq {seq} is already erased")
            if event_of(session_id, row).type == ERASURE:
                raise InputError(f"session {session_id}: seq {seq} is an erasure record")
            if seq in traced:
                raise InputError(
                    f"session {session_id}: seq {seq} has a trace row, which holds its "
                    "envelope; erasing it is not supported"
                )

    def erasures(self, session_id: str) -> list[tuple[int, int]]:
        """``(seq, erasure_seq)`` of every erased event of a session, in seq order."""
        return [(seq, by) for seq, by in self._query(self.sql.erasures, (session_id,))]

    def copy_tombstone(self, stone: Tombstone) -> bool:
        """Keep a tombstone copied from another log; False when it is already here.

        Raises:
            AppendOnlyViolation: a live session here has that id.
        """
        return self._write("copy_tombstone", lambda tx: self._copy_tombstone(tx, stone))

    def event_session_ids(self) -> set[str]:
        """Every session id that has at least one event row."""
        return {row[0] for row in self._query(self.sql.event_session_ids)}


class _RowCheck:
    """Whether a copied row continues its session's chain (v1 or v2), for ``copy_session``."""

    def __init__(self, session_id: str, version: int, erased: dict[int, int]) -> None:
        self.version = version
        self.erased = erased
        self.v1 = chain_hasher(session_id)
        self.v2 = chain_hasher_v2(session_id)

    def holds(self, prev: bytes, row: Row) -> bool:
        seq, created_at, data, stored, salt, digest = row
        if self.version == 1:
            v1_row = salt is None and digest is None
            return v1_row and self.v1(prev, seq, created_at, data) == stored
        if digest is None or len(digest) != 32:
            return False
        if salt is None:  # erased: only with its erasures row, and with nothing left
            if seq not in self.erased or data != b"":
                return False
        elif payload_digest(salt, data) != digest:
            return False
        return self.v2(prev, seq, created_at, digest) == stored


def _on(conn: Any) -> Any:
    """A ``_rows`` query function running on an open transaction."""
    return lambda query, params: conn.execute(query, params).fetchall()


class StoreBase(EventLogBase[C], TraceLogBase[C], TurnLocksBase[C], ArchiveBase[C]):
    """Every role of the ``LogStore`` contract, over a :class:`Backend`; a context manager
    that closes the store on exit."""

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
