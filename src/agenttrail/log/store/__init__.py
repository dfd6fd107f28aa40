"""The store: sessions and their append-only event rows, as bytes.

The store knows bytes and sessions, not formats (docs/architecture.md). Payloads are
encoded by :mod:`agenttrail.codec` before they reach SQL; every reader of the log goes through
:meth:`LogStore.read`, :meth:`LogStore.read_rows` or :meth:`LogStore.chain_pages`. One
protocol, one module per backend.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple, Protocol

from agenttrail.errors import InputError
from agenttrail.model import Event, NewEvent, NewSession, NewTrace, Session, TraceRow

__all__ = [
    "DEFAULT_DATABASE",
    "DEFAULT_MAX_PAYLOAD_BYTES",
    "AppendListener",
    "Appended",
    "ChainPage",
    "LogStore",
    "Row",
    "Tombstone",
    "TurnLease",
    "open_store",
    "payload_limit",
]

DEFAULT_DATABASE = "agenttrail.db"
"""Where the log lives when neither ``--db`` nor ``AGENTTRAIL_DATABASE_URL`` says otherwise."""

DEFAULT_MAX_PAYLOAD_BYTES = 16 * 1024 * 1024
"""Largest payload stored whole (16 MiB of CBOR). A whole file read by a tool fits; a runaway
loop that dumps a disk image does not, and fails loudly instead of bloating the log."""


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
    """Who runs the turn (an agent name, a server replica)."""
    expires_at: str
    """``created_at`` form; past it, the lock is free again."""


@dataclass(frozen=True)
class Appended:
    """The outcome of one append."""

    seq: int
    """The event's seq (the first one's, when ``duplicate``)."""
    hash: bytes = field(repr=False)
    """The event's chain hash."""
    duplicate: bool = False
    """True when the idempotency key was already used and nothing was written."""


Row = tuple[int, str, bytes, bytes]
"""``(seq, created_at, payload, hash)`` of one stored event, undecoded."""


class ChainPage(NamedTuple):
    """A page of a session's event rows and its head, read together (for verify)."""

    head: tuple[int, bytes] | None
    """``(head_seq, head_hash)`` from the session row as of this page, ``None`` without a
    row. Appends move it forward between pages; with the page it was read with, it is
    consistent: the page holds no row appended after it."""
    rows: list[Row]
    """The next rows in seq order; fewer than a full page only at the end (maybe none)."""


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


class LogStore(Protocol):
    """The store contract every backend implements: ``sqlite.py`` and ``postgres.py``.

    ``tests/conftest.py`` runs the store tests against both (the ``store`` and ``db_url``
    fixtures), so the contract is what those tests say.
    """

    url: str
    max_payload_bytes: int

    def create_session(self, new: NewSession) -> Session:
        """Create a session. Raises ``SessionExists`` if the id is taken."""
        ...

    def get_session(self, session_id: str) -> Session:
        """The session row. Raises ``SessionNotFound``."""
        ...

    def sessions(self) -> list[Session]:
        """Every session, oldest first."""
        ...

    def append(
        self,
        session_id: str,
        payload: dict[str, Any],
        *,
        created_at: str | None = None,
        key: str | None = None,
    ) -> Appended:
        """Append one event; seq is allocated inside the transaction."""
        ...

    def append_batch(
        self,
        session_id: str,
        events: Sequence[NewEvent],
        *,
        create: NewSession | None = None,
        unless_turn: bool = False,
    ) -> list[Appended]:
        """Append events in one transaction, creating the session from ``create`` if missing;
        with ``unless_turn``, raise ``TurnInFlight`` instead while an agent turn holds the lock
        (checked in the same transaction)."""
        ...

    def read(
        self, session_id: str, *, after_seq: int = 0, limit: int | None = None
    ) -> Iterator[Event]:
        """Events with seq > ``after_seq`` in seq order, at most ``limit``."""
        ...

    def read_rows(self, session_id: str) -> Iterator[Row]:
        """``(seq, created_at, payload bytes, hash)`` of every row, in seq order."""
        ...

    def chain_pages(self, session_id: str) -> AbstractContextManager[Iterator[ChainPage]]:
        """Every event row of a session in seq order, a page at a time, each page with the
        session head read together with it (for verify). At least one page, maybe empty.

        Rows are append-only, so the head that comes with the last page accounts for every
        row read: appends that run meanwhile neither show up as rows beyond the head nor
        move the head past the rows. The pages are readable only inside the ``with`` block
        (SQLite: one read transaction on a connection of its own, so writers go on in WAL
        mode; PostgreSQL: one statement per page).
        """
        ...

    def head(self, session_id: str) -> tuple[int, bytes] | None:
        """``(head_seq, head_hash)`` from the session row, ``None`` without a row."""
        ...

    def event_session_ids(self) -> set[str]:
        """Every session id that has at least one event row."""
        ...

    def event_keys(self, session_id: str) -> list[tuple[str, int]]:
        """``(key, seq)`` of every idempotency key of a session, in seq order."""
        ...

    def copy_session(
        self,
        session: Session,
        rows: Iterable[Row],
        *,
        keys: Sequence[tuple[str, int]] = (),
    ) -> int:
        """Write a session copied from another log, in one transaction (``agenttrail migrate``).

        Creates the session row if missing (same id, fields and ``created_at``), then writes
        each ``(seq, created_at, payload, hash)`` row after this log's head of the session,
        with the same seq, time and payload bytes, recomputing each hash, and the keys.

        Returns:
            How many rows were written (0 when the session was already here up to them).

        Raises:
            ChainBroken: a row does not continue the chain (a gap, or a hash that is not the
                recomputed one): nothing is written.
            SessionExists: the id was removed here by retention.
        """
        ...

    def copy_tombstone(self, stone: Tombstone) -> bool:
        """Keep a tombstone copied from another log; False when it is already here.

        Raises:
            AppendOnlyViolation: a live session here has that id.
        """
        ...

    def add_traces(self, rows: Sequence[NewTrace]) -> list[TraceRow]:
        """Write trace rows in one transaction; a row whose ``(session_id, result_seq)`` is
        already stored is skipped. Returns the rows written."""
        ...

    def traces(self, session_id: str, *, turn_seq: int | None = None) -> list[TraceRow]:
        """A session's trace rows in result order, or only one turn's."""
        ...

    def trace(self, trace_id: int) -> TraceRow:
        """One trace row. Raises ``InputError`` when there is none with that id."""
        ...

    def acquire_turn(
        self, session_id: str, *, turn_id: str, holder: str, ttl_s: float
    ) -> TurnLease:
        """Take (or renew) the session's turn lock for ``ttl_s`` seconds.

        Raises ``TurnInFlight`` when another turn holds a lease that has not expired."""
        ...

    def current_turn(self, session_id: str) -> TurnLease | None:
        """The lease in force, or ``None`` when no turn is in flight."""
        ...

    def release_turn(self, session_id: str, turn_id: str) -> None:
        """Give the lock back (a no-op when ``turn_id`` does not hold it)."""
        ...

    def remove_session(self, session_id: str, *, reason: str) -> Tombstone:
        """Remove a whole session with its events and trace rows, leaving a tombstone."""
        ...

    def tombstones(self) -> list[Tombstone]:
        """Every tombstone, oldest first."""
        ...

    def listen(self) -> AppendListener | None:
        """A listener that wakes on appends by any process, or ``None`` when the backend
        has none (SQLite: the live feed polls session heads instead)."""
        ...

    def close(self) -> None:
        """Release the connection."""
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

    Raises:
        InputError: the URL names a backend this build cannot open, or the limit is not a
            positive integer.
        StoreError: the database cannot be opened or reached, refuses the login, or is not
            an agenttrail log; one line naming the file, or the host and database (never
            the password).
    """
    from agenttrail.log.store.sqlite import SQLiteStore

    text = os.fspath(url) if url is not None else os.environ.get("AGENTTRAIL_DATABASE_URL", "")
    text = text or DEFAULT_DATABASE
    limit = payload_limit(max_payload_bytes)
    scheme, sep, rest = text.partition("://")
    if not sep:
        return SQLiteStore(Path(text), create=create, max_payload_bytes=limit)
    if scheme == "sqlite":
        if not rest.startswith("/"):
            raise InputError(f"database URL {text!r}: expected sqlite:///path")
        return SQLiteStore(Path(rest[1:]), create=create, max_payload_bytes=limit)
    if scheme in ("postgresql", "postgres"):
        from agenttrail.log.store.postgres import PostgresStore

        return PostgresStore(text, create=create, max_payload_bytes=limit)
    raise InputError(
        f"database URL {scheme}://…: unknown scheme {scheme!r} "
        "(use sqlite:///path or postgresql://user@host/dbname)"
    )


def payload_limit(max_payload_bytes: int | None = None) -> int:
    """The payload limit in bytes: the argument, else ``AGENTTRAIL_MAX_PAYLOAD_BYTES``, else
    :data:`DEFAULT_MAX_PAYLOAD_BYTES`.

    Raises:
        InputError: the limit is not a positive integer.
    """
    limit = max_payload_bytes
    if limit is None:
        raw = os.environ.get("AGENTTRAIL_MAX_PAYLOAD_BYTES")
        try:
            limit = DEFAULT_MAX_PAYLOAD_BYTES if raw is None else int(raw)
        except ValueError:
            raise InputError(f"AGENTTRAIL_MAX_PAYLOAD_BYTES={raw!r} is not an integer") from None
    if limit <= 0:
        raise InputError(f"the payload limit must be a positive number of bytes, not {limit}")
    return limit
