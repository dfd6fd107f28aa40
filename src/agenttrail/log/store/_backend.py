"""The part of a store that is locking or dialect (:class:`Backend`), and the transaction
bodies every role shares over it (an append, trace-row inserts, paged reads).

The roles themselves are written once in ``_base.py`` as mixins over this class. What a
backend module adds is the abstract part of :class:`Backend`:

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
from typing import Any, ClassVar, Generic, NamedTuple, TypeVar

from agenttrail.codec import json_line, now_timestamp
from agenttrail.errors import (
    SessionExists,
    TurnInFlight,
)
from agenttrail.log.chain import GENESIS_HASH
from agenttrail.log.digests import (
    key_hash,
    key_hasher,
    log_row_hash,
    session_genesis,
    stored_digest,
    trace_hash,
)
from agenttrail.log.redact import Redactor
from agenttrail.log.store import (
    Appended,
    AppendListener,
    ChainPage,
    Row,
    Tombstone,
    TraceChain,
    TurnLease,
)
from agenttrail.log.store._rules import (
    TRACE_FIELDS,
    Encoded,
    chain_events,
    check_chain_version,
    check_new_session,
    event_of,
    stored_trace,
)
from agenttrail.log.store._sql import Statements, Tx
from agenttrail.model import Event, NewSession, NewTrace, TraceRow

__all__ = [
    "CHAIN_PAGE_ROWS",
    "READ_PAGE_ROWS",
    "Backend",
    "LockedHead",
    "chain_log_row",
    "chain_rows_written_before",
]

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
    version: int
    """The session's chain version (1 or 2: docs/log-format.md, Chain v2)."""
    created: bool = False
    """The append created the session (in its transaction): it has no idempotency keys yet."""


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
    def _savepoint(self, tx: C) -> AbstractContextManager[None]:
        """A savepoint in the open transaction: released when the block ends, rolled back to
        (then re-raised) when it raises, the rest of the transaction kept."""

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
    def _insert_keys(self, tx: C, session_id: str, keys: Sequence[tuple[str, int, bytes]]) -> None:
        """Insert ``(key, seq, hash)`` idempotency keys (:meth:`_chain_keys` chains them); a
        key already stored is left as it is."""

    @abstractmethod
    def _chain_log_row(self, tx: C, table: str, values: Sequence[Any]) -> None:
        """Chain the row of ``table`` (tombstones, log_keys) just inserted, whose columns are
        ``values``, and move the table's head in ``log_heads`` (SQLite:
        :func:`chain_log_row`; PostgreSQL's trigger does it, as the owner)."""

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
    def _drop_rows(self, tx: C, session_id: str, seqs: Sequence[int] | None = None) -> None:
        """Delete a session's rows of the search index, or with ``seqs`` those events' rows
        only (an erasure: the index's copy of their text leaves with them; ``search.py``)."""

    @abstractmethod
    def _merge_index(self, tx: C) -> None:
        """Rewrite the search index so no deleted row's text stays in it (``search.py``)."""

    @abstractmethod
    def _scrub(self) -> None:
        """After an erasure committed: make the erased bytes leave the database's files
        where the backend can (SQLite: checkpoint and truncate the WAL; docs/log-format.md,
        Erasure)."""

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

    def trace_chain(self, session_id: str) -> TraceChain:
        """A session's trace head and its trace rows with their hashes, in the order written
        (``ChainReader.trace_chain``)."""

        def read(tx: Tx) -> TraceChain:
            head = tx.execute(self.sql.trace_head, (session_id,)).fetchone()
            rows = tx.execute(self.sql.trace_chain, (session_id,)).fetchall()
            if head is None:
                return TraceChain(1, 0, None, rows)
            last = None if head[2] is None else stored_digest(head[2])
            return TraceChain(head[0], head[1], last, rows)

        return self._read(read)

    def key_chain(self, session_id: str) -> TraceChain:
        """A session's key head and its idempotency keys ``(session_id, key, seq, hash)`` in
        chain order (``ChainReader.key_chain``); ``version`` is 2 when the session exists,
        ``rows_chained`` and ``hash`` its ``key_count`` and ``key_hash``."""

        def read(tx: Tx) -> TraceChain:
            head = tx.execute(self.sql.key_head_read, (session_id,)).fetchone()
            rows = tx.execute(self.sql.key_chain, (session_id,)).fetchall()
            if head is None:
                return TraceChain(1, 0, None, rows)
            return TraceChain(2, head[0], None if head[1] is None else stored_digest(head[1]), rows)

        return self._read(read)

    def log_chains(self) -> dict[str, TraceChain]:
        """The chains of the log's own rows, by table (tombstones, log_keys): each head and
        its rows with their hashes in the order written (``ChainReader.log_chains``); a head
        of no rows has no hash."""

        def read(tx: Tx) -> dict[str, TraceChain]:
            chains = {}
            for table, query in self.sql.log_chains.items():
                head = tx.execute(self.sql.log_head, (table,)).fetchone()
                count, last = head if head is not None else (0, None)
                last = None if last is None else stored_digest(last)
                last = None if count == 0 and last == GENESIS_HASH else last
                rows = tx.execute(query).fetchall()  # version 0: its head is missing
                chains[table] = TraceChain(0 if head is None else 2, count, last, rows)
            return chains

        return self._read(read)

    def _chain_keys(
        self, conn: C, session_id: str, keys: Sequence[tuple[str, int]], *, created: bool = False
    ) -> None:
        """Insert new ``(key, seq)`` idempotency keys of a session, chained after its key head
        in ``(seq, key)`` order, and move that head (docs/log-format.md, Idempotency keys).
        The caller holds the session's append lock and passes only keys it does not have;
        ``created``: the session was created in this transaction, so its key head is the
        empty one (no count, no hash) and is not read."""
        if not keys:
            return
        if created:
            count, prev = 0, GENESIS_HASH
        else:
            count, prev = conn.execute(self.sql.key_head, (session_id,)).fetchone()
            prev = GENESIS_HASH if prev is None else bytes(prev)
        hash_key = key_hasher(session_id)
        rows = []
        for key, seq in sorted(keys, key=lambda k: (k[1], k[0])):
            prev = hash_key(prev, key, seq)
            rows.append((key, seq, prev))
        self._insert_keys(conn, session_id, rows)
        conn.execute(self.sql.set_key_head, (count + len(rows), prev, session_id))

    def _query(self, query: str, params: Sequence[Any] = ()) -> list[Any]:
        return self._read(lambda tx: tx.execute(query, params).fetchall())

    def _insert_session(
        self, tx: C, new: NewSession, *, created_at: str | None = None
    ) -> tuple[int, bytes, int]:
        """Insert a session row (its id drawn when ``new.id`` is None); its head as
        ``head_version`` reads it: ``(0, genesis hash, chain version)``, so that an append
        that creates the session need not read it back.

        Raises:
            InputError: the id or a text field would not be stored as given.
            SessionExists: the id is taken, or was removed by retention.
        """
        session_id = check_new_session(new)
        if taken := tx.execute(self.sql.session_taken, (session_id, session_id)).fetchone():
            raise SessionExists(session_id, None if taken[0] is None else (taken[0], taken[1]))
        metadata = json_line(new.metadata)
        fields = (new.title, new.agent, new.user, new.workspace, new.started, metadata)
        version = check_chain_version(session_id, new.chain_version)
        start = session_genesis(session_id, fields) if version == 2 else GENESIS_HASH
        at = created_at or now_timestamp()
        self._insert_session_row(tx, (session_id, *fields, at, version, start))
        return 0, start, version

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
        keys = sorted({event.key for event in encoded if event.key is not None})
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
            version=head.version,
        )
        if plan.rows:
            self._insert_rows(conn, session_id, plan.rows)
            self._chain_keys(conn, session_id, plan.keys, created=head.created)
            self._set_head(conn, session_id, plan.head_seq, plan.head_hash)
        return plan.results

    def _insert_traces(self, conn: C, rows: Iterable[NewTrace]) -> list[TraceRow]:
        """Insert trace rows (checked by the caller); those whose result already has one are
        skipped. Returns the rows written, with their ids."""
        written: list[TraceRow] = []
        heads: dict[str, list[Any]] = {}  # session → [chain version, trace count, trace hash]
        for row in rows:
            values = [getattr(row, name) for name in TRACE_FIELDS]
            head = heads.get(row.session_id)
            if head is None:
                found = conn.execute(self.sql.lock_trace_head, (row.session_id,)).fetchone()
                head = heads[row.session_id] = list(found) if found else [1, 0, None]
            digest = trace_hash(head[2] or GENESIS_HASH, values) if head[0] == 2 else None
            got = conn.execute(self.sql.insert_trace, [*values, digest]).fetchone()
            if got is not None:
                written.append(stored_trace(row, int(got[0])))
                if digest is not None:
                    head[1], head[2] = head[1] + 1, digest
        for session_id, (version, count, last) in heads.items():
            if version == 2 and last is not None:
                conn.execute(self.sql.set_trace_head, (count, last, session_id))
        return written

    def _events_in(self, conn: C, session_id: str) -> list[Event]:
        """Every event of a session as the transaction on ``conn`` sees it (its own rows too)."""

        def page(query: str, params: Sequence[Any]) -> list[Any]:
            return conn.execute(query, params).fetchall()

        return [event_of(session_id, row) for row in self._rows(page, session_id, 0, None)]

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


def chain_log_row(tx: Tx, sql: Statements, table: str, values: Sequence[Any]) -> None:
    """Chain the row of ``table`` (tombstones, log_keys) whose columns are ``values`` (its
    key first) to the table's head in ``log_heads``, and move that head
    (:func:`agenttrail.log.digests.log_row_hash`)."""
    count, prev = tx.execute(sql.log_head, (table,)).fetchone()
    digest = log_row_hash(table, bytes(prev), values)
    column = "session_id" if table == "tombstones" else "name"
    tx.execute(
        f"UPDATE {table} SET hash = {sql.param} WHERE {column} = {sql.param}", (digest, values[0])
    )
    tx.execute(sql.set_log_head, (count + 1, digest, table))


def chain_rows_written_before(tx: Tx, sql: Statements) -> None:
    """Chain the rows stored before schema version 4: each session's idempotency keys in
    ``(seq, key)`` order, with each session's key head, and the tombstones and log keys in
    the order written, with their heads. Run once, by the upgrade to that version, in its
    transaction (the schema's triggers admit setting a NULL hash, once)."""
    for table, query in sql.log_chains.items():
        for *values, _ in tx.execute(query).fetchall():
            chain_log_row(tx, sql, table, values)
    p = sql.param
    update = f"UPDATE session_event_keys SET hash = {p} WHERE session_id = {p} AND key = {p}"
    unchained = "SELECT DISTINCT session_id FROM session_event_keys WHERE hash IS NULL"
    for (session_id,) in tx.execute(unchained).fetchall():
        prev, count = GENESIS_HASH, 0
        for _, key, seq, _ in tx.execute(sql.key_chain, (session_id,)).fetchall():
            prev, count = key_hash(prev, (session_id, key, seq)), count + 1
            tx.execute(update, (prev, session_id, key))
        tx.execute(sql.set_key_head, (count, prev, session_id))
