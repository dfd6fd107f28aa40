"""The embedded default backend: one SQLite file in WAL mode.

Writes follow Datasette's discipline (``database.py``: one writer, ``BEGIN IMMEDIATE``): an
append takes SQLite's write lock before it reads the session head, so ``seq = head + 1`` is
allocated under the lock and concurrent appenders — threads sharing a store, or other
processes with their own — never produce a gap or a duplicate
(https://www.sqlite.org/lang_transaction.html, "IMMEDIATE"). Within a process the connection
is shared under a mutex; across processes SQLite's lock serialises, and ``busy_timeout`` makes
a waiting writer retry instead of failing.

Everything else an operation does is the shared base's (``_base.py``); this module holds
the connection, the schema, the write lock, the snapshot reads of ``chain_pages`` and the
translation of ``sqlite3`` errors, by their result code.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from importlib import resources
from pathlib import Path
from typing import Any, TypeVar

from agenttrail.errors import (
    AgentTrailError,
    AppendOnlyViolation,
    InputError,
    SessionNotFound,
    StoreError,
)
from agenttrail.log.redact import DEFAULT_RULES, RedactRules
from agenttrail.log.store import Appended, ChainPage, Row, Tombstone
from agenttrail.log.store._backend import (
    CHAIN_PAGE_ROWS,
    LockedHead,
    chain_log_row,
    chain_rows_written_before,
)
from agenttrail.log.store._base import StoreBase
from agenttrail.log.store._keys import redactor_for
from agenttrail.log.store._rules import START_COLUMNS, Encoded, chain_start, stored_head, with_id
from agenttrail.log.store._sql import SQLITE_LOWER, Dialect, Tx, statements
from agenttrail.log.store.search import SQLiteSearch
from agenttrail.model import NewSession

__all__ = ["SQLiteStore", "sqlite_error"]


def _bind_bytes_as_they_are() -> None:
    """Register the identity as sqlite3's adapter for ``bytes``, unless the program has an
    adapter of its own for them.

    sqlite3 binds an int, float, str or bytearray at once and sends any other value through
    its adapter protocol (CPython ``Modules/_sqlite/cursor.c``, ``need_adapt``): for bytes
    without an adapter that is a registry miss, then a look for ``__adapt__`` on
    ``PrepareProtocol`` that raises and clears an ``AttributeError``, about 0.16 µs a value.
    An event row binds four (payload, hash, salt, digest): 0.06 s of a 100,000-event import
    (docs/benchmarks.md, Scale). The adapter found in the registry returns the very object
    (``bytes(b) is b``), so what is bound and stored is unchanged, for this module and for
    any other user of sqlite3 in the process; a subclass of bytes is not matched."""
    if (bytes, sqlite3.PrepareProtocol) not in sqlite3.adapters:
        sqlite3.register_adapter(bytes, bytes)


_bind_bytes_as_they_are()


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

ROWS_PER_INSERT = 256
"""Events per ``INSERT`` statement of an append. The guard triggers (RAISE ABORT) make SQLite
keep a statement journal of every page a statement changes that was there before it began;
with one statement per row, that is the table's and index's last 16 KiB pages again for
each row, spilled to a temporary file past 64 KiB: 3.3 GB of writes for a 100,000-event
import. One statement per 256 rows journals those pages once (bench/scale.py, import)."""

_INSERT_ROWS = (
    "INSERT INTO session_events (session_id, seq, created_at, payload, hash, salt, digest) VALUES "
)


def _lower(value: str | None) -> str | None:
    """:data:`SQLITE_LOWER`: text lowered as Python lowers it; anything else as it is (NULL:
    a session without an agent, an event without a tool; a value changed by hand)."""
    return value.lower() if isinstance(value, str) else value


def _insert_event_rows(tx: sqlite3.Connection, session_id: str, rows: Sequence[Row]) -> None:
    """Insert a session's new rows, :data:`ROWS_PER_INSERT` to a statement."""
    for start in range(0, len(rows), ROWS_PER_INSERT):
        chunk = rows[start : start + ROWS_PER_INSERT]
        tx.execute(
            _INSERT_ROWS + ", ".join(["(?, ?, ?, ?, ?, ?, ?)"] * len(chunk)),
            [value for row in chunk for value in (session_id, *row)],
        )


SCHEMA_VERSION = 6

_SESSION_START = f"SELECT {START_COLUMNS} FROM sessions WHERE id = ?"

_KEYS_PER_QUERY = 500
"""Idempotency keys looked up in one statement: well under SQLite's bound on a statement's
parameters (999 before SQLite 3.32, https://www.sqlite.org/limits.html#max_variable_number),
and one statement where there was one per key (an OTLP request keys every event)."""

T = TypeVar("T")


_SESSION_TABLES = (
    "trace_rows",
    "session_event_keys",
    "erasures",
    "session_events",
    "turn_leases",
)
"""The tables retention empties of a removed session's rows (then ``sessions``), children
first, after the search index's (``_drop_rows``)."""


class SQLiteStore(SQLiteSearch, StoreBase[sqlite3.Connection]):
    """An agenttrail log in one SQLite file (``LogStore`` contract).

    Args:
        path: the database file; created with its schema on first use unless ``create`` is
            False.
        create: when False, a missing file is an error.
        max_payload_bytes: largest payload (bytes of CBOR) an append accepts.
        redact: what appends redact (docs/redaction.md); default the built-in rules.

    Raises:
        StoreError: the file cannot be opened, is not SQLite, or is not an agenttrail log.
        InputError: there is no such file (``create`` False), no folder to create it in, or
            the path is a folder.
    """

    sql = statements(Dialect.SQLITE)

    def __init__(
        self,
        path: Path,
        *,
        create: bool = True,
        max_payload_bytes: int,
        redact: RedactRules = DEFAULT_RULES,
    ) -> None:
        self.path = path
        self._create = create
        self.url = f"sqlite:///{path}"
        self.max_payload_bytes = max_payload_bytes
        self.redactor = redactor_for(self, redact)
        if not create and not path.exists():
            raise InputError(f"no agenttrail database at {path} (import something first)")
        if create and not path.parent.is_dir():
            raise InputError(f"cannot create database {path}: no folder {path.parent}")
        if path.is_dir():
            raise InputError(f"{path} is a folder, not a database file")
        self._lock = threading.RLock()
        self._closed = False
        self._readers: list[sqlite3.Connection] = []
        """Idle connections of :meth:`chain_pages`, kept for the next one (at most
        :data:`IDLE_READERS`): opening one costs more than verifying a short session."""
        self._conn = self._connect()
        try:
            self._setup()
        except BaseException:
            self._conn.close()
            raise

    def _connect(self) -> sqlite3.Connection:
        try:
            conn = sqlite3.connect(
                self.path, timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False
            )
        except sqlite3.Error as e:
            raise StoreError(f"cannot open database {self.path}: {e}") from e
        conn.create_function(SQLITE_LOWER, 1, _lower, deterministic=True)
        return conn

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
            # An erased payload's bytes are overwritten with zeros in the pages they leave,
            # not left in free space (docs/log-format.md, Erasure).
            self._conn.execute("PRAGMA secure_delete = ON")
            if version < SCHEMA_VERSION:
                self._migrate()
            elif version > SCHEMA_VERSION:
                raise StoreError(
                    f"{self.path}: schema version {version} is newer than this agenttrail "
                    f"({SCHEMA_VERSION}); upgrade agenttrail"
                )

    def _migrate(self) -> None:
        with self._transaction() as conn:
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
                if step == 4:
                    chain_rows_written_before(conn, self.sql)
                conn.execute(f"PRAGMA user_version = {step}")

    # -- transactions -----------------------------------------------------------------------

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
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

    def _savepoint(self, tx: sqlite3.Connection) -> AbstractContextManager[None]:
        return _savepoint(tx)

    def _write(self, what: str, fn: Callable[[sqlite3.Connection], T]) -> T:
        with self._transaction() as conn:
            return fn(conn)

    def _read(self, fn: Callable[[Tx], T]) -> T:
        with self._lock, self._translate():
            return _lenient(self._conn, fn)

    @contextmanager
    def _translate(self) -> Iterator[None]:
        try:
            yield
        except sqlite3.Error as e:
            raise sqlite_error(self.path, e) from e

    # -- the append lock and the head -------------------------------------------------------

    def _lock_head(
        self,
        tx: sqlite3.Connection,
        session_id: str,
        encoded: Sequence[Encoded],
        keys: Sequence[str],
        create: NewSession | None,
    ) -> LockedHead:
        # The write transaction holds SQLite's write lock (BEGIN IMMEDIATE): the head read
        # here stays the head until COMMIT, in this process and every other.
        row = tx.execute(self.sql.head_version, (session_id,)).fetchone()
        if row is None:
            if create is None:
                raise SessionNotFound(session_id)
            seq, prev, version = self._insert_session(tx, with_id(create, session_id))
            return LockedHead(seq, prev, {}, version, created=True)
        seq, prev = stored_head(session_id, row[0], row[1])
        # A session without events has no key stored.
        stored = _stored_keys(tx, session_id, keys) if seq else {}
        return LockedHead(seq, prev, stored, row[2])

    def _set_head(self, tx: sqlite3.Connection, session_id: str, seq: int, digest: bytes) -> None:
        tx.execute(
            "UPDATE sessions SET head_seq = ?, head_hash = ? WHERE id = ?",
            (seq, digest, session_id),
        )

    def _cover_rows(self, tx: sqlite3.Connection, session_id: str, seq: int) -> None:
        """Nothing to do: SQLite's guard admits each session's next seq, and the head moves
        past the rows once they are in (the head only moves forward, in one step)."""

    # -- rows -------------------------------------------------------------------------------

    def _insert_rows(self, tx: sqlite3.Connection, session_id: str, rows: Sequence[Row]) -> None:
        _insert_event_rows(tx, session_id, rows)

    def _insert_keys(
        self, tx: sqlite3.Connection, session_id: str, keys: Sequence[tuple[str, int, bytes]]
    ) -> None:
        tx.executemany(
            "INSERT INTO session_event_keys (session_id, key, seq, hash) VALUES (?, ?, ?, ?) "
            "ON CONFLICT DO NOTHING",
            [(session_id, *key) for key in keys],
        )

    def _insert_session_row(self, tx: sqlite3.Connection, values: Sequence[Any]) -> None:
        # No race to lose: the id was found free under the same write lock.
        tx.execute(self.sql.insert_session, values)

    # -- retention --------------------------------------------------------------------------

    def _remove(
        self, tx: sqlite3.Connection, session_id: str, deleted_at: str, reason: str
    ) -> tuple[Any, Any] | None:
        row = tx.execute(self.sql.head, (session_id,)).fetchone()
        if row is None:
            return None
        # The tombstone first: the schema's triggers refuse these deletes for a session
        # without one.
        stone = (session_id, row[0], bytes(row[1]), deleted_at, reason)
        tx.execute(
            "INSERT INTO tombstones (session_id, head_seq, head_hash, deleted_at, reason) "
            "VALUES (?, ?, ?, ?, ?)",
            stone,
        )
        self._chain_log_row(tx, "tombstones", stone)
        self._drop_rows(tx, session_id)
        for table in _SESSION_TABLES:
            tx.execute(f"DELETE FROM {table} WHERE session_id = ?", (session_id,))
        tx.execute("DELETE FROM sessions WHERE id = ?", (session_id,))
        return row[0], row[1]

    def _copy_tombstone(self, tx: sqlite3.Connection, stone: Tombstone) -> bool:
        if tx.execute(self.sql.head, (stone.session_id,)).fetchone():
            raise AppendOnlyViolation(
                f"{self.path}: session {stone.session_id} exists here; its tombstone is not copied"
            )
        values = (stone.session_id, stone.head_seq, stone.head_hash, stone.deleted_at, stone.reason)
        cursor = tx.execute(
            "INSERT INTO tombstones (session_id, head_seq, head_hash, deleted_at, reason) "
            "VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
            values,
        )
        if cursor.rowcount:
            self._chain_log_row(tx, "tombstones", values)
        return bool(cursor.rowcount)

    def _chain_log_row(self, tx: sqlite3.Connection, table: str, values: Sequence[Any]) -> None:
        chain_log_row(tx, self.sql, table, values)

    def _scrub(self) -> None:
        """Copy the WAL into the database file and truncate it to zero bytes, so that the
        pages holding erased bytes leave the -wal file too (``secure_delete`` zeroed them
        in the pages that kept other rows). Readers holding an old snapshot would block the
        truncation: the store's idle snapshot connections hold none."""
        with self._lock, self._translate():
            self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()

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
                conn.text_factory = _text_as_stored  # the session row as stored (_Pages)
                conn.execute("BEGIN")  # the snapshot starts at the first read below
                start = chain_start(
                    session_id,
                    conn.execute(_SESSION_START, (session_id,)).fetchone(),
                    conn.execute(self.sql.erasures, (session_id,)).fetchall(),
                )
                pages = _Pages(conn, session_id, start)
                try:
                    yield iter(pages)
                finally:
                    pages.cursor.close()
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
        return self._connect()

    def _idle(self, conn: sqlite3.Connection) -> None:
        """Keep a snapshot connection for the next snapshot, or close it."""
        with self._lock:
            if not self._closed and len(self._readers) < IDLE_READERS:
                self._readers.append(conn)
                return
        conn.close()

    # -- live and lifecycle -----------------------------------------------------------------

    def listen(self) -> None:
        """``None``: SQLite has no notifications; the live feed polls session heads."""
        return None

    def close(self) -> None:
        """Close the connection; further calls fail."""
        with self._lock:
            self._closed = True
            self._conn.close()
            for reader in self._readers:
                reader.close()
            self._readers.clear()


def sqlite_error(path: Path, e: sqlite3.Error) -> AgentTrailError:
    """The agenttrail error for a ``sqlite3`` error on the log at ``path``, chosen by its
    result code (https://www.sqlite.org/rescode.html); the caller chains ``e`` as the cause.

    Returns:
        ``AppendOnlyViolation`` for a guard trigger's ``RAISE(ABORT, …)``
        (``SQLITE_CONSTRAINT_TRIGGER``: ``schema/sqlite-0001.sql``), ``InputError`` for a
        file that is not SQLite (``SQLITE_NOTADB``), else ``StoreError``; each message
        names the file.
    """
    # Errors of the sqlite3 module itself (a closed connection) carry no result code.
    match getattr(e, "sqlite_errorcode", None):
        case sqlite3.SQLITE_CONSTRAINT_TRIGGER:
            return AppendOnlyViolation(f"{path}: {e}")
        case sqlite3.SQLITE_NOTADB:
            return InputError(f"{path} is not an agenttrail database (not SQLite)")
        case _:
            return StoreError(f"{path}: {e}")


@contextmanager
def _savepoint(tx: sqlite3.Connection) -> Iterator[None]:
    """A savepoint in the open transaction (``Backend._savepoint``)."""
    tx.execute("SAVEPOINT batch")
    try:
        yield
    except BaseException:
        tx.execute("ROLLBACK TO batch")
        tx.execute("RELEASE batch")
        raise
    tx.execute("RELEASE batch")


_NOT_UTF8 = "Could not decode to UTF-8"
"""How ``sqlite3`` begins the error of a TEXT value it cannot decode."""


def _lenient(conn: sqlite3.Connection, fn: Callable[[sqlite3.Connection], T]) -> T:
    """``fn(conn)``; when a TEXT value is not UTF-8 (a BLOB made text by hand), ``fn`` again
    with such text read as stored, so that the reader of the row names it
    (:class:`~agenttrail.errors.EventRowDamaged`) instead of sqlite3 failing the read."""
    try:
        return fn(conn)
    except sqlite3.OperationalError as e:
        if not str(e).startswith(_NOT_UTF8):
            raise
    conn.text_factory = _text_as_stored
    try:
        return fn(conn)
    finally:
        conn.text_factory = str


def _text_as_stored(data: bytes) -> str:
    """A TEXT value as a str, bytes that are not UTF-8 kept as lone surrogates (PEP 383)."""
    return data.decode("utf-8", "surrogateescape")


_CHAIN_ROWS = (
    "SELECT seq, created_at, payload, hash, salt, digest FROM session_events "
    "WHERE session_id = ? ORDER BY seq"
)


class _Pages:
    """A session's rows as :meth:`SQLiteStore.chain_pages` yields them, a page at a time, on a
    connection in a read transaction.

    SQLite keeps whatever a hand edit writes: a payload stored back as TEXT need not be UTF-8
    (``replace()`` on a BLOB gives TEXT). Such text is read as a ``str`` all the same, with
    the bytes that are not UTF-8 as lone surrogates, so that verify names its row (chain.py)
    instead of failing on the whole session. The rows are read with ``sqlite3``'s own decoder
    until one cannot be: a ``text_factory`` written in Python costs a call per row, a tenth
    of verify's time (bench/append.py). Then the query is run again in the same snapshot with
    that factory, past the rows already read.
    """

    def __init__(self, conn: sqlite3.Connection, session_id: str, start: ChainPage) -> None:
        self.conn, self.session_id, self.start = conn, session_id, start
        conn.text_factory = str
        self.cursor = conn.execute(_CHAIN_ROWS, (session_id,))

    def __iter__(self) -> Iterator[ChainPage]:
        read = 0
        while True:
            try:
                page = self.cursor.fetchmany(CHAIN_PAGE_ROWS)
            except sqlite3.OperationalError:
                if self.conn.text_factory is _text_as_stored:
                    raise
                self._reread(read)
                continue
            read += len(page)
            yield self.start._replace(rows=page)
            if len(page) < CHAIN_PAGE_ROWS:
                return

    def _reread(self, skip: int) -> None:
        """Run the query again with the lenient decoder, past the first ``skip`` rows."""
        self.cursor.close()
        self.conn.text_factory = _text_as_stored
        self.cursor = self.conn.execute(_CHAIN_ROWS, (self.session_id,))
        while skip > 0 and (done := len(self.cursor.fetchmany(min(skip, CHAIN_PAGE_ROWS)))):
            skip -= done


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


def _stored_keys(
    tx: sqlite3.Connection, session_id: str, keys: Sequence[str]
) -> dict[str, Appended]:
    """The first seq and hash of each of ``keys`` the session has stored."""
    stored: dict[str, Appended] = {}
    for start in range(0, len(keys), _KEYS_PER_QUERY):
        chunk = keys[start : start + _KEYS_PER_QUERY]
        found = tx.execute(
            "SELECT k.key, k.seq, e.hash FROM session_event_keys k JOIN session_events e "
            "ON e.session_id = k.session_id AND e.seq = k.seq "
            f"WHERE k.session_id = ? AND k.key IN ({', '.join('?' * len(chunk))})",
            (session_id, *chunk),
        ).fetchall()
        for key, seq, digest in found:
            stored[key] = Appended(seq, bytes(digest), duplicate=True)
    return stored
