"""The SQL both backends run, built once per dialect.

The two schemas hold the same tables and columns (``schema/sqlite-0001.sql``,
``schema/postgres-0001.sql``, and ``tests/log/test_store_postgres.py`` checks they stay so), so
the shared statements differ only in three places, each chosen by :class:`Dialect` with a
``match`` that ends in ``assert_never`` (Phoenix's ``db/helpers.py``): a new backend is a type
error until it answers every one of them.

- the parameter placeholder (``?`` for ``sqlite3``, ``%s`` for psycopg);
- the column that keeps creation order (SQLite's ``rowid``; PostgreSQL's ``pos``, an identity);
- how a read-modify-write of a session row locks it: nothing in SQLite, where the whole write
  transaction holds the database's write lock (``BEGIN IMMEDIATE``), ``FOR NO KEY UPDATE`` in
  PostgreSQL, the lock an append's seq-allocating UPDATE takes too.

What is more than a statement (how a transaction is opened, how the seq is allocated, bulk
inserts, retention) is the backend's own, in ``sqlite.py`` and ``postgres.py``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any, Protocol, assert_never

from agenttrail.log.store._rules import TRACE_FIELDS

__all__ = ["SESSION_COLUMNS", "Cursor", "Dialect", "Statements", "Tx", "statements"]


class Cursor(Protocol):
    """The result of a statement (a ``sqlite3`` or psycopg cursor)."""

    def fetchone(self) -> Any:
        """The next row, or ``None``."""
        ...

    def fetchall(self) -> list[Any]:
        """The remaining rows."""
        ...


class Tx(Protocol):
    """What the shared code runs statements on: a ``sqlite3`` connection, a psycopg connection
    or cursor, inside the transaction a backend's ``_write`` or ``_read`` opened (``_base.py``)."""

    def execute(self, query: str, params: Sequence[Any] = ..., /) -> Cursor:
        """Run one statement with its parameters (the dialect's placeholders)."""
        ...


class Dialect(Enum):
    """The SQL dialects the store speaks, one per backend module."""

    SQLITE = "sqlite"
    POSTGRESQL = "postgresql"


SESSION_COLUMNS = (
    'id, title, agent, "user", workspace, started, metadata, created_at, head_seq, head_hash, '
    "chain_version"
)
"""The columns :func:`agenttrail.log.store._rules.session_from_row` reads, in its order
(``user`` is quoted: a reserved word in PostgreSQL, a plain identifier in SQLite)."""

_TRACE_COLUMNS = ", ".join(TRACE_FIELDS)

SQLITE_LOWER = "agenttrail_lower"
"""The name of the function each SQLite connection registers as Python's ``str.lower``
(:attr:`Statements.lower`)."""


@dataclass(frozen=True)
class Statements:
    """Every statement the shared base runs, in one dialect (see :func:`statements`)."""

    param: str
    """The placeholder of one parameter."""
    lower: str
    """The SQL function that lowers text as Python's ``str.lower`` does, so that a name
    given in any case is found as :func:`agenttrail.model.search.same_name` finds it:
    PostgreSQL's ``lower`` (every letter, in a UTF-8 database); on SQLite, whose own
    ``lower`` lowers ASCII letters only, :data:`SQLITE_LOWER`, which every connection
    registers (``sqlite.py``)."""
    get_session: str
    sessions: str
    session_ids: str
    head: str
    head_version: str
    """The head and the chain version."""
    lock_head: str
    """The head, with the session row locked until the transaction ends (PostgreSQL)."""
    session_taken: str
    """A row when the id is a session's (``NULL, NULL``) or a tombstone's (its
    ``deleted_at, reason``); two parameters, the id twice."""
    insert_session: str
    event_session_ids: str
    read_page: str
    event_keys: str
    key_with_prefix: str
    """Whether a session holds a key whose first N characters are a prefix: ``(session_id,
    N, prefix)``, one look in the keys' index."""
    insert_trace: str
    traces: str
    turn_traces: str
    trace: str
    live_lease: str
    take_lease: str
    release_lease: str
    tombstones: str
    erasures: str
    insert_erasure: str
    trace_head: str
    """A session's chain version and trace head."""
    lock_trace_head: str
    """The same, the session row locked until the transaction ends (PostgreSQL)."""
    set_trace_head: str
    trace_chain: str
    """A session's trace rows with their hashes, in the order written (``id``)."""
    key_head: str
    """A session's key head: ``key_count, key_hash`` (the session row locked until the
    transaction ends on PostgreSQL; an append holds that lock already)."""
    key_head_read: str
    """The same, for reading (no lock)."""
    set_key_head: str
    key_chain: str
    """A session's idempotency keys with their hashes, in chain order (``seq``, then the
    key's bytes)."""
    key_order: str
    """That order, as an ``ORDER BY`` list."""
    begin_snapshot: str
    """Start a read transaction whose statements all see one snapshot (an autocommit
    connection's statements each see their own)."""
    log_head: str
    """The head of a chain of the log's own rows (``log_heads``), by the table's name."""
    set_log_head: str
    log_chains: dict[str, str]
    """Each chained table of the log's own rows (tombstones, log_keys): its columns in
    :func:`agenttrail.log.digests.log_row_hash` order, then its hash, in the order written."""
    erase_row: str
    """Empty a row's payload and salt (the schema's trigger admits it only with an erasure
    row: ``schema/*-0002.sql``)."""


def statements(dialect: Dialect) -> Statements:
    """The shared statements in ``dialect``."""
    match dialect:
        case Dialect.SQLITE:
            p, order, lock, binary = "?", "rowid", "", ""
            begin = "BEGIN"  # deferred: the snapshot is taken by the first read
            lower = SQLITE_LOWER
        case Dialect.POSTGRESQL:
            p, order, lock, binary = "%s", "pos", " FOR NO KEY UPDATE", ' COLLATE "C"'
            begin = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"
            lower = "lower"

        case _:
            assert_never(dialect)
    head = f"SELECT head_seq, head_hash FROM sessions WHERE id = {p}"
    key_order = f"seq, key{binary}"
    traces = f"SELECT {_TRACE_COLUMNS}, id FROM trace_rows WHERE session_id = {p}"
    return Statements(
        param=p,
        lower=lower,
        get_session=f"SELECT {SESSION_COLUMNS} FROM sessions WHERE id = {p}",
        sessions=f"SELECT {SESSION_COLUMNS} FROM sessions ORDER BY created_at, {order}",
        session_ids=f"SELECT id FROM sessions ORDER BY created_at, {order}",
        head=head,
        head_version=(
            f"SELECT head_seq, head_hash, chain_version FROM sessions WHERE id = {p}{lock}"
        ),
        lock_head=head + lock,
        session_taken=(
            f"SELECT NULL, NULL FROM sessions WHERE id = {p} UNION ALL "
            f"SELECT deleted_at, reason FROM tombstones WHERE session_id = {p}"
        ),
        insert_session=(
            'INSERT INTO sessions (id, title, agent, "user", workspace, started, metadata, '
            f"created_at, chain_version, head_hash) VALUES ({', '.join([p] * 10)})"
        ),
        event_session_ids="SELECT DISTINCT session_id FROM session_events",
        read_page=(
            "SELECT seq, created_at, payload, hash, salt, digest FROM session_events "
            f"WHERE session_id = {p} AND seq > {p} ORDER BY seq LIMIT {p}"
        ),
        event_keys=(
            f"SELECT key, seq FROM session_event_keys WHERE session_id = {p} ORDER BY seq, key"
        ),
        key_with_prefix=(
            f"SELECT 1 FROM session_event_keys WHERE session_id = {p} "
            f"AND substr(key, 1, {p}) = {p} LIMIT 1"
        ),
        insert_trace=(
            f"INSERT INTO trace_rows ({_TRACE_COLUMNS}, hash) "
            f"VALUES ({', '.join([p] * (len(TRACE_FIELDS) + 1))}) "
            "ON CONFLICT (session_id, result_seq) DO NOTHING RETURNING id"
        ),
        traces=f"{traces} ORDER BY result_seq",
        turn_traces=f"{traces} AND turn_seq = {p} ORDER BY result_seq",
        trace=f"SELECT {_TRACE_COLUMNS}, id FROM trace_rows WHERE id = {p}",
        live_lease=(
            "SELECT turn_id, holder, expires_at FROM turn_leases "
            f"WHERE session_id = {p} AND expires_at > {p}"
        ),
        take_lease=(
            "INSERT INTO turn_leases (session_id, turn_id, holder, expires_at) "
            f"VALUES ({p}, {p}, {p}, {p}) ON CONFLICT (session_id) DO UPDATE SET "
            "turn_id = excluded.turn_id, holder = excluded.holder, "
            "expires_at = excluded.expires_at"
        ),
        release_lease=f"DELETE FROM turn_leases WHERE session_id = {p} AND turn_id = {p}",
        tombstones=(
            "SELECT session_id, head_seq, head_hash, deleted_at, reason FROM tombstones "
            f"ORDER BY deleted_at, {order}"
        ),
        erasures=f"SELECT seq, erasure_seq FROM erasures WHERE session_id = {p} ORDER BY seq",
        trace_head=f"SELECT chain_version, trace_count, trace_hash FROM sessions WHERE id = {p}",
        lock_trace_head=(
            f"SELECT chain_version, trace_count, trace_hash FROM sessions WHERE id = {p}{lock}"
        ),
        set_trace_head=f"UPDATE sessions SET trace_count = {p}, trace_hash = {p} WHERE id = {p}",
        trace_chain=(
            f"SELECT {_TRACE_COLUMNS}, hash FROM trace_rows WHERE session_id = {p} ORDER BY id"
        ),
        insert_erasure=(
            f"INSERT INTO erasures (session_id, seq, erasure_seq) VALUES ({p}, {p}, {p})"
        ),
        key_head=f"SELECT key_count, key_hash FROM sessions WHERE id = {p}{lock}",
        key_head_read=f"SELECT key_count, key_hash FROM sessions WHERE id = {p}",
        set_key_head=f"UPDATE sessions SET key_count = {p}, key_hash = {p} WHERE id = {p}",
        key_chain=(
            f"SELECT session_id, key, seq, hash FROM session_event_keys WHERE session_id = {p} "
            f"ORDER BY {key_order}"
        ),
        key_order=key_order,
        begin_snapshot=begin,
        log_head=f"SELECT count, hash FROM log_heads WHERE name = {p}",
        set_log_head=f"UPDATE log_heads SET count = {p}, hash = {p} WHERE name = {p}",
        log_chains={
            "tombstones": (
                "SELECT session_id, head_seq, head_hash, deleted_at, reason, hash "
                f"FROM tombstones ORDER BY {order}"
            ),
            "log_keys": f"SELECT name, key, hash FROM log_keys ORDER BY {order}",
        },
        erase_row=(
            f"UPDATE session_events SET payload = {p}, salt = NULL "
            f"WHERE session_id = {p} AND seq = {p}"
        ),
    )
