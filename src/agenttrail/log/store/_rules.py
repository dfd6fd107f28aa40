"""The rules every backend applies alike: what may be stored, and the chaining of an append.

What an append *means* — which input is refused before any lock is taken, which events are
duplicates of an idempotency key, which seq and chain hash each new event gets — and how a
stored row turns back into a :class:`Session` or :class:`TraceRow` is decided here, once, so
the two backends cannot drift apart (docs/architecture.md, Layer rules). The SQL that runs
these is in ``_base.py``; what differs per backend is in ``sqlite.py`` and ``postgres.py``.
"""

from __future__ import annotations

import dataclasses
import json
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, TypeVar, cast

from agenttrail.codec import encode_payload
from agenttrail.errors import (
    EventRowDamaged,
    InputError,
    PayloadTooLarge,
    SessionRowDamaged,
    StoreError,
)
from agenttrail.log.chain import GENESIS_HASH, chain_hasher, stored_type
from agenttrail.log.digests import (
    SALT_BYTES,
    chain_rows_v2,
    new_salt,
    session_genesis,
)
from agenttrail.log.store import Appended, ChainPage, Row
from agenttrail.model import (
    Event,
    NewEvent,
    NewSession,
    NewTrace,
    Session,
    TraceRow,
    check_session_id,
)

__all__ = [
    "BIGINT",
    "ERASURE",
    "SESSION_TEXT_FIELDS",
    "START_COLUMNS",
    "TRACE_FIELDS",
    "TRACE_TEXT_FIELDS",
    "Chained",
    "Encoded",
    "as_new_session",
    "chain_events",
    "chain_start",
    "check_chain_version",
    "check_created_at",
    "check_new_session",
    "check_reason",
    "check_session",
    "check_session_fields",
    "check_text",
    "check_trace",
    "encode_events",
    "event_of",
    "new_events",
    "session_from_row",
    "stored_head",
    "stored_trace",
    "trace_row",
    "with_id",
]

SESSION_TEXT_FIELDS = ("title", "agent", "user", "workspace", "started")
"""Optional text columns of a session row."""

TRACE_FIELDS = tuple(f.name for f in dataclasses.fields(NewTrace))
"""Columns of a trace row, in :class:`NewTrace` order (the id comes last when read)."""

TRACE_TEXT_FIELDS = tuple(
    f.name for f in dataclasses.fields(NewTrace) if f.type in ("str", "str | None")
)
"""Text columns of a trace row."""


S = TypeVar("S", NewSession, NewSession | None)


class Encoded(NamedTuple):
    """One event ready for the store."""

    data: bytes
    """The payload's canonical CBOR."""
    created_at: str | None
    key: str | None
    salt: bytes | None
    """A v2 salt given by the caller (an import reproducing an export), else ``None``."""


BIGINT = range(-(2**63), 2**63)
"""The integers a seq or an id column holds on both backends (SQLite's INTEGER, PostgreSQL's
BIGINT): one outside them names no row, and binding it fails (``OverflowError``)."""

ERASURE = "erasure"
"""The ``type`` of the event an erasure appends (who, when, why, which seqs); only the store
writes it (:meth:`agenttrail.log.store.Archive.erase`), so an append of one is refused."""


def stored_head(session_id: str, head_seq: Any, head_hash: Any) -> tuple[int, bytes]:
    """A session row's ``(head_seq, head_hash)``, checked: SQLite keeps whatever type a hand
    edit wrote, and a head that is not an integer and 32 bytes would fail later, unnamed.

    Raises:
        SessionRowDamaged: naming the session and the column (the row was changed by hand).
    """
    if type(head_seq) is not int:
        raise SessionRowDamaged(session_id, f"head_seq {head_seq!r} is not an integer")
    if not isinstance(head_hash, bytes) or len(head_hash) != 32:
        raise SessionRowDamaged(session_id, f"head_hash {head_hash!r} is not 32 bytes")
    return head_seq, head_hash


def session_from_row(values: Sequence[Any]) -> Session:
    """The ``Session`` of a sessions row read as ``id, title, agent, user, workspace, started,
    metadata, created_at, head_seq, head_hash`` (both backends select these columns).

    Raises:
        SessionRowDamaged: the metadata is not a JSON object, or the head is not well-formed
            (the row was changed by hand).
    """
    session_id = values[0]
    try:
        metadata = {} if values[6] == "{}" else json.loads(values[6])  # most rows: none
    except (TypeError, ValueError):
        metadata = None
    if not isinstance(metadata, dict):
        raise SessionRowDamaged(session_id, "metadata is not a JSON object")
    head_seq, head_hash = stored_head(session_id, values[8], values[9])
    version = check_chain_version(session_id, values[10])
    title, agent, user, workspace, started = values[1:6]
    return Session.stored(
        session_id,
        title,
        agent,
        user,
        workspace,
        started,
        metadata,
        values[7],
        head_seq,
        head_hash,
        version,
    )


START_COLUMNS = (
    'head_seq, head_hash, chain_version, title, agent, "user", workspace, started, metadata'
)
"""What :func:`chain_start` reads of a session row: its head, chain version and the fields
a v2 genesis covers, in that order."""


def chain_start(
    session_id: str, row: Sequence[Any] | None, erasures: Sequence[Sequence[Any]]
) -> ChainPage:
    """The first page of ``verify`` without its rows: the head, the chain version, ``hash_0``
    and the erasures, from a session row read as :data:`START_COLUMNS` (``None``: no row)
    and its erasures rows ``(seq, erasure_seq)``, all read in one snapshot.

    Raises:
        SessionRowDamaged: the head or the chain version was changed by hand.
    """
    erased = frozenset((seq, by) for seq, by in erasures)
    if row is None:
        return ChainPage(None, [], erased=erased)
    head = stored_head(session_id, row[0], row[1])
    version = check_chain_version(session_id, row[2])
    start = session_genesis(session_id, row[3:9]) if version == 2 else GENESIS_HASH
    return ChainPage(head, [], version, start, erased)


def check_chain_version(session_id: str, version: Any) -> int:
    """A session's ``chain_version``, checked: 1 or 2.

    Raises:
        SessionRowDamaged: any other value (the row was changed by hand).
    """
    if type(version) is not int or version not in (1, 2):
        raise SessionRowDamaged(session_id, f"chain_version {version!r} is not 1 or 2")
    return version


def event_of(session_id: str, row: Row) -> Event:
    """The :class:`Event` of a stored row ``(seq, created_at, payload, hash, salt, digest)``.

    Raises:
        EventRowDamaged: a column holds another type than the store writes (text in a
            BLOB column, text for the seq): a row changed by hand.
    """
    seq, created_at, data, digest, salt, payload_hash = row
    if (
        type(seq) is not int
        or type(created_at) is not str
        or type(data) is not bytes
        or type(digest) is not bytes
        or (salt is not None and type(salt) is not bytes)
        or (payload_hash is not None and type(payload_hash) is not bytes)
    ):
        raise EventRowDamaged(session_id, seq, _damage(row))
    return Event.stored(session_id, seq, created_at, data, digest, salt, payload_hash)


def _damage(row: Row) -> str:
    """What is wrong with a row :func:`event_of` refused: its first column of another type
    than the store writes (``payload is text, not bytes``)."""
    for column, value, kind in zip(_COLUMNS, row, _KINDS, strict=True):
        if type(value) is not kind and not (value is None and column in _NULLABLE):
            return f"{column} is {stored_type(value)}, not {stored_type(kind())}"
    raise AssertionError("event_of refused a sound row")


_COLUMNS = ("seq", "created_at", "payload", "hash", "salt", "digest")
_KINDS = (int, str, bytes, bytes, bytes, bytes)
_NULLABLE = frozenset({"salt", "digest"})
"""An event row's columns as :func:`event_of` reads them, the type the store writes in each,
and those NULL in a v1 or erased row."""


def encode_events(events: Sequence[NewEvent], max_payload_bytes: int) -> list[Encoded]:
    """Encode each payload (unless the event brings its bytes, :attr:`NewEvent.data`) and check
    it before any lock is taken (nothing is written on error).

    Raises:
        PayloadError: a payload would not round-trip.
        PayloadTooLarge: a payload is above ``max_payload_bytes`` (bytes of CBOR).
        InputError: a ``created_at`` is not in the store's form, or a key is not text.
    """
    encoded: list[Encoded] = []
    for event in events:
        data = event.data if event.data is not None else encode_payload(event.payload)
        if len(data) > max_payload_bytes:
            raise PayloadTooLarge(len(data), max_payload_bytes)
        created_at, key, salt = event.created_at, event.key, event.salt
        if created_at is not None:
            check_created_at(created_at)
        if key is not None:
            check_text("idempotency key", key)
        if event.has_type(ERASURE):
            raise InputError(
                "a payload of type 'erasure' is written only by agenttrail erase "
                "(docs/log-format.md, Erasure)"
            )
        if salt is not None and (type(salt) is not bytes or len(salt) != SALT_BYTES):
            raise InputError(f"a salt is {SALT_BYTES} bytes, not {salt!r}")
        encoded.append(Encoded(data, created_at, key, salt))
    return encoded


def new_events(encoded: Sequence[Encoded], stored: Mapping[str, Appended]) -> int:
    """How many of ``encoded`` an append writes: every event without a key, and the first
    event of each key that is not in ``stored`` (the session's keys already written)."""
    seen: set[str] = set()
    count = 0
    for event in encoded:
        key = event.key
        if key is None:
            count += 1
        elif key not in stored and key not in seen:
            seen.add(key)
            count += 1
    return count


@dataclass(frozen=True)
class Chained:
    """What an append writes, decided before any row is inserted."""

    results: list[Appended]
    """One per event given, in order (duplicates carry the first seq and ``duplicate``)."""
    rows: list[Row]
    """``(seq, created_at, payload, hash, salt, digest)`` of each new event, in seq order."""
    keys: list[tuple[str, int]]
    """``(key, seq)`` of each new keyed event."""
    head_seq: int
    """The session's head after the append."""
    head_hash: bytes
    """Its chain hash."""


def chain_events(
    session_id: str,
    encoded: Sequence[Encoded],
    *,
    head_seq: int,
    head_hash: bytes,
    stored: Mapping[str, Appended],
    now: str,
    version: int,
) -> Chained:
    """Give each new event of an append its seq (``head_seq + 1`` …) and chain hash.

    Must run while the backend holds the session's append lock, with ``stored`` read under
    the same lock, so that the seqs are the next ones and no key is written twice.

    Args:
        session_id: the session.
        encoded: the events (:func:`encode_events`).
        head_seq: the session's head seq before the append.
        head_hash: its chain hash (``GENESIS_HASH`` when empty).
        stored: the session's keys already written, among those of ``encoded``.
        now: ``created_at`` of events that do not bring their own.
        version: the session's chain version: 1 hashes the payload bytes, 2 a digest of
            the payload with a salt (the event's own, else a fresh one).
    """
    first = head_seq + 1
    new: list[tuple[str, bytes, bytes | None]] = []  # (created_at, payload, salt) of new rows
    placed: list[Appended | int] | None = None  # per event: what was stored, or its row
    keys: list[tuple[str, int]] = []
    if any(event.key is not None for event in encoded):
        placed, keys = _place_keyed(encoded, stored, first, now, new)
    else:  # each event a new row (an import of an export, most recorders)
        new = [(created_at or now, data, salt) for data, created_at, _, salt in encoded]
    seqs = range(first, first + len(new))
    rows: list[Row] = []
    if version == 1:
        hash_v1 = chain_hasher(session_id)
        prev = head_hash
        for seq, (created_at, data, _) in zip(seqs, new, strict=True):
            prev = hash_v1(prev, seq, created_at, data)
            rows.append((seq, created_at, data, prev, None, None))
        hashes = [row[3] for row in rows]
    else:  # all rows at once: in C (digests.chain_rows_v2)
        salted = _salted(new)
        digests, hashes = chain_rows_v2(session_id, head_hash, first, salted)
        rows = [
            (seq, created_at, data, hashed, salt, digest)
            for seq, (created_at, data, salt), hashed, digest in zip(
                seqs, salted, hashes, digests, strict=True
            )
        ]
    if placed is None:
        results = [Appended(seq, hashed) for seq, hashed in zip(seqs, hashes, strict=True)]
    else:
        results = [
            place
            if isinstance(place, Appended)
            else Appended(first + place, hashes[place])
            if place >= 0
            else Appended(first + ~place, hashes[~place], duplicate=True)
            for place in placed
        ]
    return Chained(results, rows, keys, head_seq + len(new), hashes[-1] if new else head_hash)


def _salted(new: list[tuple[str, bytes, bytes | None]]) -> list[tuple[str, bytes, bytes]]:
    """``(created_at, payload, salt)`` of new v2 rows, with a fresh salt for each row that
    brings none (``new`` itself when every row brings its own: an import of an export)."""
    if all(salt is not None for _, _, salt in new):
        return cast(list[tuple[str, bytes, bytes]], new)
    return [(c, d, s or new_salt()) for c, d, s in new]


def _place_keyed(
    encoded: Sequence[Encoded],
    stored: Mapping[str, Appended],
    first: int,
    now: str,
    new: list[tuple[str, bytes, bytes | None]],
) -> tuple[list[Appended | int], list[tuple[str, int]]]:
    """Which events of a batch that holds idempotency keys are new rows (appended to
    ``new`` as ``(created_at, payload, salt)``): per event, what was stored under its key,
    its row in ``new``, or ``~row`` for a second event of the batch with the key of that
    row; and ``(key, seq)`` of each new keyed row."""
    placed: list[Appended | int] = []
    keys: list[tuple[str, int]] = []
    batch_keys: dict[str, int] = {}
    for data, created_at, key, given_salt in encoded:
        if key is not None:
            hit = stored.get(key)
            if hit is not None:
                placed.append(hit)
                continue
            row = batch_keys.get(key)
            if row is not None:
                placed.append(~row)
                continue
            batch_keys[key] = len(new)
            keys.append((key, first + len(new)))
        placed.append(len(new))
        new.append((created_at or now, data, given_salt))
    return placed, keys


def as_new_session(session: Session) -> NewSession:
    """The :class:`NewSession` that creates a copy of ``session`` (its id and fields)."""
    return NewSession(
        session.id,
        session.title,
        session.agent,
        session.user,
        session.workspace,
        session.started,
        session.metadata,
        session.chain_version,
    )


def with_id(new: NewSession, session_id: str) -> NewSession:
    """``new`` with its id replaced."""
    return dataclasses.replace(new, id=session_id)


def check_session_fields(new: S) -> S:
    """``new``, a session to create or ``None``; raise ``InputError`` when a text field would
    not be stored as given (its id is checked where the row is inserted:
    :func:`check_new_session`)."""
    for name in SESSION_TEXT_FIELDS if new is not None else ():
        value = getattr(new, name)
        if value is not None:
            check_text(f"session {name}", value)
    return new


def check_new_session(new: NewSession) -> str:
    """Check a session to create; returns its id (a new UUID when ``new.id`` is ``None``).

    Raises:
        InputError: the id does not follow the id rule (:data:`agenttrail.model.SESSION_ID_RULE`,
            docs/log-format.md), or a text field would not be stored as given.
    """
    session_id = check_session_id(new.id if new.id is not None else str(uuid.uuid4()))
    check_session_fields(new)
    return session_id


def check_session(session: Session) -> None:
    """Check a session row copied from another log (:meth:`LogStore.copy_session`). Its id
    was given by that log, perhaps before the id rule: the rule is applied only if the copy
    creates the session here (:func:`check_new_session`)."""
    check_text("session id", session.id)
    check_session_fields(as_new_session(session))
    check_created_at(session.created_at)


def check_trace(row: NewTrace) -> None:
    """Raise ``InputError`` when a text field of a trace row would not be stored as given."""
    for name in TRACE_TEXT_FIELDS:
        value = getattr(row, name)
        if value is not None:
            check_text(f"trace row {name}", value)


def check_text(what: str, value: object) -> None:
    """Raise ``InputError`` unless ``value`` is text both backends store as given.

    Session fields, keys and trace-row text are database text: valid Unicode without lone
    surrogates (not UTF-8) and without NUL (PostgreSQL text cannot hold U+0000). Payloads
    have no such limit; they are CBOR bytes (``docs/log-format.md``, Lossless text).
    """
    if not is_text(value):
        raise InputError(f"{what} {value!r} is not valid Unicode text")
    assert isinstance(value, str)
    if "\x00" in value:
        raise InputError(
            f"{what} {value!r} holds a NUL character, which a database text column cannot store"
        )


def check_reason(what: str, value: object) -> None:
    """Raise ``InputError`` unless ``value`` is text (:func:`check_text`) that says
    something: an erasure and a tombstone keep why they were made, for an auditor."""
    check_text(what, value)
    assert isinstance(value, str)
    if not value.strip():
        raise InputError(f"the {what} is blank: say why (it is kept for an auditor)")


def is_text(value: object) -> bool:
    """True for a ``str`` that a database can store as text: no lone surrogates."""
    if not isinstance(value, str):
        return False
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def check_created_at(created_at: str) -> None:
    """Raise ``InputError`` unless ``created_at`` is in the 27-character form the store writes."""
    if (
        not isinstance(created_at, str)
        or len(created_at) != 27
        or not created_at.endswith("Z")
        or not created_at.isascii()
    ):
        raise InputError(
            f"created_at {created_at!r} is not in YYYY-MM-DDTHH:MM:SS.ffffffZ form "
            "(use agenttrail.codec.normalize_timestamp)"
        )


def stored_trace(row: NewTrace, trace_id: int) -> TraceRow:
    """``row`` as stored under ``trace_id``."""
    return TraceRow(**{name: getattr(row, name) for name in TRACE_FIELDS}, id=trace_id)


def trace_row(values: Sequence[Any]) -> TraceRow:
    """A :class:`TraceRow` from its columns in :data:`TRACE_FIELDS` order, then the id.

    Raises:
        StoreError: the envelope is not bytes (the row was changed by hand), naming the row.
    """
    fields = dict(zip(TRACE_FIELDS, values[:-1], strict=True))
    envelope = fields["envelope"]
    if not isinstance(envelope, bytes | bytearray | memoryview):
        raise StoreError(
            f"session {fields['session_id']!r}: trace {values[-1]}: envelope is "
            f"{stored_type(envelope)}, not bytes"
        )
    fields["envelope"] = bytes(envelope)
    return TraceRow(**fields, id=values[-1])
