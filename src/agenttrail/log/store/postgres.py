"""The shared backend: PostgreSQL, for several machines and several server replicas.

The same contract as :mod:`agenttrail.log.store.sqlite`, the same rows and the same bytes (a chain
hashes the same in both; ``agenttrail migrate`` copies between them), and the same code for
everything but the parts below (``_base.py``). What differs is how the append lock is taken
and who may change what:

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

Driver errors are translated here and nowhere else (docs/architecture.md, Errors), by class
and SQLSTATE (:func:`postgres_error`): the layers above see
:class:`~agenttrail.errors.StoreError` and its kin, never ``psycopg``.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from importlib import resources
from typing import Any, TypeVar

import psycopg
import psycopg_pool
from psycopg import errors as pgerrors
from psycopg import sql

from agenttrail.codec import now_timestamp
from agenttrail.errors import (
    AgentTrailError,
    AppendOnlyViolation,
    InputError,
    SessionExists,
    SessionNotFound,
    StoreError,
)
from agenttrail.log.redact import DEFAULT_RULES, RedactRules, redacting_logger
from agenttrail.log.store import Appended, ChainPage, Row, Tombstone
from agenttrail.log.store._backend import CHAIN_PAGE_ROWS, LockedHead, chain_rows_written_before
from agenttrail.log.store._base import StoreBase
from agenttrail.log.store._keys import redactor_for
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
from agenttrail.log.store._rules import (
    START_COLUMNS,
    Encoded,
    chain_start,
    new_events,
    with_id,
)
from agenttrail.log.store._sql import Dialect, Tx, statements
from agenttrail.log.store.search import PostgresSearch
from agenttrail.model import NewSession

__all__ = [
    "NOTIFY_CHANNEL",
    "WRITER_ROLE",
    "PostgresStore",
    "PostgresURL",
    "parse_url",
    "postgres_error",
]

logger = redacting_logger(__name__)

SCHEMA_VERSION = 6

WRITER_ROLE = "agenttrail_writer"
"""The role the store's connections work as: no UPDATE/DELETE/TRUNCATE on the evidence."""

_START_FIELDS = ", ".join(f"s.{name.strip()}" for name in START_COLUMNS.split(","))

_CHAIN_PAGE = f"""
SELECT s.id IS NOT NULL, {_START_FIELDS},
    ARRAY(SELECT ARRAY[x.seq, x.erasure_seq] FROM erasures x WHERE x.session_id = %(id)s),
    e.seq, e.created_at, e.payload, e.hash, e.salt, e.digest
FROM (VALUES (1)) AS one (x)
LEFT JOIN sessions s ON s.id = %(id)s
LEFT JOIN LATERAL (
    SELECT seq, created_at, payload, hash, salt, digest FROM session_events
    WHERE session_id = %(id)s AND seq > %(after)s ORDER BY seq LIMIT %(n)s
) e ON true
ORDER BY e.seq
"""
_PAGE_AT = 11
"""Where a page's event columns begin in a row of :data:`_CHAIN_PAGE`."""
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

T = TypeVar("T")
Conn = psycopg.Connection[Any]


class _KeysMoved(Exception):
    """An idempotency key of the batch was written by another transaction between the
    look-up and the seq allocation: the allocation counted it as new. Roll back, retry."""


class PostgresStore(PostgresSearch, StoreBase[Conn]):
    """An agenttrail log in a PostgreSQL schema (``LogStore`` contract).

    Args:
        url: ``postgresql://user@host:port/dbname?schema=NAME`` (see :func:`parse_url`).
        create: when False, a schema without an agenttrail log is an error instead of being
            set up (read-only commands).
        max_payload_bytes: largest payload (bytes of CBOR) an append accepts.
        redact: what appends redact (docs/redaction.md); default the built-in rules.
        max_attempts: attempts of a transaction that meets a serialization failure or a
            deadlock (:data:`MAX_ATTEMPTS`).

    Raises:
        StoreError: the server cannot be reached, refuses the login, or the schema cannot be
            set up; the message names the host and database, never the password.
        InputError: the URL is malformed, or the schema holds other tables.
    """

    sql = statements(Dialect.POSTGRESQL)

    def __init__(
        self,
        url: str,
        *,
        create: bool = True,
        max_payload_bytes: int,
        max_attempts: int = MAX_ATTEMPTS,
        redact: RedactRules = DEFAULT_RULES,
    ) -> None:
        self._url = parse_url(url)
        self.url = self._url.redacted
        self.schema = self._url.schema
        self.max_payload_bytes = max_payload_bytes
        self.redactor = redactor_for(self, redact)
        self.max_attempts = max_attempts
        self._listeners: list[Listener] = []
        self._closed = False
        with connect(self._url) as conn, self._translate():
            _set_up(conn, self._url, create=create)
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

    def _configure(self, conn: Conn) -> None:
        """Every new pooled connection: the log's schema first, and the writer's rights."""
        _work_as_writer(conn, self.schema)

    # -- transactions -----------------------------------------------------------------------

    @contextmanager
    def _translate(self) -> Iterator[None]:
        try:
            yield
        except psycopg.Error as e:
            raise postgres_error(f"{self._url.where}, schema {self.schema!r}", e) from e

    @contextmanager
    def _connection(self) -> Iterator[Conn]:
        if self._closed:
            raise StoreError(f"{self.url}: the store is closed")
        with self._translate(), self._pool.connection() as conn:
            yield conn

    def _read(self, fn: Callable[[Tx], T]) -> T:
        # Binary results: bytea columns (payloads, hashes, envelopes) cost less to load.
        with self._connection() as conn:
            return fn(conn.cursor(binary=True))

    def _write(self, what: str, fn: Callable[[Conn], T]) -> T:
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

    @contextmanager
    def _savepoint(self, tx: Conn) -> Iterator[None]:
        # A transaction block inside the open one is a SAVEPOINT (psycopg): rolled back to
        # when the block raises, released when it ends.
        with tx.transaction():
            yield

    # -- the append lock and the head -------------------------------------------------------

    def _lock_head(
        self,
        tx: Conn,
        session_id: str,
        encoded: Sequence[Encoded],
        keys: Sequence[str],
        create: NewSession | None,
    ) -> LockedHead:
        stored = self._stored_keys(tx, session_id, keys) if keys else {}
        count = new_events(encoded, stored)
        # The seq allocation. This one statement takes the session row's lock and moves the
        # head past the seqs it allocates. A concurrent appender waits for the lock, then in
        # READ COMMITTED updates the row as the first one committed it, so it allocates the
        # seqs after those: gapless, no duplicates, no retry, and seq order is commit order
        # for each session, which afterSeq resume relies on. The lock is held to COMMIT.
        # https://www.postgresql.org/docs/15/transaction-iso.html#XACT-READ-COMMITTED
        bump = (
            "UPDATE sessions SET head_seq = head_seq + %s WHERE id = %s "
            "RETURNING head_seq, head_hash, chain_version"
        )
        row = tx.execute(bump, (count, session_id)).fetchone()
        if row is None:
            if create is None:
                raise SessionNotFound(session_id)
            # Another appender may have created it meanwhile (or it was removed: raised below).
            taken: SessionExists | None = None
            try:
                self._insert_session(tx, with_id(create, session_id))
            except SessionExists as e:
                taken = e
            row = tx.execute(bump, (count, session_id)).fetchone()
            if row is None:
                raise taken or SessionExists(session_id)
        if keys and self._stored_keys(tx, session_id, keys).keys() != stored.keys():
            raise _KeysMoved(session_id)
        return LockedHead(row[0] - count, bytes(row[1]), stored, row[2])

    def _stored_keys(self, tx: Conn, session_id: str, keys: Sequence[str]) -> dict[str, Appended]:
        rows = tx.execute(
            "SELECT k.key, k.seq, e.hash FROM session_event_keys k JOIN session_events e "
            "ON e.session_id = k.session_id AND e.seq = k.seq "
            "WHERE k.session_id = %s AND k.key = ANY(%s)",
            (session_id, list(keys)),
        ).fetchall()
        return {key: Appended(seq, bytes(digest), duplicate=True) for key, seq, digest in rows}

    def _set_head(self, tx: Conn, session_id: str, seq: int, digest: bytes) -> None:
        # head_seq is there already: the allocation (or _cover_rows) moved it first.
        tx.execute("UPDATE sessions SET head_hash = %s WHERE id = %s", (digest, session_id))

    def _cover_rows(self, tx: Conn, session_id: str, seq: int) -> None:
        """Move ``head_seq`` first: the guard trigger admits only rows the head covers, so
        that only an append (or this copy) inserts rows; the hash follows in ``_set_head``."""
        tx.execute("UPDATE sessions SET head_seq = %s WHERE id = %s", (seq, session_id))

    # -- rows -------------------------------------------------------------------------------

    def _insert_rows(self, tx: Conn, session_id: str, rows: Sequence[Row]) -> None:
        # One statement for the batch (the guard trigger checks its seqs once), its arrays
        # sent in binary: text-format bytea arrays cost more to escape than to insert.
        tx.execute(
            "INSERT INTO session_events (session_id, seq, created_at, payload, hash, salt, "
            "digest) SELECT %s, * FROM unnest(%b::bigint[], %b::text[], %b::bytea[], "
            "%b::bytea[], %b::bytea[], %b::bytea[])",
            (session_id, *([r[i] for r in rows] for i in range(6))),
        )

    def _insert_keys(
        self, tx: Conn, session_id: str, keys: Sequence[tuple[str, int, bytes]]
    ) -> None:
        tx.execute(
            "INSERT INTO session_event_keys (session_id, key, seq, hash) "
            "SELECT %s, * FROM unnest(%s::text[], %s::bigint[], %s::bytea[]) "
            "ON CONFLICT DO NOTHING",
            (session_id, *([k[i] for k in keys] for i in range(3))),
        )

    def _insert_session_row(self, tx: Conn, values: Sequence[Any]) -> None:
        # A race with another creator of the id ends in one of two refusals, depending on
        # when the other transaction commits: the primary key's (it committed while this
        # insert waited on the index entry) or the sessions_guard trigger's (it committed
        # before the trigger looked: schema/postgres-0001.sql). Both mean "taken", like a
        # tombstone; the caller decides whether that is an error (create_session) or a row
        # to re-read (append_batch with create). ON CONFLICT DO NOTHING alone would not do:
        # the BEFORE INSERT trigger fires, and refuses, before the conflict is looked for.
        try:
            with tx.transaction():  # a savepoint: a lost race leaves the rest intact
                tx.execute(self.sql.insert_session, values)
        except (pgerrors.UniqueViolation, pgerrors.RestrictViolation):
            raise SessionExists(values[0]) from None

    # -- retention --------------------------------------------------------------------------

    def _remove(
        self, tx: Conn, session_id: str, deleted_at: str, reason: str
    ) -> tuple[Any, Any] | None:
        # The application role has no DELETE on the evidence: agenttrail_remove_session
        # (SECURITY DEFINER) writes the tombstone first and then removes the rows.
        row = tx.execute(
            "SELECT head_seq, head_hash FROM agenttrail_remove_session(%s, %s, %s)",
            (session_id, deleted_at, reason),
        ).fetchone()
        return None if row is None else (row[0], row[1])

    def _chain_log_row(self, tx: Conn, table: str, values: Sequence[Any]) -> None:
        """Nothing to do: the table's trigger chains the row as the owner
        (``schema/postgres-0004.sql``), since the writer role may not write ``log_heads``."""

    def _copy_tombstone(self, tx: Conn, stone: Tombstone) -> bool:
        row = tx.execute(
            "SELECT agenttrail_copy_tombstone(%s, %s, %s, %s, %s)",
            (stone.session_id, stone.head_seq, stone.head_hash, stone.deleted_at, stone.reason),
        ).fetchone()
        return bool(row and row[0])

    def _scrub(self) -> None:
        """Nothing the application role can do: PostgreSQL keeps the old row version until
        VACUUM reclaims it (docs/log-format.md, Erasure, says what VACUUM does and does not
        guarantee)."""

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
            # The same on every row of a statement. Whether there is a session row is asked
            # apart from its head, which a hand edit may have set to NULL (stored_head says so).
            first = result[0]
            start = chain_start(session_id, first[1:10] if first[0] else None, first[10])
            page: list[Row] = [row[_PAGE_AT:] for row in result if row[_PAGE_AT] is not None]
            yield start._replace(rows=page)
            if len(page) < CHAIN_PAGE_ROWS:
                return
            after = page[-1][0]

    # -- live and lifecycle -----------------------------------------------------------------

    def listen(self) -> Listener:
        """A LISTEN connection that wakes on every append to this log (by any process)."""
        listener = Listener(self._url)
        self._listeners.append(listener)
        return listener

    def close(self) -> None:
        """Close the pool and any listener; further calls fail."""
        if self._closed:
            return
        self._closed = True
        for listener in self._listeners:
            listener.close()
        self._pool.close()


def postgres_error(where: str, e: psycopg.Error) -> AgentTrailError:
    """The agenttrail error for a psycopg error, chosen by its class (SQLSTATE); the caller
    chains ``e`` as the cause (docs/architecture.md, Errors).

    Args:
        where: the database and schema, for the message (never the password).
        e: the driver's error.

    Returns:
        ``StoreError`` for a pool with no free connection; ``AppendOnlyViolation`` for a
        privilege the application role lacks (42501, ``insufficient_privilege``) and for a
        guard trigger's refusal (23001, ``restrict_violation``, which every ``RAISE`` in
        ``schema/postgres-0001.sql`` sets); ``InputError`` for data PostgreSQL cannot hold
        (class 22: text with NUL, a number too big); else ``StoreError``.
    """
    text = first_line(e)
    if isinstance(e, psycopg_pool.PoolTimeout):
        return StoreError(f"{where}: no connection free within {POOL_WAIT_S:g} s")
    if isinstance(e, pgerrors.InsufficientPrivilege):
        return AppendOnlyViolation(f"{where}: {text} (the application role {WRITER_ROLE})")
    if isinstance(e, pgerrors.RestrictViolation):
        return AppendOnlyViolation(f"{where}: {text}")
    if isinstance(e, psycopg.DataError):
        return InputError(f"{where}: {text}")
    return StoreError(f"{where}: {text}")


# -- the schema -------------------------------------------------------------------------------


def _set_up(conn: Conn, url: PostgresURL, *, create: bool) -> None:
    """Check the log's schema version on a connection of its own; migrate it (``create``),
    and check that the login may work as the writer role.

    Raises:
        InputError: no log in the schema and not ``create``.
        StoreError: the schema is newer than this agenttrail, or the login lacks the rights.
    """
    version = _version(conn, url.schema)
    if version is None and not create:
        raise InputError(
            f"no agenttrail log in schema {url.schema!r} of {url.where} (import something first)"
        )
    if version is None or version < SCHEMA_VERSION:
        try:
            _migrate(conn, url)
        except pgerrors.InsufficientPrivilege as e:
            raise StoreError(
                f"{url.where}: {url.user!r} cannot set up the agenttrail "
                f"schema {url.schema!r} ({first_line(e)}); open it once as the role "
                "that is to own the tables (docs/log-format.md, Privileges)"
            ) from e
    elif version > SCHEMA_VERSION:
        raise StoreError(
            f"{url.where}, schema {url.schema!r}: schema version {version} is "
            f"newer than this agenttrail ({SCHEMA_VERSION}); upgrade agenttrail"
        )
    conn.rollback()
    # Fail now, with a message, rather than in the pool's background thread.
    try:
        _work_as_writer(conn, url.schema)
    except pgerrors.InsufficientPrivilege as e:
        raise StoreError(
            f"{url.where}: {url.user!r} may not SET ROLE {WRITER_ROLE} "
            f"(GRANT {WRITER_ROLE} TO {url.user}; docs/log-format.md)"
        ) from e
    conn.rollback()


def _version(conn: Conn, schema: str) -> int | None:
    """The log's schema version; ``None`` when the schema holds no agenttrail log.

    The table is looked up with a query of ``pg_class``, which sees what other transactions
    have committed, and not with ``to_regclass``, which answers from this backend's catalog
    cache: after waiting for the migration lock, that cache can still say "no such table"
    about the tables the other opener just committed, and the schema would then look like
    one that "holds tables but no agenttrail log".
    """
    table = conn.execute(
        "SELECT 1 FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE n.nspname = %s AND c.relname = 'agenttrail_schema'",
        (schema,),
    ).fetchone()
    if table is None:
        return None
    row = conn.execute(
        sql.SQL("SELECT max(version) FROM {}.agenttrail_schema").format(sql.Identifier(schema))
    ).fetchone()
    return int(row[0]) if row and row[0] is not None else 0


def _migrate(conn: Conn, url: PostgresURL) -> None:
    schema = sql.Identifier(url.schema)
    # One migration per schema at a time; the others wait, then find it done.
    conn.execute(
        "SELECT pg_advisory_xact_lock(hashtext('agenttrail.ingest.migrate'), hashtext(%s))",
        (url.schema,),
    )
    current = _version(conn, url.schema)
    if current is None:
        tables = conn.execute(
            "SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = %s AND c.relkind IN ('r', 'p', 'v', 'm', 'f')",
            (url.schema,),
        ).fetchone()
        if tables and tables[0]:
            raise InputError(
                f"schema {url.schema!r} of {url.where} holds tables but no "
                "agenttrail log; name another with ?schema=NAME"
            )
        exists = conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (url.schema,))
        if exists.fetchone() is None:
            conn.execute(sql.SQL("CREATE SCHEMA {}").format(schema))
        current = 0
    conn.execute(sql.SQL("SET LOCAL search_path TO {}, pg_temp").format(schema))
    for step in range(current + 1, SCHEMA_VERSION + 1):
        script = resources.files("agenttrail.log.store").joinpath(f"schema/postgres-{step:04d}.sql")
        conn.execute(script.read_text("utf-8"))
        if step == 3:
            _trigram_index(conn)
        if step == 4:
            chain_rows_written_before(conn, PostgresStore.sql)
        conn.execute(
            "INSERT INTO agenttrail_schema (version, applied_at) VALUES (%s, %s)",
            (step, now_timestamp()),
        )
    conn.commit()
    logger.info("postgres: schema %s migrated to version %d", url.schema, SCHEMA_VERSION)


def _trigram_index(conn: Conn) -> None:
    """The GIN trigram index of the search text (``schema/postgres-0003.sql``), when pg_trgm
    is installed or this login may install it; without it, searches scan (docs/search.md)."""
    try:
        with conn.transaction():  # a savepoint: a refusal leaves the migration going
            conn.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm WITH SCHEMA public")
    except (pgerrors.InsufficientPrivilege, pgerrors.FeatureNotSupported, pgerrors.UndefinedFile):
        logger.warning("postgres: pg_trgm unavailable; search scans the index table")
        return
    row = conn.execute(
        "SELECT n.nspname FROM pg_extension x JOIN pg_namespace n ON n.oid = x.extnamespace "
        "WHERE x.extname = 'pg_trgm'"
    ).fetchone()
    assert row is not None  # created above, or there already
    opclass = sql.SQL("{}.gin_trgm_ops").format(sql.Identifier(row[0]))
    conn.execute(
        sql.SQL("CREATE INDEX search_events_folded ON search_events USING gin (folded {})").format(
            opclass
        )
    )


def _work_as_writer(conn: Conn, schema: str) -> None:
    """A connection set to work in the log's schema, with the writer's rights."""
    conn.execute(sql.SQL("SET search_path TO {}, pg_temp").format(sql.Identifier(schema)))
    conn.execute(sql.SQL("SET ROLE {}").format(sql.Identifier(WRITER_ROLE)))
    if not conn.autocommit:
        conn.commit()
