"""The shared backend: PostgreSQL, for several machines and several server replicas.

The same contract as :mod:`agenttrail.log.store.sqlite`, the same rows and the same bytes (a chain
hashes the same in both; ``agenttrail migrate`` copies between them). What differs is how the
append lock is taken and who may change what:

- **Seq allocation.** An append's first statement on the session row is
  ``UPDATE sessions SET head_seq = head_seq + n WHERE id = … RETURNING head_seq, head_hash``.
  It takes the row's lock and allocates seqs ``head_seq - n + 1 … head_seq`` in one step.
  A concurrent appender to the same session blocks on that row lock until the first commits
  or rolls back, and then — in READ COMMITTED — PostgreSQL re-evaluates the UPDATE against
  the newly committed row version, so it allocates the next seqs after the committed ones:
  no gap, no duplicate and no retry (https://www.postgresql.org/docs/15/transaction-iso.html
  #XACT-READ-COMMITTED, "it will wait for the first updating transaction to commit or roll
  back … the second updater can proceed with updating the originally found row").
  Because seqs of a session are allocated under its row lock and committed before the lock
  is released, seq order is commit order per session: a reader following ``afterSeq`` never
  passes a gap that fills in later. The chain hashes are computed in Python under the lock,
  then the rows are inserted and the head hash is set; a deferred trigger checks at commit
  that the head is the last event.
- **Privileges.** The tables belong to the role that first opens the log (it runs
  ``schema/postgres-0001.sql``). Every pooled connection then ``SET ROLE agenttrail_writer``,
  a role with no UPDATE, DELETE or TRUNCATE on events, keys, trace rows or tombstones;
  retention goes through the SECURITY DEFINER function ``agenttrail_remove_session``.
- **Replicas.** An append NOTIFYs ``agenttrail_appends`` with ``<schema>/<session id>`` at
  commit; :meth:`PostgresStore.listen` gives a server's live feed a LISTEN connection.

Driver errors are translated here and nowhere else (docs/architecture.md, Errors): the layers above
see :class:`~agenttrail.errors.StoreError` and its kin, never ``psycopg``.
"""

from __future__ import annotations

import contextlib
import logging
import random
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from importlib import resources
from typing import Any, TypeVar

import psycopg
import psycopg_pool
from psycopg import errors as pgerrors
from psycopg import sql

from agenttrail.codec import json_line, normalize_timestamp, now_timestamp
from agenttrail.errors import (
    AgentTrailError,
    AppendOnlyViolation,
    ChainBroken,
    InputError,
    SessionExists,
    SessionNotFound,
    StoreError,
    TurnInFlight,
)
from agenttrail.log.chain import chain_hasher
from agenttrail.log.store import Appended, ChainPage, Row, Tombstone, TurnLease
from agenttrail.log.store._base import (
    CHAIN_PAGE_ROWS,
    READ_PAGE_ROWS,
    TRACE_FIELDS,
    Encoded,
    StoreBase,
    as_new_session,
    chain_events,
    check_created_at,
    check_new_session,
    check_session,
    check_text,
    check_trace,
    encode_events,
    new_events,
    session_from_row,
    stored_head,
    stored_trace,
    trace_row,
    with_id,
)
from agenttrail.log.store._pg_connect import (
    CONNECT_TIMEOUT_S,
    NOTIFY_CHANNEL,
    Listener,
    PostgresURL,
    connect,
    connect_kwargs,
    first_line,
    parse_url,
)
from agenttrail.model import NewEvent, NewSession, NewTrace, Session, TraceRow

__all__ = [
    "NOTIFY_CHANNEL",
    "WRITER_ROLE",
    "PostgresStore",
    "PostgresURL",
    "parse_url",
]

logger = logging.getLogger(__name__)

SCHEMA_VERSION = 1

WRITER_ROLE = "agenttrail_writer"
"""The role the store's connections work as: no UPDATE/DELETE/TRUNCATE on the evidence."""

_CHAIN_PAGE = """
SELECT s.head_seq, s.head_hash, e.seq, e.created_at, e.payload, e.hash
FROM (VALUES (1)) AS one (x)
LEFT JOIN sessions s ON s.id = %(id)s
LEFT JOIN LATERAL (
    SELECT seq, created_at, payload, hash FROM session_events
    WHERE session_id = %(id)s AND seq > %(after)s ORDER BY seq LIMIT %(n)s
) e ON true
ORDER BY e.seq
"""
"""A page of a session's rows and the session head in one statement, so in one snapshot:
at least one row, whose event columns are NULL when there are no more events."""


POOL_MAX_SIZE = 8
"""Connections a store keeps at most. An append holds one for two round trips; eight serve
the server's worker threads and 4 × 4 concurrent appenders without queueing for long, and
several replicas fit PostgreSQL's default 100 connections."""

POOL_WAIT_S = 30.0
"""How long a call waits for a free pooled connection before failing (seconds)."""

MAX_ATTEMPTS = 5
"""Attempts of one transaction before a serialization failure or deadlock is an error.
Appends in READ COMMITTED never need a retry for their seq; these come from an outside
transaction holding locks in the other order, or a server configured for SERIALIZABLE."""

RETRY_BASE_S = 0.02
"""First back-off before a retry (seconds); doubled each attempt, with ±50 % jitter so that
two transactions that collided do not collide again in step."""

_RETRYABLE = (pgerrors.SerializationFailure, pgerrors.DeadlockDetected)

_SESSION_COLUMNS = (
    'id, title, agent, "user", workspace, started, metadata, created_at, head_seq, head_hash'
)
_TRACE_COLUMNS = ", ".join(TRACE_FIELDS)
_GENESIS = bytes(32)

T = TypeVar("T")
Conn = psycopg.Connection[Any]


# -- the store --------------------------------------------------------------------------------


class _KeysMoved(Exception):
    """An idempotency key of the batch was written by another transaction between the
    look-up and the seq allocation: the allocation counted it as new. Roll back, retry."""


class PostgresStore(StoreBase):
    """An agenttrail log in a PostgreSQL schema (``LogStore`` contract).

    Args:
        url: ``postgresql://user@host:port/dbname?schema=NAME`` (see :func:`parse_url`).
        create: when False, a schema without an agenttrail log is an error instead of being
            set up (read-only commands).
        max_payload_bytes: largest payload (bytes of CBOR) an append accepts.
        max_attempts: attempts of a transaction that meets a serialization failure or a
            deadlock (:data:`MAX_ATTEMPTS`).

    Raises:
        StoreError: the server cannot be reached, refuses the login, or the schema cannot be
            set up; the message names the host and database, never the password.
        InputError: the URL is malformed, or the schema holds other tables.
    """

    def __init__(
        self,
        url: str,
        *,
        create: bool = True,
        max_payload_bytes: int,
        max_attempts: int = MAX_ATTEMPTS,
    ) -> None:
        self._url = parse_url(url)
        self.url = self._url.redacted
        self.schema = self._url.schema
        self.max_payload_bytes = max_payload_bytes
        self.max_attempts = max_attempts
        self._create = create
        self._listeners: list[Listener] = []
        self._closed = False
        with self._connect() as conn:
            self._setup(conn)
        self._pool: psycopg_pool.ConnectionPool[Conn] = psycopg_pool.ConnectionPool(
            self._url.conninfo,
            kwargs=connect_kwargs(self._url, autocommit=True),
            min_size=1,
            max_size=POOL_MAX_SIZE,
            open=False,
            configure=self._configure,
            timeout=POOL_WAIT_S,
            name="agenttrail",
        )
        try:
            self._pool.open(wait=True, timeout=CONNECT_TIMEOUT_S * 2)
        except psycopg_pool.PoolTimeout as e:
            self._pool.close()
            raise StoreError(f"cannot open a connection pool to {self._url.where}") from e

    # -- connecting and the schema ----------------------------------------------------------

    def _connect(self, *, autocommit: bool = False) -> Conn:
        """A connection of its own (not pooled). Raises a one-line ``StoreError``."""
        return connect(self._url, autocommit=autocommit)

    def _setup(self, conn: Conn) -> None:
        with self._translate():
            version = self._version(conn)
            if version is None and not self._create:
                raise InputError(
                    f"no agenttrail log in schema {self.schema!r} of {self._url.where} "
                    "(import something first)"
                )
            if version is None or version < SCHEMA_VERSION:
                try:
                    self._migrate(conn)
                except pgerrors.InsufficientPrivilege as e:
                    raise StoreError(
                        f"{self._url.where}: {self._url.user!r} cannot set up the agenttrail "
                        f"schema {self.schema!r} ({first_line(e)}); open it once as the role "
                        "that is to own the tables (docs/log-format.md, Privileges)"
                    ) from e
            elif version > SCHEMA_VERSION:
                raise StoreError(
                    f"{self._url.where}, schema {self.schema!r}: schema version {version} is "
                    f"newer than this agenttrail ({SCHEMA_VERSION}); upgrade agenttrail"
                )
            conn.rollback()
            # Fail now, with a message, rather than in the pool's background thread.
            try:
                self._configure(conn)
            except pgerrors.InsufficientPrivilege as e:
                raise StoreError(
                    f"{self._url.where}: {self._url.user!r} may not SET ROLE {WRITER_ROLE} "
                    f"(GRANT {WRITER_ROLE} TO {self._url.user}; docs/log-format.md)"
                ) from e
            conn.rollback()

    def _version(self, conn: Conn) -> int | None:
        table = conn.execute(
            "SELECT to_regclass(format('%%I.agenttrail_schema', %s::text))", (self.schema,)
        ).fetchone()
        if table is None or table[0] is None:
            return None
        row = conn.execute(
            sql.SQL("SELECT max(version) FROM {}.agenttrail_schema").format(
                sql.Identifier(self.schema)
            )
        ).fetchone()
        return int(row[0]) if row and row[0] is not None else 0

    def _migrate(self, conn: Conn) -> None:
        schema = sql.Identifier(self.schema)
        # One migration per schema at a time; the others wait, then find it done.
        conn.execute(
            "SELECT pg_advisory_xact_lock(hashtext('agenttrail.log.migrate'), hashtext(%s))",
            (self.schema,),
        )
        current = self._version(conn)
        if current is None:
            tables = conn.execute(
                "SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
                "WHERE n.nspname = %s AND c.relkind IN ('r', 'p', 'v', 'm', 'f')",
                (self.schema,),
            ).fetchone()
            if tables and tables[0]:
                raise InputError(
                    f"schema {self.schema!r} of {self._url.where} holds tables but no "
                    "agenttrail log; name another with ?schema=NAME"
                )
            exists = conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (self.schema,))
            if exists.fetchone() is None:
                conn.execute(sql.SQL("CREATE SCHEMA {}").format(schema))
            current = 0
        conn.execute(sql.SQL("SET LOCAL search_path TO {}, pg_temp").format(schema))
        for step in range(current + 1, SCHEMA_VERSION + 1):
            script = resources.files("agenttrail.log.store").joinpath(
                f"schema/postgres-{step:04d}.sql"
            )
            conn.execute(script.read_text("utf-8"))
            conn.execute(
                "INSERT INTO agenttrail_schema (version, applied_at) VALUES (%s, %s)",
                (step, now_timestamp()),
            )
        conn.commit()
        logger.info("postgres: schema %s migrated to version %d", self.schema, SCHEMA_VERSION)

    def _configure(self, conn: Conn) -> None:
        """Every new pooled connection: the log's schema first, and the writer's rights."""
        conn.execute(sql.SQL("SET search_path TO {}, pg_temp").format(sql.Identifier(self.schema)))
        conn.execute(sql.SQL("SET ROLE {}").format(sql.Identifier(WRITER_ROLE)))
        if not conn.autocommit:
            conn.commit()

    # -- running statements -----------------------------------------------------------------

    @contextmanager
    def _translate(self) -> Iterator[None]:
        try:
            yield
        except psycopg.Error as e:
            raise self._error(e) from e

    def _error(self, e: psycopg.Error) -> AgentTrailError:
        """The agenttrail error for a driver error (docs/architecture.md, Errors); the caller chains
        it."""
        where = f"{self._url.where}, schema {self.schema!r}"
        text = first_line(e)
        if isinstance(e, psycopg_pool.PoolTimeout):
            return StoreError(f"{where}: no connection free within {POOL_WAIT_S:g} s")
        if isinstance(e, pgerrors.InsufficientPrivilege) and "for table" in text:
            return AppendOnlyViolation(f"{where}: {text} (the application role {WRITER_ROLE})")
        if "append-only" in text or "head only moves forward" in text or "permanent" in text:
            return AppendOnlyViolation(f"{where}: {text}")
        if isinstance(e, psycopg.DataError):  # text PostgreSQL cannot hold, a number too big
            return InputError(f"{where}: {text}")
        return StoreError(f"{where}: {text}")

    @contextmanager
    def _connection(self) -> Iterator[Conn]:
        if self._closed:
            raise StoreError(f"{self.url}: the store is closed")
        with self._translate(), self._pool.connection() as conn:
            yield conn

    def _run(self, what: str, fn: Callable[[Conn], T]) -> T:
        """Run ``fn`` in one transaction; retry it on a serialization failure or deadlock
        (at most :attr:`max_attempts` times, with jittered exponential back-off).

        Raises:
            StoreError: still failing after the last attempt, or any other database error.
        """
        attempt = 0
        while True:
            attempt += 1
            try:
                # Pipeline mode: statements whose results are not read go out together, so an
                # append costs two round trips (BEGIN + the seq-allocating UPDATE, then the
                # inserts, the head hash and COMMIT), not five.
                with (
                    self._translate(),
                    self._pool.connection() as conn,
                    conn.pipeline(),
                    conn.transaction(),
                ):
                    return fn(conn)
            except StoreError as e:
                cause = e.__cause__
                if not isinstance(cause, _RETRYABLE):
                    raise
                failure: BaseException = cause
            except _KeysMoved as e:
                failure = e
            if attempt >= self.max_attempts:
                raise StoreError(
                    f"{self._url.where}, schema {self.schema!r}: {what} gave up after "
                    f"{attempt} attempts: {first_line(failure)}"
                ) from failure
            logger.warning(
                "postgres: %s retried (attempt %d of %d): %s",
                what,
                attempt,
                self.max_attempts,
                first_line(failure),
            )
            time.sleep(RETRY_BASE_S * 2 ** (attempt - 1) * (0.5 + random.random()))

    def _query(self, query: str, params: Sequence[Any] = (), *, binary: bool = False) -> list[Any]:
        with self._connection() as conn:
            return conn.cursor(binary=binary).execute(query, params).fetchall()

    # -- sessions ---------------------------------------------------------------------------

    def create_session(self, new: NewSession) -> Session:
        """Create a session row. Raises ``SessionExists`` when the id is taken."""
        session_id = check_new_session(new)

        def tx(conn: Conn) -> None:
            self._insert_session(conn, with_id(new, session_id))

        self._run("create_session", tx)
        return self.get_session(session_id)

    def _insert_session(
        self, conn: Conn, new: NewSession, *, created_at: str | None = None
    ) -> None:
        assert new.id is not None
        if conn.execute(
            "SELECT 1 FROM sessions WHERE id = %s UNION ALL "
            "SELECT 1 FROM tombstones WHERE session_id = %s",
            (new.id, new.id),
        ).fetchone():
            raise SessionExists(new.id)
        try:
            with conn.transaction():  # a savepoint: a lost race leaves the rest intact
                conn.execute(
                    'INSERT INTO sessions (id, title, agent, "user", workspace, started, '
                    "metadata, created_at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
                    (
                        new.id,
                        new.title,
                        new.agent,
                        new.user,
                        new.workspace,
                        new.started,
                        json_line(new.metadata),
                        created_at or now_timestamp(),
                    ),
                )
        except pgerrors.UniqueViolation:
            raise SessionExists(new.id) from None

    def get_session(self, session_id: str) -> Session:
        """The session row. Raises ``SessionNotFound``."""
        rows = self._query(f"SELECT {_SESSION_COLUMNS} FROM sessions WHERE id = %s", (session_id,))
        if not rows:
            raise SessionNotFound(session_id)
        return session_from_row(rows[0])

    def sessions(self) -> list[Session]:
        """Every session, in the order they were created."""
        rows = self._query(f"SELECT {_SESSION_COLUMNS} FROM sessions ORDER BY created_at, pos")
        return [session_from_row(row) for row in rows]

    def head(self, session_id: str) -> tuple[int, bytes] | None:
        """``(head_seq, head_hash)`` of the session row, or ``None`` if there is no row."""
        rows = self._query("SELECT head_seq, head_hash FROM sessions WHERE id = %s", (session_id,))
        return stored_head(session_id, rows[0][0], bytes(rows[0][1])) if rows else None

    def event_session_ids(self) -> set[str]:
        """Every session id that has at least one event row."""
        return {row[0] for row in self._query("SELECT DISTINCT session_id FROM session_events")}

    # -- appends ----------------------------------------------------------------------------

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
                turn lock, checked under the session's row lock (a user's own tool call).

        Returns:
            One :class:`Appended` per event, in order. An event whose key is already in the
            session (or earlier in the batch) is not written and gets the first seq back.

        Raises:
            PayloadError: a payload would not round-trip (nothing written).
            PayloadTooLarge: a payload is above ``max_payload_bytes`` (nothing written).
            SessionNotFound: the session does not exist and ``create`` is None.
            TurnInFlight: ``unless_turn`` and an agent turn is in flight (nothing written).
            StoreError: the database failed (after bounded retries for conflicts).
        """
        encoded = encode_events(events, self.max_payload_bytes)  # before any lock
        if create is not None:
            check_new_session(with_id(create, session_id))
        keys = sorted({key for _, _, key in encoded if key is not None})

        def tx(conn: Conn) -> list[Appended]:
            return self._append_tx(conn, session_id, encoded, keys, create, unless_turn)

        return self._run("append", tx)

    def _append_tx(
        self,
        conn: Conn,
        session_id: str,
        encoded: list[Encoded],
        keys: list[str],
        create: NewSession | None,
        unless_turn: bool,
    ) -> list[Appended]:
        stored = self._keyed(conn, session_id, keys) if keys else {}
        count = new_events(encoded, stored)
        # The seq allocation. This one statement takes the session row's lock and moves the
        # head past the seqs it allocates. A concurrent appender waits for the lock, then in
        # READ COMMITTED updates the row as the first one committed it, so it allocates the
        # seqs after those: gapless, no duplicates, no retry, and seq order is commit order
        # for each session, which afterSeq resume relies on. The lock is held to COMMIT.
        # https://www.postgresql.org/docs/15/transaction-iso.html#XACT-READ-COMMITTED
        bump = (
            "UPDATE sessions SET head_seq = head_seq + %s WHERE id = %s "
            "RETURNING head_seq, head_hash"
        )
        row = conn.execute(bump, (count, session_id)).fetchone()
        if row is None:
            if create is None:
                raise SessionNotFound(session_id)
            # Another appender may have created it meanwhile (or it was removed: raised below).
            with contextlib.suppress(SessionExists):
                self._insert_session(conn, with_id(create, session_id))
            row = conn.execute(bump, (count, session_id)).fetchone()
            if row is None:
                raise SessionExists(session_id)
        if unless_turn:
            lease = self._live_lease(conn, session_id)
            if lease is not None:
                raise TurnInFlight(session_id, lease.turn_id, lease.expires_at)
        if keys and self._keyed(conn, session_id, keys).keys() != stored.keys():
            raise _KeysMoved(session_id)
        plan = chain_events(
            session_id,
            encoded,
            head_seq=row[0] - count,
            head_hash=bytes(row[1]),
            stored=stored,
            now=now_timestamp(),
        )
        if plan.rows:
            self._insert_rows(conn, session_id, plan.rows)
            if plan.keys:
                self._insert_keys(conn, session_id, plan.keys)
            conn.execute(
                "UPDATE sessions SET head_hash = %s WHERE id = %s", (plan.head_hash, session_id)
            )
        return plan.results

    def _insert_rows(self, conn: Conn, session_id: str, rows: Sequence[Row]) -> None:
        # One statement for the batch (the guard trigger checks its seqs once), its arrays
        # sent in binary: text-format bytea arrays cost more to escape than to insert.
        conn.execute(
            "INSERT INTO session_events (session_id, seq, created_at, payload, hash) "
            "SELECT %s, * FROM unnest(%b::bigint[], %b::text[], %b::bytea[], %b::bytea[])",
            (
                session_id,
                [r[0] for r in rows],
                [r[1] for r in rows],
                [r[2] for r in rows],
                [r[3] for r in rows],
            ),
        )

    def _insert_keys(self, conn: Conn, session_id: str, keys: Sequence[tuple[str, int]]) -> None:
        conn.execute(
            "INSERT INTO session_event_keys (session_id, key, seq) "
            "SELECT %s, * FROM unnest(%s::text[], %s::bigint[]) ON CONFLICT DO NOTHING",
            (session_id, [k for k, _ in keys], [n for _, n in keys]),
        )

    def _keyed(self, conn: Conn, session_id: str, keys: list[str]) -> dict[str, Appended]:
        rows = conn.execute(
            "SELECT k.key, k.seq, e.hash FROM session_event_keys k JOIN session_events e "
            "ON e.session_id = k.session_id AND e.seq = k.seq "
            "WHERE k.session_id = %s AND k.key = ANY(%s)",
            (session_id, keys),
        ).fetchall()
        return {key: Appended(seq, bytes(digest), duplicate=True) for key, seq, digest in rows}

    # -- reads ------------------------------------------------------------------------------

    @contextmanager
    def chain_pages(self, session_id: str) -> Iterator[Iterator[ChainPage]]:
        """A session's rows a page at a time, each read with the head in one statement
        (``LogStore`` contract): one round trip per page, and one for a short session."""
        with self._connection() as conn:
            yield self._chain_pages(conn, session_id)

    def _chain_pages(self, conn: Conn, session_id: str) -> Iterator[ChainPage]:
        after = 0
        while True:
            result = (
                conn.cursor(binary=True)
                .execute(_CHAIN_PAGE, {"id": session_id, "after": after, "n": CHAIN_PAGE_ROWS})
                .fetchall()
            )
            head_seq, head_hash = result[0][:2]  # the same on every row of a statement
            head = None if head_seq is None else stored_head(session_id, head_seq, head_hash)
            page: list[Row] = [row[2:] for row in result if row[2] is not None]
            yield ChainPage(head, page)
            if len(page) < CHAIN_PAGE_ROWS:
                return
            after = page[-1][0]

    def _read_page(self, session_id: str, after_seq: int, limit: int) -> list[Row]:
        return self._query(
            "SELECT seq, created_at, payload, hash FROM session_events "
            "WHERE session_id = %s AND seq > %s ORDER BY seq LIMIT %s",
            (session_id, after_seq, limit),
            binary=True,
        )

    def event_keys(self, session_id: str) -> list[tuple[str, int]]:
        """``(key, seq)`` of every idempotency key of a session, in seq order."""
        rows = self._query(
            "SELECT key, seq FROM session_event_keys WHERE session_id = %s ORDER BY seq, key",
            (session_id,),
        )
        return [(key, seq) for key, seq in rows]

    # -- copies (agenttrail migrate) ----------------------------------------------------------

    def copy_session(
        self,
        session: Session,
        rows: Iterable[Row],
        *,
        keys: Sequence[tuple[str, int]] = (),
    ) -> int:
        """Write a session copied from another log, in one transaction (see
        :meth:`agenttrail.log.store.LogStore.copy_session`)."""
        check_session(session)
        for key, _ in keys:
            check_text("idempotency key", key)

        def tx(conn: Conn) -> int:
            head = conn.execute(
                "SELECT head_seq, head_hash FROM sessions WHERE id = %s FOR NO KEY UPDATE",
                (session.id,),
            ).fetchone()
            if head is None:
                self._insert_session(conn, as_new_session(session), created_at=session.created_at)
                head = (0, _GENESIS)
            seq, prev = int(head[0]), bytes(head[1])
            written = 0
            hash_row = chain_hasher(session.id)
            batch: list[Row] = []

            def flush() -> None:
                if batch:
                    conn.execute(
                        "UPDATE sessions SET head_seq = %s WHERE id = %s",
                        (batch[-1][0], session.id),
                    )
                    self._insert_rows(conn, session.id, batch)
                    batch.clear()

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
                    flush()
            flush()
            if written:
                conn.execute("UPDATE sessions SET head_hash = %s WHERE id = %s", (prev, session.id))
            if keys:
                self._insert_keys(conn, session.id, [(k, n) for k, n in keys if n <= seq])
            return written

        return self._run("copy_session", tx)

    def copy_tombstone(self, stone: Tombstone) -> bool:
        """Keep a tombstone copied from another log; False when it is already here.

        Raises:
            AppendOnlyViolation: a live session here has that id.
        """
        rows = self._run(
            "copy_tombstone",
            lambda conn: conn.execute(
                "SELECT agenttrail_copy_tombstone(%s, %s, %s, %s, %s)",
                (stone.session_id, stone.head_seq, stone.head_hash, stone.deleted_at, stone.reason),
            ).fetchone(),
        )
        return bool(rows and rows[0])

    # -- trace rows ---------------------------------------------------------------------------

    def add_traces(self, rows: Sequence[NewTrace]) -> list[TraceRow]:
        """Write trace rows in one transaction, skipping any already stored for its result."""
        for row in rows:
            check_trace(row)
        insert = (
            f"INSERT INTO trace_rows ({_TRACE_COLUMNS}) "
            f"VALUES ({', '.join(['%s'] * len(TRACE_FIELDS))}) "
            "ON CONFLICT (session_id, result_seq) DO NOTHING RETURNING id"
        )

        def tx(conn: Conn) -> list[TraceRow]:
            written: list[TraceRow] = []
            for row in rows:
                got = conn.execute(insert, [getattr(row, n) for n in TRACE_FIELDS]).fetchone()
                if got is not None:
                    written.append(stored_trace(row, int(got[0])))
            return written

        return self._run("add_traces", tx)

    def traces(self, session_id: str, *, turn_seq: int | None = None) -> list[TraceRow]:
        """A session's trace rows in result order, or only those of the turn at ``turn_seq``."""
        args: list[str | int] = [session_id]
        where = "session_id = %s"
        if turn_seq is not None:
            where, args = where + " AND turn_seq = %s", [session_id, turn_seq]
        rows = self._query(
            f"SELECT {_TRACE_COLUMNS}, id FROM trace_rows WHERE {where} ORDER BY result_seq",
            args,
            binary=True,
        )
        return [trace_row(row) for row in rows]

    def trace(self, trace_id: int) -> TraceRow:
        """One trace row by id. Raises ``InputError`` when there is none."""
        rows = self._query(
            f"SELECT {_TRACE_COLUMNS}, id FROM trace_rows WHERE id = %s", (trace_id,), binary=True
        )
        if not rows:
            raise InputError(f"no trace row {trace_id}")
        return trace_row(rows[0])

    # -- turn lock ----------------------------------------------------------------------------

    def acquire_turn(
        self, session_id: str, *, turn_id: str, holder: str, ttl_s: float
    ) -> TurnLease:
        """Take or renew the session's turn lock for ``ttl_s`` seconds.

        The session row is locked first, as an append locks it, so a lease and a user's
        append (``unless_turn``) are decided one after the other, on any replica.

        Raises:
            SessionNotFound: no such session.
            TurnInFlight: another turn holds a lease that has not expired.
        """
        check_text("turn id", turn_id)
        check_text("turn holder", holder)

        def tx(conn: Conn) -> TurnLease:
            if (
                conn.execute(
                    "SELECT 1 FROM sessions WHERE id = %s FOR NO KEY UPDATE", (session_id,)
                ).fetchone()
                is None
            ):
                raise SessionNotFound(session_id)
            held = self._live_lease(conn, session_id)
            if held is not None and held.turn_id != turn_id:
                raise TurnInFlight(session_id, held.turn_id, held.expires_at)
            expires = normalize_timestamp(datetime.now(UTC) + timedelta(seconds=ttl_s))
            conn.execute(
                "INSERT INTO turn_leases (session_id, turn_id, holder, expires_at) "
                "VALUES (%s, %s, %s, %s) ON CONFLICT (session_id) DO UPDATE SET "
                "turn_id = excluded.turn_id, holder = excluded.holder, "
                "expires_at = excluded.expires_at",
                (session_id, turn_id, holder, expires),
            )
            return TurnLease(session_id, turn_id, holder, expires)

        return self._run("acquire_turn", tx)

    def current_turn(self, session_id: str) -> TurnLease | None:
        """The lease in force for the session, or ``None`` when no agent turn is in flight."""
        with self._connection() as conn:
            return self._live_lease(conn, session_id)

    def release_turn(self, session_id: str, turn_id: str) -> None:
        """Give the turn lock back; a no-op when ``turn_id`` does not hold it."""
        self._run(
            "release_turn",
            lambda conn: conn.execute(
                "DELETE FROM turn_leases WHERE session_id = %s AND turn_id = %s",
                (session_id, turn_id),
            ),
        )

    def _live_lease(self, conn: Conn, session_id: str) -> TurnLease | None:
        row = conn.execute(
            "SELECT turn_id, holder, expires_at FROM turn_leases "
            "WHERE session_id = %s AND expires_at > %s",
            (session_id, now_timestamp()),
        ).fetchone()
        return TurnLease(session_id, row[0], row[1], row[2]) if row else None

    # -- retention ----------------------------------------------------------------------------

    def remove_session(self, session_id: str, *, reason: str) -> Tombstone:
        """Remove a session, its events, keys and trace rows, leaving a tombstone.

        Goes through ``agenttrail_remove_session`` (SECURITY DEFINER): the application role
        has no DELETE on the evidence, and the triggers refuse these deletes for a session
        without a tombstone, so this is the only way.

        Raises:
            SessionNotFound: no such session.
        """
        check_text("retention reason", reason)
        deleted_at = now_timestamp()
        row = self._run(
            "remove_session",
            lambda conn: conn.execute(
                "SELECT head_seq, head_hash FROM agenttrail_remove_session(%s, %s, %s)",
                (session_id, deleted_at, reason),
            ).fetchone(),
        )
        if row is None:
            raise SessionNotFound(session_id)
        return Tombstone(session_id, int(row[0]), bytes(row[1]), deleted_at, reason)

    def tombstones(self) -> list[Tombstone]:
        """Every tombstone, oldest first."""
        rows = self._query(
            "SELECT session_id, head_seq, head_hash, deleted_at, reason FROM tombstones "
            "ORDER BY deleted_at, pos"
        )
        return [Tombstone(r[0], r[1], bytes(r[2]), r[3], r[4]) for r in rows]

    # -- live ---------------------------------------------------------------------------------

    def listen(self) -> Listener:
        """A LISTEN connection that wakes on every append to this log (by any process)."""
        listener = Listener(self._url)
        self._listeners.append(listener)
        return listener

    # -- lifecycle --------------------------------------------------------------------------

    def close(self) -> None:
        """Close the pool and any listener; further calls fail."""
        if self._closed:
            return
        self._closed = True
        for listener in self._listeners:
            listener.close()
        self._pool.close()
