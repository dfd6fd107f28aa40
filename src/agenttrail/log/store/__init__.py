"""The store: sessions and their append-only event rows, as bytes.

The store knows bytes and sessions, not formats (docs/architecture.md). Payloads are
encoded by :mod:`agenttrail.codec` before they reach SQL; every reader of the log goes through
:meth:`LogStore.read`, :meth:`LogStore.read_rows` or :meth:`LogStore.chain_pages`.

The contract comes in the roles its callers use (eventsourcing's narrow recorders):

- :class:`EventLog`: sessions and their events (create, append, read);
- :class:`TraceLog`: trace rows;
- :class:`TurnLocks`: the turn lock of a session;
- :class:`Archive`: retention's removal with a tombstone, and the copies of ``migrate``;
- :class:`agenttrail.log.chain.ChainReader`: the snapshot pages ``verify`` reads;

and :class:`LogStore`, all of them with the live feed's listener and ``close``. Each role is
written once, in ``_base.py``, over the small part that differs per backend (how a
transaction is opened, how the session row is locked and seq allocated, bulk inserts,
retention, LISTEN): ``sqlite.py`` and ``postgres.py``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from agenttrail.errors import AgentTrailError, InputError
from agenttrail.limits import byte_limit
from agenttrail.log.chain import ChainReader
from agenttrail.log.redact import Redactor, RedactRules, redact_rules
from agenttrail.model import (
    Event,
    LogReader,
    NewEvent,
    NewSession,
    NewTrace,
    Session,
    TraceRow,
)
from agenttrail.model.search import SearchIndex

if TYPE_CHECKING:
    from agenttrail.log.store._snapshot import SessionsSnapshot

__all__ = [
    "DEFAULT_DATABASE",
    "DEFAULT_MAX_PAYLOAD_BYTES",
    "SNAPSHOT_EVENTS",
    "SNAPSHOT_SESSIONS",
    "AppendListener",
    "Appended",
    "Archive",
    "ChainPage",
    "Erasure",
    "EventLog",
    "LogStore",
    "Row",
    "Tombstone",
    "TraceBuilder",
    "TraceChain",
    "TraceLog",
    "Traced",
    "TurnLease",
    "TurnLocks",
    "byte_limit",
    "open_store",
    "payload_limit",
    "sqlite_path",
]

DEFAULT_DATABASE = "agenttrail.db"
"""Where the log lives when neither ``--db`` nor ``AGENTTRAIL_DATABASE_URL`` says otherwise."""

DEFAULT_MAX_PAYLOAD_BYTES = 16 * 1024 * 1024
"""Largest payload stored whole (16 MiB of CBOR). A whole file read by a tool fits; a runaway
loop that dumps a disk image does not, and fails loudly instead of bloating the log."""


SNAPSHOT_SESSIONS = 400
"""Most sessions in one :meth:`LogStore.snapshot`: its statements' ``IN`` lists stay well
under SQLite's bound on parameters (999 before SQLite 3.32), and its rows are a page of a
list of sessions, not the log."""

SNAPSHOT_EVENTS = 10_000
"""Most events one :meth:`LogStore.snapshot` is asked to hold: it reads its sessions' rows,
payloads included, into memory at once, so a page of sessions is cut at this many events,
and a longer session is read from the store itself, a chain page at a time (memory flat in
session length, as every whole-session read)."""


@dataclass(frozen=True)
class Tombstone:
    """The record a removed session leaves behind (retention's one sanctioned path)."""

    session_id: str
    head_seq: int
    """How many events the session had."""
    head_hash: bytes = field(repr=False)
    """Its last chain hash."""
    deleted_at: str
    reason: str


@dataclass(frozen=True)
class TurnLease:
    """An agent turn in flight: it holds the session's turn lock until ``expires_at``."""

    session_id: str
    turn_id: str
    holder: str
    """Who runs the turn: the holder's identity (an agent name, a server replica). A holder
    runs one turn of a session at a time, so it may take over a lease of its own
    (``acquire_turn(take_over=True)``)."""
    expires_at: str
    """``created_at`` form; past it, the lock is free again."""


@dataclass(frozen=True, slots=True)
class Appended:
    """The outcome of one append (without a ``__dict__``: an import makes one per event)."""

    seq: int
    """The event's seq (the first one's, when ``duplicate``)."""
    hash: bytes = field(repr=False)
    """The event's chain hash."""
    duplicate: bool = False
    """True when the idempotency key was already used and nothing was written."""


@dataclass(frozen=True)
class Traced:
    """The outcome of :meth:`TraceLog.append_traced`."""

    appended: list[Appended]
    """One per event, in order, as :meth:`EventLog.append_batch` returns them."""
    traces: list[TraceRow]
    """The trace rows written, with their ids (rows already stored are not among them)."""


TraceBuilder = Callable[[Sequence[Appended], Callable[[], list[Event]]], Sequence[NewTrace]]
"""Builds the trace rows of an append inside its transaction (:meth:`TraceLog.append_traced`):
called with one :class:`Appended` per event of the append (a duplicate with the seq first
stored) and a function that reads the whole session as the transaction sees it, new events
included (for a builder that pairs calls and results over the session); returns the rows."""


Row = tuple[int, str, bytes, bytes, "bytes | None", "bytes | None"]
"""``(seq, created_at, payload, hash, salt, digest)`` of one stored event, undecoded. ``salt``
and ``digest`` are ``None`` in a v1 row; an erased v2 row has payload ``b""`` and salt
``None`` (docs/log-format.md, Chain v2)."""


@dataclass(frozen=True)
class Erasure:
    """What ``agenttrail erase`` did (:meth:`Archive.erase`)."""

    session_id: str
    seqs: list[int]
    """The events whose payload and salt were removed."""
    erasure_seq: int
    """The seq of the chained ``erasure`` event that records it."""


class TraceChain(NamedTuple):
    """A v2 session's trace rows as verify reads them (docs/log-format.md, Chain v2)."""

    version: int
    """The session's chain version (trace rows chain in v2 only)."""
    rows_chained: int
    """``trace_count`` of the session row: how many rows its trace chain has."""
    hash: bytes | None
    """``trace_hash``: the last row's hash, ``None`` with no rows."""
    rows: list[tuple[Any, ...]]
    """Each row's columns in ``NewTrace`` order, then its hash, in the order written."""


class ChainPage(NamedTuple):
    """A page of a session's event rows and its head, read together (for verify)."""

    head: tuple[int, bytes] | None
    """``(head_seq, head_hash)`` from the session row as of this page, ``None`` without a
    row. Appends move it forward between pages; with the page it was read with, it is
    consistent: the page holds no row appended after it."""
    rows: list[Row]
    """The next rows in seq order; fewer than a full page only at the end (maybe none)."""
    version: int = 1
    """The session's chain version, read with the head."""
    start: bytes = bytes(32)
    """``hash_0``: 32 zero bytes in v1, the session's genesis (a digest of its fields) in v2."""
    erased: frozenset[tuple[int, int]] = frozenset()
    """``(seq, erasure_seq)`` of every erasures row of the session, read with the head."""


class AppendListener(Protocol):
    """Tells a live feed that some process appended to the log (PostgreSQL LISTEN/NOTIFY)."""

    def wait(self, timeout: float) -> list[str] | None:
        """Block up to ``timeout`` seconds; the ids of the sessions appended to meanwhile
        (possibly repeated, possibly none), or ``None`` when notifications may have been
        missed (after a reconnect), so that every watched session must be checked."""
        ...

    def close(self) -> None:
        """Stop listening."""
        ...


class EventLog(LogReader, Protocol):
    """Sessions and their events: what importers, the recorder, the CLI and the server write
    and read with.

    Reading sessions, events and trace rows (``get_session``, ``sessions``, ``read``,
    ``traces``, ``trace``) is :class:`agenttrail.model.LogReader`'s part; this role adds
    creating sessions and appending to them.
    """

    url: str
    """Where the log is: ``sqlite:///path``, or the PostgreSQL URL without its password."""
    max_payload_bytes: int
    """Largest payload an append accepts (bytes of canonical CBOR)."""
    redactor: Redactor
    """What every append redacts before it encodes (docs/redaction.md)."""

    def create_session(self, new: NewSession) -> Session:
        """Create a session. Raises ``SessionExists`` if the id is taken, ``InputError`` if it
        does not follow the id rule (``agenttrail.model.SESSION_ID_RULE``)."""
        ...

    def session_ids(self) -> list[str]:
        """Every session's id, in the order they were created, without reading the rest of
        the rows (a row changed by hand is listed too; ``sessions`` would raise)."""
        ...

    def head(self, session_id: str) -> tuple[int, bytes] | None:
        """``(head_seq, head_hash)`` from the session row, ``None`` without a row."""
        ...

    def append(
        self,
        session_id: str,
        payload: dict[str, Any],
        *,
        created_at: str | None = ...,
        key: str | None = ...,
    ) -> Appended:
        """Append one event; seq is allocated inside the transaction. ``created_at`` defaults
        to the time of the append, ``key`` (an idempotency key) to none."""
        ...

    def append_batch(
        self,
        session_id: str,
        events: Sequence[NewEvent],
        *,
        create: NewSession | None = ...,
        unless_turn: bool = ...,
        redacted: bool = ...,
    ) -> list[Appended]:
        """Append events in one transaction, creating the session from ``create`` (default
        ``None``) if missing; with ``unless_turn`` (default False), raise ``TurnInFlight``
        instead while an agent turn holds the lock (checked in the same transaction); with
        ``redacted`` (default False), the caller has found that the store's redactor changes
        none of the events, and they are not run through it again."""
        ...

    def append_group(
        self, batches: Sequence[tuple[str, Sequence[NewEvent], bool]]
    ) -> list[list[Appended] | AgentTrailError]:
        """The appends of independent callers, ``(session_id, events, unless_turn)`` each, in
        one transaction with one commit (group commit); each batch all or nothing and refused
        alone: its outcome is what ``append_batch`` returns, or the error it would raise, in
        the order given, and none is returned before the commit."""
        ...

    def read_rows(self, session_id: str) -> Iterator[Row]:
        """``(seq, created_at, payload bytes, hash)`` of every row, in seq order."""
        ...

    def event_keys(self, session_id: str) -> list[tuple[str, int]]:
        """``(key, seq)`` of every idempotency key of a session, in seq order."""
        ...

    def holds_key(self, session_id: str, prefix: str) -> bool:
        """Whether an idempotency key of the session begins with ``prefix``."""
        ...


class TraceLog(LogReader, Protocol):
    """Trace rows: evidence for tool calls, written beside the events they join
    (``traces`` and ``trace`` read them, from :class:`agenttrail.model.LogReader`)."""

    def add_traces(self, rows: Sequence[NewTrace]) -> list[TraceRow]:
        """Write trace rows in one transaction; a row whose ``(session_id, result_seq)`` is
        already stored is skipped. Returns the rows written.

        Raises:
            InputError: a text field of a row would not be stored as given (nothing written).
        """
        ...

    def append_traced(
        self,
        session_id: str,
        events: Sequence[NewEvent],
        traces: TraceBuilder,
        *,
        create: NewSession | None = ...,
        redacted: bool = ...,
    ) -> Traced:
        """Append events and the trace rows ``traces`` builds from the seqs they get, in one
        transaction: a tool result is never stored without its row, nor a row without its
        result (``redacted`` as in ``append_batch``). Raises what ``append_batch`` and
        ``add_traces`` raise; nothing is written."""
        ...

    def append_chunks(
        self,
        session_id: str,
        chunks: Callable[[], Iterable[Sequence[NewEvent]]],
        traces: TraceBuilder,
        *,
        create: NewSession | None = ...,
        redacted: bool = ...,
    ) -> Traced:
        """``append_traced`` of the events ``chunks()`` yields, appended chunk by chunk as
        they come, in one transaction: for a source too large to hold at once (an import of
        a large export). ``chunks`` is called once per attempt of the transaction (PostgreSQL
        retries one that conflicted) and yields the same events each time. Raises what
        ``append_traced`` raises, and what ``chunks`` raises; nothing is written."""
        ...

    def append_sessions(
        self,
        batches: Sequence[tuple[str, Sequence[NewEvent], NewSession | None]],
        *,
        traces: Sequence[TraceBuilder | None] = ...,
    ) -> list[Traced]:
        """``append_traced`` of each ``(session_id, events, create)`` with ``traces[i]`` (no
        rows where it is ``None`` or missing), all in one transaction: every batch is written
        or none, with one commit (one fsync) for them all."""
        ...


class TurnLocks(Protocol):
    """The turn lock: an agent turn in flight holds a lease on its session, and a user's own
    tool call is refused meanwhile (docs/specs.md, The log). Kept in the database, so that it
    holds across server replicas."""

    def acquire_turn(
        self,
        session_id: str,
        *,
        turn_id: str,
        holder: str,
        ttl_s: float,
        take_over: bool = ...,
    ) -> TurnLease:
        """Take (or renew) the session's turn lock for ``ttl_s`` seconds; with ``take_over``
        (default False), also when another turn of the same ``holder`` holds it.

        Raises ``TurnInFlight`` when another turn holds a lease that has not expired."""
        ...

    def current_turn(self, session_id: str) -> TurnLease | None:
        """The lease in force, or ``None`` when no turn is in flight."""
        ...

    def release_turn(self, session_id: str, turn_id: str) -> None:
        """Give the lock back (a no-op when ``turn_id`` does not hold it)."""
        ...


class Archive(LogReader, Protocol):
    """Whole sessions leaving or entering the log: retention's one sanctioned removal, which
    leaves a tombstone, and the copies ``agenttrail migrate`` writes."""

    def remove_session(self, session_id: str, *, reason: str) -> Tombstone:
        """Remove a whole session with its events and trace rows, leaving a tombstone."""
        ...

    def scrub(self) -> None:
        """After sessions were removed, make their text leave the database's files where the
        backend can. SQLite: the search index's FTS5 tables are merged whole, since FTS5 keeps
        a deleted row's tokens in its segments until they merge, and the WAL is checkpointed
        and truncated. PostgreSQL: nothing (``VACUUM FULL``, docs/log-format.md, Erasure).
        A rewrite of the index, in proportion to the log: once after a batch of removals."""
        ...

    def tombstones(self) -> list[Tombstone]:
        """Every tombstone, oldest first."""
        ...

    def erase(self, session_id: str, seqs: Sequence[int], *, by: str, reason: str) -> Erasure:
        """Remove the payload bytes and salt of events of a v2 session, appending a chained
        ``erasure`` event that says who, when, why and which seqs; the chain stays whole.

        Raises:
            SessionNotFound: no such session.
            InputError: the session is v1, a seq is not an event of it, is already erased,
                is an erasure event, or has a trace row (its envelope holds the bytes).
        """
        ...

    def erasures(self, session_id: str) -> list[tuple[int, int]]:
        """``(seq, erasure_seq)`` of every erased event of a session, in seq order."""
        ...

    def copy_session(
        self,
        session: Session,
        rows: Iterable[Row],
        *,
        keys: Sequence[tuple[str, int]] = ...,
        erasures: Sequence[tuple[int, int]] = ...,
    ) -> int:
        """Write a session copied from another log, in one transaction (``agenttrail migrate``).

        Creates the session row if missing (same id, fields, ``created_at`` and chain
        version), then writes each row after this log's head of the session, with the same
        seq, time, payload bytes, salt and digest, recomputing each hash, the keys (``(key,
        seq)`` pairs, default none) and the erasures (``(seq, erasure_seq)``, default none).
        A row here that an erasure names whose event is here by then is erased as
        :meth:`erase` leaves it (an earlier copy, made before the source erased it).

        Returns:
            How many rows were written (0 when the session was already here up to them).

        Raises:
            ChainBroken: a row does not continue the chain (a gap, or a hash that is not the
                recomputed one): nothing is written.
            SessionExists: the id was removed here by retention.
            InputError: the session is not here and its id does not follow the id rule
                (``agenttrail.model.SESSION_ID_RULE``): nothing is written.
        """
        ...

    def copy_tombstone(self, stone: Tombstone) -> bool:
        """Keep a tombstone copied from another log; False when it is already here.

        Raises:
            AppendOnlyViolation: a live session here has that id.
        """
        ...

    def event_session_ids(self) -> set[str]:
        """Every session id that has at least one event row."""
        ...


class LogStore(EventLog, TraceLog, TurnLocks, Archive, ChainReader, SearchIndex, Protocol):
    """The whole store: every role and the search index (:mod:`agenttrail.model.search`),
    plus the live feed's listener and closing.

    ``sqlite.py`` and ``postgres.py`` implement it on the shared base (``_base.py``);
    ``tests/log/test_store_contract.py`` runs the contract against both (the ``store`` and
    ``db_url`` fixtures), so the contract is what those tests say. A caller that needs less
    takes the narrowest role: :class:`EventLog`, :class:`TraceLog`, :class:`TurnLocks`,
    :class:`Archive`, or :class:`agenttrail.log.chain.ChainReader` for ``chain_pages``.
    """

    def listen(self) -> AppendListener | None:
        """A listener that wakes on appends by any process, or ``None`` when the backend
        has none (SQLite: the live feed polls session heads instead)."""
        ...

    def snapshot(self, session_ids: Sequence[str]) -> SessionsSnapshot:
        """What the reads of a page of sessions (at most :data:`SNAPSHOT_SESSIONS`) return,
        read in one snapshot with a statement per table, not per session: a ``LogReader``
        and ``ChainReader`` of those sessions, and their turn locks (``_snapshot.py``).

        Raises:
            StoreError: the rows cannot be read.
        """
        ...

    def close(self) -> None:
        """Release the connections; further calls fail."""
        ...

    def __enter__(self) -> LogStore:
        """Use as a context manager; ``close`` on exit."""
        ...

    def __exit__(self, *exc: object) -> None: ...


def open_store(
    url: str | os.PathLike[str] | None = None,
    *,
    create: bool = True,
    max_payload_bytes: int | None = None,
    redact: RedactRules | bool | None = None,
) -> LogStore:
    """Open the log at ``url``.

    Args:
        url: ``sqlite:///path``, a plain file path, ``postgresql://user@host:port/dbname``
            (``postgres://`` too; ``?schema=NAME`` picks the schema, default ``public``), or
            ``None`` for ``AGENTTRAIL_DATABASE_URL`` and then ``./agenttrail.db``
            (flags override the environment).
        create: when False, a database file that does not exist is an error instead of
            being created (read-only commands).
        max_payload_bytes: payload limit in bytes; default ``AGENTTRAIL_MAX_PAYLOAD_BYTES``
            or :data:`DEFAULT_MAX_PAYLOAD_BYTES`.
        redact: what appends redact (docs/redaction.md): rules, ``False`` for verbatim
            payloads, or ``None`` for ``AGENTTRAIL_REDACT`` and the ``[redact]`` table of
            ``AGENTTRAIL_REDACT_CONFIG`` or ``./agenttrail.toml`` (default: on, built-in rules).

    Raises:
        InputError: the URL names a backend this build cannot open, the limit is not a
            positive integer, or the redaction config is not valid (naming file and key).
        StoreError: the database cannot be opened or reached, refuses the login, or is not
            an agenttrail log; one line naming the file, or the host and database (never
            the password).
    """
    from agenttrail.log.store.sqlite import SQLiteStore

    text = _url_of(url)
    limit = payload_limit(max_payload_bytes)
    rules = redact_rules(redact)
    path = sqlite_path(text)
    if path is not None:
        return SQLiteStore(path, create=create, max_payload_bytes=limit, redact=rules)
    scheme = text.partition("://")[0]
    if scheme in ("postgresql", "postgres"):
        from agenttrail.log.store.postgres import PostgresStore

        return PostgresStore(text, create=create, max_payload_bytes=limit, redact=rules)
    raise InputError(
        f"database URL {scheme}://…: unknown scheme {scheme!r} "
        "(use sqlite:///path or postgresql://user@host/dbname)"
    )


def sqlite_path(url: str | os.PathLike[str] | None) -> Path | None:
    """The SQLite file ``url`` names as :func:`open_store` reads it (``None``: the default,
    ``AGENTTRAIL_DATABASE_URL`` then ``./agenttrail.db``), or ``None`` for another backend.

    Raises:
        InputError: a ``sqlite://`` URL without its third slash.
    """
    text = _url_of(url)
    scheme, sep, rest = text.partition("://")
    if not sep:
        return Path(text)
    if scheme != "sqlite":
        return None
    if not rest.startswith("/"):
        raise InputError(f"database URL {text!r}: expected sqlite:///path")
    return Path(rest[1:])


def _url_of(url: str | os.PathLike[str] | None) -> str:
    """``url`` as text, else ``AGENTTRAIL_DATABASE_URL``, else :data:`DEFAULT_DATABASE`."""
    text = os.fspath(url) if url is not None else os.environ.get("AGENTTRAIL_DATABASE_URL", "")
    return text or DEFAULT_DATABASE


def payload_limit(max_payload_bytes: int | None = None) -> int:
    """The payload limit in bytes: the argument, else ``AGENTTRAIL_MAX_PAYLOAD_BYTES``, else
    :data:`DEFAULT_MAX_PAYLOAD_BYTES`.

    Raises:
        InputError: the limit is not a positive integer.
    """
    variable = "AGENTTRAIL_MAX_PAYLOAD_BYTES"
    return byte_limit(max_payload_bytes, variable, DEFAULT_MAX_PAYLOAD_BYTES, "payload limit")
