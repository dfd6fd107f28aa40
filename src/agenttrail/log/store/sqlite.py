"""The embedded default backend: one SQLite file in WAL mode.

Writes follow Datasette's discipline (``database.py``: one writer, ``BEGIN IMMEDIATE``): an
append takes SQLite's write lock before it reads the session head, so ``seq = head + 1`` is
allocated under the lock and concurrent appenders — threads sharing a store, or other
processes with their own — never produce a gap or a duplicate
(https://www.sqlite.org/lang_transaction.html, "IMMEDIATE"). Within a process the connection
is shared under a mutex; across processes SQLite's lock serialises, and ``busy_timeout`` makes
a waiting writer retry instead of failing.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterable, Iterator, Sequence
from contextlib import closing, contextmanager
from datetime import UTC, datetime, timedelta
from importlib import resources
from pathlib import Path

from agenttrail.codec import json_line, normalize_timestamp, now_timestamp
from agenttrail.errors import (
    AppendOnlyViolation,
    ChainBroken,
    InputError,
    SessionExists,
    SessionNotFound,
    StoreError,
    TurnInFlight,
)
from agenttrail.log.chain import GENESIS_HASH, chain_hasher
from agenttrail.log.store import Appended, ChainPage, Row, Tombstone, TurnLease
from agenttrail.log.store._base import (
    CHAIN_PAGE_ROWS,
    TRACE_FIELDS,
    Encoded,
    StoreBase,
    as_new_session,
    chain_events,
    check_created_at,
    check_new_session,
    check_session,
    check_text,
    encode_events,
    session_from_row,
    stored_head,
    stored_trace,
    trace_row,
    with_id,
)
from agenttrail.model import NewEvent, NewSession, NewTrace, Session, TraceRow

__all__ = ["SQLiteStore"]

BUSY_TIMEOUT_S = 60.0
"""How long a writer waits for another process's write lock before giving up (seconds).
Appends hold the lock for well under a millisecond, so 60 s only runs out when something
holds the database open in a write transaction by hand."""


IDLE_READERS = 4
"""Snapshot connections a store keeps open between verifies (one per concurrent verify)."""

MMAP_BYTES = 256 * 1024 * 1024
"""Address space SQLite may map for reads (bytes); not memory used. Larger logs fall back to
ordinary reads past this point."""

CACHE_KIB = 64 * 1024
"""Page cache cap per connection (KiB). SQLite's default, 2 MiB, holds about 2,000 1 KiB
events, so streaming a larger session re-read pages; the cap is only reached when used."""

SCHEMA_VERSION = 1

_SESSION_COLUMNS = (
    "id, title, agent, user, workspace, started, metadata, created_at, head_seq, head_hash"
)


class SQLiteStore(StoreBase):
    """An agenttrail log in one SQLite file (``LogStore`` contract).

    Args:
        path: the database file; created with its schema on first use unless ``create`` is
            False.
        create: when False, a missing file is an error.
        max_payload_bytes: largest payload (bytes of CBOR) an append accepts.

    Raises:
        StoreError: the file cannot be opened, is not SQLite, or is not an agenttrail log.
    """

    def __init__(self, path: Path, *, create: bool = True, max_payload_bytes: int) -> None:
        self.path = path
        self._create = create
        self.url = f"sqlite:///{path}"
        self.max_payload_bytes = max_payload_bytes
        if not create and not path.exists():
            raise InputError(f"no agenttrail database at {path} (import something first)")
        self._lock = threading.RLock()
        self._closed = False
        self._readers: list[sqlite3.Connection] = []
        """Idle connections of :meth:`chain_pages`, kept for the next one (at most
        :data:`IDLE_READERS`): opening one costs more than verifying a short session."""
        try:
            self._conn = sqlite3.connect(
                path, timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False
            )
        except sqlite3.Error as e:
            raise StoreError(f"cannot open database {path}: {e}") from e
        try:
            self._setup()
        except BaseException:
            self._conn.close()
            raise

    def _setup(self) -> None:
        with self._translate():
            version = self._conn.execute("PRAGMA user_version").fetchone()[0]
            if version == 0 and not self._create:  # reading must not turn a file into a log
                raise InputError(f"{self.path} is not an agenttrail database")
            # 16 KiB pages: a 1 KiB event and its neighbours share a page, and verify streams
            # a session about twice as fast as with 4 KiB pages (bench/append.py). Only takes
            # effect on a new file, before the first table.
            self._conn.execute("PRAGMA page_size = 16384")
            self._conn.execute("PRAGMA journal_mode = WAL")
            # Reads map the file instead of copying pages through read(2).
            self._conn.execute(f"PRAGMA mmap_size = {MMAP_BYTES}")
            self._conn.execute(f"PRAGMA cache_size = -{CACHE_KIB}")
            # FULL: an append that returned is on disk, even after a power cut (in WAL mode
            # NORMAL may lose the last transactions).
            self._conn.execute("PRAGMA synchronous = FULL")
            self._conn.execute("PRAGMA foreign_keys = ON")
            if version < SCHEMA_VERSION:
                self._migrate()
            elif version > SCHEMA_VERSION:
                raise StoreError(
                    f"{self.path}: schema version {version} is newer than this agenttrail "
                    f"({SCHEMA_VERSION}); upgrade agenttrail"
                )

    def _migrate(self) -> None:
        with self._write() as conn:
            # Another process may have migrated while we waited for the lock.
            current = conn.execute("PRAGMA user_version").fetchone()[0]
            tables = conn.execute("SELECT count(*) FROM sqlite_schema").fetchone()[0]
            if current == 0 and tables:
                raise InputError(f"{self.path} is a SQLite database but not an agenttrail log")
            for step in range(current + 1, SCHEMA_VERSION + 1):
                script = resources.files("agenttrail.log.store").joinpath(
                    f"schema/sqlite-{step:04d}.sql"
                )
                for statement in _statements(script.read_text("utf-8")):
                    conn.execute(statement)
                conn.execute(f"PRAGMA user_version = {step}")

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One write transaction under SQLite's write lock (``BEGIN IMMEDIATE``)."""
        with self._lock, self._translate():
            conn = self._conn
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise

    # -- sessions ---------------------------------------------------------------------------

    def create_session(self, new: NewSession) -> Session:
        """Create a session row. Raises ``SessionExists`` when the id is taken."""
        with self._write():
            session_id = self._insert_session(new)
        return self.get_session(session_id)

    def _insert_session(self, new: NewSession, *, created_at: str | None = None) -> str:
        session_id = check_new_session(new)
        if self._conn.execute(
            "SELECT 1 FROM sessions WHERE id = ? UNION ALL "
            "SELECT 1 FROM tombstones WHERE session_id = ?",
            (session_id, session_id),
        ).fetchone():
            raise SessionExists(session_id)
        self._conn.execute(
            "INSERT INTO sessions (id, title, agent, user, workspace, started, metadata, "
            "created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (
                session_id,
                new.title,
                new.agent,
                new.user,
                new.workspace,
                new.started,
                json_line(new.metadata),
                created_at or now_timestamp(),
            ),
        )
        return session_id

    def get_session(self, session_id: str) -> Session:
        """The session row. Raises ``SessionNotFound``."""
        with self._lock, self._translate():
            row = self._conn.execute(
                f"SELECT {_SESSION_COLUMNS} FROM sessions WHERE id = ?", (session_id,)
            ).fetchone()
        if row is None:
            raise SessionNotFound(session_id)
        return session_from_row(row)

    def sessions(self) -> list[Session]:
        """Every session, in the order they were created."""
        with self._lock, self._translate():
            rows = self._conn.execute(
                f"SELECT {_SESSION_COLUMNS} FROM sessions ORDER BY created_at, rowid"
            ).fetchall()
        return [session_from_row(row) for row in rows]

    def head(self, session_id: str) -> tuple[int, bytes] | None:
        """``(head_seq, head_hash)`` of the session row, or ``None`` if there is no row."""
        with self._lock, self._translate():
            row = self._conn.execute(
                "SELECT head_seq, head_hash FROM sessions WHERE id = ?", (session_id,)
            ).fetchone()
        return stored_head(session_id, *row) if row else None

    def event_session_ids(self) -> set[str]:
        """Every session id that has at least one event row."""
        with self._lock, self._translate():
            rows = self._conn.execute("SELECT DISTINCT session_id FROM session_events").fetchall()
        return {row[0] for row in rows}

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
                turn lock, checked inside the same transaction (a user's own tool call).

        Returns:
            One :class:`Appended` per event, in order. An event whose key is already in the
            session (or earlier in the batch) is not written and gets the first seq back.

        Raises:
            PayloadError: a payload would not round-trip (nothing written).
            PayloadTooLarge: a payload is above ``max_payload_bytes`` (nothing written).
            SessionNotFound: the session does not exist and ``create`` is None.
            TurnInFlight: ``unless_turn`` and an agent turn is in flight (nothing written).
            StoreError: the database failed.
        """
        # Encode before taking the write lock: the lock is held only for SQL.
        encoded = encode_events(events, self.max_payload_bytes)
        with self._write():
            if unless_turn:
                lease = self._live_lease(session_id)
                if lease is not None:
                    raise TurnInFlight(session_id, lease.turn_id, lease.expires_at)
            return self._append_locked(session_id, encoded, create)

    def _append_locked(
        self, session_id: str, encoded: list[Encoded], create: NewSession | None
    ) -> list[Appended]:
        conn = self._conn
        row = conn.execute(
            "SELECT head_seq, head_hash FROM sessions WHERE id = ?", (session_id,)
        ).fetchone()
        if row is None:
            if create is None:
                raise SessionNotFound(session_id)
            self._insert_session(with_id(create, session_id))
            seq, prev = 0, GENESIS_HASH
        else:
            seq, prev = stored_head(session_id, *row)
        stored: dict[str, Appended] = {}
        for _, _, key in encoded:
            if key is not None and key not in stored:
                hit = self._keyed(session_id, key)
                if hit is not None:
                    stored[key] = hit
        plan = chain_events(
            session_id, encoded, head_seq=seq, head_hash=prev, stored=stored, now=now_timestamp()
        )
        if plan.rows:
            conn.executemany(
                "INSERT INTO session_events (session_id, seq, created_at, payload, hash) "
                "VALUES (?, ?, ?, ?, ?)",
                [(session_id, *r) for r in plan.rows],
            )
            conn.executemany(
                "INSERT INTO session_event_keys (session_id, key, seq) VALUES (?, ?, ?)",
                [(session_id, key, n) for key, n in plan.keys],
            )
            conn.execute(
                "UPDATE sessions SET head_seq = ?, head_hash = ? WHERE id = ?",
                (plan.head_seq, plan.head_hash, session_id),
            )
        return plan.results

    def _keyed(self, session_id: str, key: str) -> Appended | None:
        row = self._conn.execute(
            "SELECT k.seq, e.hash FROM session_event_keys k JOIN session_events e "
            "ON e.session_id = k.session_id AND e.seq = k.seq "
            "WHERE k.session_id = ? AND k.key = ?",
            (session_id, key),
        ).fetchone()
        return Appended(row[0], bytes(row[1]), duplicate=True) if row else None

    # -- reads ------------------------------------------------------------------------------

    @contextmanager
    def chain_pages(self, session_id: str) -> Iterator[Iterator[ChainPage]]:
        """A session's rows and its head in one read transaction (``LogStore`` contract).

        Reads on a connection of its own, so the store's connection (and its lock) stays free
        for appends while a long session is verified; WAL lets writers go on meanwhile.
        """
        conn = self._reader()
        try:
            with self._translate():
                conn.execute("BEGIN")  # the snapshot starts at the first read below
                head = conn.execute(
                    "SELECT head_seq, head_hash FROM sessions WHERE id = ?", (session_id,)
                ).fetchone()
                snapshot_head = stored_head(session_id, *head) if head else None
                with closing(
                    conn.execute(
                        "SELECT seq, created_at, payload, hash FROM session_events "
                        "WHERE session_id = ? ORDER BY seq",
                        (session_id,),
                    )
                ) as rows:
                    yield _pages(snapshot_head, rows)
                conn.execute("ROLLBACK")  # a read transaction: nothing to keep
        except BaseException:
            conn.close()
            raise
        self._idle(conn)

    def _reader(self) -> sqlite3.Connection:
        """An idle snapshot connection, or a new one. Not shared while in use: verify reads
        ahead on a thread of its own (chain.py), one call at a time."""
        with self._lock:
            if self._readers:
                return self._readers.pop()
        try:
            return sqlite3.connect(
                self.path, timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False
            )
        except sqlite3.Error as e:
            raise StoreError(f"cannot open database {self.path}: {e}") from e

    def _idle(self, conn: sqlite3.Connection) -> None:
        """Keep a snapshot connection for the next snapshot, or close it."""
        with self._lock:
            if not self._closed and len(self._readers) < IDLE_READERS:
                self._readers.append(conn)
                return
        conn.close()

    def _read_page(self, session_id: str, after_seq: int, limit: int) -> list[Row]:
        with self._lock, self._translate():
            rows: list[Row] = self._conn.execute(
                "SELECT seq, created_at, payload, hash FROM session_events "
                "WHERE session_id = ? AND seq > ? ORDER BY seq LIMIT ?",
                (session_id, after_seq, limit),
            ).fetchall()
        return rows

    def event_keys(self, session_id: str) -> list[tuple[str, int]]:
        """``(key, seq)`` of every idempotency key of a session, in seq order."""
        with self._lock, self._translate():
            rows = self._conn.execute(
                "SELECT key, seq FROM session_event_keys WHERE session_id = ? ORDER BY seq, key",
                (session_id,),
            ).fetchall()
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
        with self._write() as conn:
            head = conn.execute(
                "SELECT head_seq, head_hash FROM sessions WHERE id = ?", (session.id,)
            ).fetchone()
            if head is None:
                self._insert_session(as_new_session(session), created_at=session.created_at)
                head = (0, GENESIS_HASH)
            seq, prev = stored_head(session.id, *head)
            hash_row = chain_hasher(session.id)
            written = 0
            for row_seq, created_at, data, digest in rows:
                if row_seq <= seq:
                    continue
                check_created_at(created_at)
                if row_seq != seq + 1 or hash_row(prev, row_seq, created_at, data) != digest:
                    raise ChainBroken(session.id, row_seq, "the copied row does not chain")
                conn.execute(
                    "INSERT INTO session_events (session_id, seq, created_at, payload, hash) "
                    "VALUES (?, ?, ?, ?, ?)",
                    (session.id, row_seq, created_at, data, digest),
                )
                seq, prev = row_seq, digest
                written += 1
            if written:
                conn.execute(
                    "UPDATE sessions SET head_seq = ?, head_hash = ? WHERE id = ?",
                    (seq, prev, session.id),
                )
            conn.executemany(
                "INSERT INTO session_event_keys (session_id, key, seq) VALUES (?, ?, ?) "
                "ON CONFLICT DO NOTHING",
                [(session.id, key, n) for key, n in keys if n <= seq],
            )
        return written

    def copy_tombstone(self, stone: Tombstone) -> bool:
        """Keep a tombstone copied from another log; False when it is already here.

        Raises:
            AppendOnlyViolation: a live session here has that id.
        """
        with self._write() as conn:
            if conn.execute("SELECT 1 FROM sessions WHERE id = ?", (stone.session_id,)).fetchone():
                raise AppendOnlyViolation(
                    f"{self.path}: session {stone.session_id} exists here; its tombstone is "
                    "not copied"
                )
            cursor = conn.execute(
                "INSERT INTO tombstones (session_id, head_seq, head_hash, deleted_at, reason) "
                "VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
                (stone.session_id, stone.head_seq, stone.head_hash, stone.deleted_at, stone.reason),
            )
            return bool(cursor.rowcount)

    # -- trace rows ---------------------------------------------------------------------------

    def add_traces(self, rows: Sequence[NewTrace]) -> list[TraceRow]:
        """Write trace rows in one transaction, skipping any already stored for its result."""
        written: list[TraceRow] = []
        with self._write() as conn:
            for row in rows:
                cursor = conn.execute(
                    f"INSERT INTO trace_rows ({_TRACE_COLUMNS}) "
                    f"VALUES ({', '.join('?' * len(TRACE_FIELDS))}) "
                    "ON CONFLICT (session_id, result_seq) DO NOTHING",
                    tuple(getattr(row, name) for name in TRACE_FIELDS),
                )
                if cursor.rowcount:
                    written.append(stored_trace(row, cursor.lastrowid or 0))
        return written

    def traces(self, session_id: str, *, turn_seq: int | None = None) -> list[TraceRow]:
        """A session's trace rows in result order, or only those of the turn at ``turn_seq``."""
        args: list[str | int]
        where, args = "session_id = ?", [session_id]
        if turn_seq is not None:
            where, args = where + " AND turn_seq = ?", [session_id, turn_seq]
        with self._lock, self._translate():
            rows = self._conn.execute(
                f"SELECT {_TRACE_COLUMNS}, id FROM trace_rows WHERE {where} ORDER BY result_seq",
                args,
            ).fetchall()
        return [trace_row(row) for row in rows]

    def trace(self, trace_id: int) -> TraceRow:
        """One trace row by id. Raises ``InputError`` when there is none."""
        with self._lock, self._translate():
            row = self._conn.execute(
                f"SELECT {_TRACE_COLUMNS}, id FROM trace_rows WHERE id = ?", (trace_id,)
            ).fetchone()
        if row is None:
            raise InputError(f"no trace row {trace_id}")
        return trace_row(row)

    # -- turn lock ----------------------------------------------------------------------------

    def acquire_turn(
        self, session_id: str, *, turn_id: str, holder: str, ttl_s: float
    ) -> TurnLease:
        """Take or renew the session's turn lock for ``ttl_s`` seconds.

        Raises:
            SessionNotFound: no such session.
            TurnInFlight: another turn holds a lease that has not expired.
        """
        check_text("turn id", turn_id)
        check_text("turn holder", holder)
        with self._write() as conn:
            if (
                conn.execute("SELECT 1 FROM sessions WHERE id = ?", (session_id,)).fetchone()
                is None
            ):
                raise SessionNotFound(session_id)
            held = self._live_lease(session_id)
            if held is not None and held.turn_id != turn_id:
                raise TurnInFlight(session_id, held.turn_id, held.expires_at)
            expires = normalize_timestamp(datetime.now(UTC) + timedelta(seconds=ttl_s))
            conn.execute(
                "INSERT INTO turn_leases (session_id, turn_id, holder, expires_at) "
                "VALUES (?, ?, ?, ?) ON CONFLICT (session_id) DO UPDATE SET "
                "turn_id = excluded.turn_id, holder = excluded.holder, "
                "expires_at = excluded.expires_at",
                (session_id, turn_id, holder, expires),
            )
        return TurnLease(session_id, turn_id, holder, expires)

    def current_turn(self, session_id: str) -> TurnLease | None:
        """The lease in force for the session, or ``None`` when no agent turn is in flight."""
        with self._lock, self._translate():
            return self._live_lease(session_id)

    def release_turn(self, session_id: str, turn_id: str) -> None:
        """Give the turn lock back; a no-op when ``turn_id`` does not hold it."""
        with self._write() as conn:
            conn.execute(
                "DELETE FROM turn_leases WHERE session_id = ? AND turn_id = ?",
                (session_id, turn_id),
            )

    def _live_lease(self, session_id: str) -> TurnLease | None:
        row = self._conn.execute(
            "SELECT turn_id, holder, expires_at FROM turn_leases "
            "WHERE session_id = ? AND expires_at > ?",
            (session_id, now_timestamp()),
        ).fetchone()
        return TurnLease(session_id, row[0], row[1], row[2]) if row else None

    # -- retention ----------------------------------------------------------------------------

    def remove_session(self, session_id: str, *, reason: str) -> Tombstone:
        """Remove a session, its events, keys and trace rows, leaving a tombstone.

        The tombstone is written first, in the same transaction: the database refuses these
        deletes for any session without one (schema triggers), so this is the only way.

        Raises:
            SessionNotFound: no such session.
        """
        check_text("retention reason", reason)
        with self._write() as conn:
            row = conn.execute(
                "SELECT head_seq, head_hash FROM sessions WHERE id = ?", (session_id,)
            ).fetchone()
            if row is None:
                raise SessionNotFound(session_id)
            stone = Tombstone(session_id, row[0], bytes(row[1]), now_timestamp(), reason)
            conn.execute(
                "INSERT INTO tombstones (session_id, head_seq, head_hash, deleted_at, reason) "
                "VALUES (?, ?, ?, ?, ?)",
                (stone.session_id, stone.head_seq, stone.head_hash, stone.deleted_at, reason),
            )
            for table in ("trace_rows", "session_event_keys", "session_events", "turn_leases"):
                conn.execute(f"DELETE FROM {table} WHERE session_id = ?", (session_id,))
            conn.execute("DELETE FROM sessions WHERE id = ?", (session_id,))
        return stone

    def tombstones(self) -> list[Tombstone]:
        """Every tombstone, oldest first."""
        with self._lock, self._translate():
            rows = self._conn.execute(
                "SELECT session_id, head_seq, head_hash, deleted_at, reason FROM tombstones "
                "ORDER BY deleted_at, rowid"
            ).fetchall()
        return [Tombstone(r[0], r[1], bytes(r[2]), r[3], r[4]) for r in rows]

    # -- live ---------------------------------------------------------------------------------

    def listen(self) -> None:
        """``None``: SQLite has no notifications; the live feed polls session heads."""
        return None

    # -- lifecycle --------------------------------------------------------------------------

    def close(self) -> None:
        """Close the connection; further calls fail."""
        with self._lock:
            self._closed = True
            self._conn.close()
            for reader in self._readers:
                reader.close()
            self._readers.clear()

    def _translate(self) -> _Translate:
        return _Translate(self.path)


def _pages(head: tuple[int, bytes] | None, rows: sqlite3.Cursor) -> Iterator[ChainPage]:
    while True:
        page = rows.fetchmany(CHAIN_PAGE_ROWS)
        yield ChainPage(head, page)
        if len(page) < CHAIN_PAGE_ROWS:
            return


class _Translate:
    """Map ``sqlite3`` errors onto agenttrail's, keeping the driver error as the cause."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __enter__(self) -> None:
        return None

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: object
    ) -> None:
        if exc is None or not isinstance(exc, sqlite3.Error):
            return
        text = str(exc)
        if "append-only" in text or "head only moves forward" in text:
            raise AppendOnlyViolation(f"{self.path}: {text}") from exc
        if isinstance(exc, sqlite3.DatabaseError) and "not a database" in text:
            raise InputError(f"{self.path} is not an agenttrail database (not SQLite)") from exc
        raise StoreError(f"{self.path}: {text}") from exc


_TRACE_COLUMNS = ", ".join(TRACE_FIELDS)


def _statements(script: str) -> list[str]:
    """Split a schema script into statements at top-level semicolons (trigger bodies kept)."""
    out: list[str] = []
    buffer = ""
    for line in script.splitlines(keepends=True):
        if line.lstrip().startswith("--") and not buffer.strip():
            continue
        buffer += line
        if sqlite3.complete_statement(buffer):
            out.append(buffer.strip())
            buffer = ""
    if buffer.strip():
        out.append(buffer.strip())
    return out
