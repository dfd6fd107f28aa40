"""The per-session hash chain and ``verify``.

Every event's ``hash`` commits to the previous event's hash and to the row's stored bytes
(DESIGN.md §The log; byte layout in ``docs/log-format.md``)::

    hash_n = SHA-256( CHAIN_TAG                      20 bytes, b"agenttrail-chain-v1\\x00"
                    ‖ hash_{n-1}                     32 bytes; hash_0 = 32 zero bytes
                    ‖ seq                            8 bytes, unsigned big-endian
                    ‖ len(created_at) ‖ created_at   4-byte big-endian length, ASCII text
                    ‖ len(session_id) ‖ session_id   4-byte big-endian length, UTF-8 text
                    ‖ len(payload)    ‖ payload      8-byte big-endian length, the CBOR bytes )

The session row keeps the head (last seq, last hash), so a removed last event is caught too.
Whoever owns the database file can recompute the whole chain; signed checkpoints kept
elsewhere are what pins a head (issue 4).
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agenttrail.store import LogStore

__all__ = [
    "CHAIN_TAG",
    "GENESIS_HASH",
    "ChainHasher",
    "SessionVerdict",
    "chain_hasher",
    "event_hash",
    "verify",
]

CHAIN_TAG = b"agenttrail-chain-v1\x00"
"""Domain-separation tag that opens every hashed preimage (20 bytes)."""

GENESIS_HASH = bytes(32)
"""``hash_0``: the previous hash of a session's first event."""

_sha256 = hashlib.sha256
_pack_seq = struct.Struct(">Q").pack
_pack_u32 = struct.Struct(">I").pack
_CREATED_AT_LEN = 27  # YYYY-MM-DDTHH:MM:SS.ffffffZ, the only form the store writes

ChainHasher = Callable[[bytes, int, str, bytes], bytes]
"""``(prev_hash, seq, created_at, payload) -> hash`` for one session."""


def chain_hasher(session_id: str) -> ChainHasher:
    """A hash function for the rows of one session (layout in the module docstring).

    The session's part of the preimage is packed once, so hashing a row costs one
    ``struct.pack`` and one SHA-256: appends and ``verify`` run this per event.
    """
    sid = session_id.encode("utf-8")
    pack = struct.Struct(f">{len(CHAIN_TAG)}s32sQI{_CREATED_AT_LEN}sI{len(sid)}sQ").pack

    def hash_row(prev_hash: bytes, seq: int, created_at: str, payload: bytes) -> bytes:
        created = created_at.encode("ascii")
        if len(created) != _CREATED_AT_LEN or len(prev_hash) != 32:
            return _hash_any(prev_hash, seq, created, sid, payload)
        head = pack(
            CHAIN_TAG, prev_hash, seq, _CREATED_AT_LEN, created, len(sid), sid, len(payload)
        )
        return _sha256(head + payload).digest()

    return hash_row


def _hash_any(prev_hash: bytes, seq: int, created: bytes, sid: bytes, payload: bytes) -> bytes:
    """The same preimage built field by field, for rows of any shape (a tampered row)."""
    return _sha256(
        b"".join(
            (
                CHAIN_TAG,
                prev_hash,
                _pack_seq(seq),
                _pack_u32(len(created)),
                created,
                _pack_u32(len(sid)),
                sid,
                _pack_seq(len(payload)),
                payload,
            )
        )
    ).digest()


def event_hash(
    prev_hash: bytes, seq: int, created_at: str, session_id: str, payload: bytes
) -> bytes:
    """The 32-byte chain hash of one event row (layout in the module docstring)."""
    return chain_hasher(session_id)(prev_hash, seq, created_at, payload)


@dataclass(frozen=True)
class SessionVerdict:
    """What ``verify`` found for one session."""

    session_id: str
    """The session checked."""
    events: int
    """Rows read for the session."""
    head_hash: bytes
    """The last good hash (``GENESIS_HASH`` when there are no events)."""
    bad_seq: int | None = None
    """The first seq that does not verify, or ``None`` when the chain is intact."""
    reason: str = ""
    """Why ``bad_seq`` is bad."""

    @property
    def ok(self) -> bool:
        """True when every row and the session head verify."""
        return self.bad_seq is None


def verify(store: LogStore, session_ids: Iterable[str] | None = None) -> list[SessionVerdict]:
    """Recompute the chain of each session and compare it with what is stored.

    Checks, in seq order: seq runs 1, 2, 3 … without gaps; each stored hash equals the hash
    recomputed from the stored bytes and the previous stored hash; the session row's head
    (seq and hash) equals the last event. With no ``session_ids``, every session is checked,
    and so is every session id that has events but no session row (rows moved by hand).

    Args:
        store: the log to read.
        session_ids: the sessions to check; all when ``None``.

    Returns:
        One verdict per session, in the order checked.

    Raises:
        SessionNotFound: a given session id does not exist.
    """
    if session_ids is None:
        ids = [s.id for s in store.sessions()]
        stray = store.event_session_ids() - set(ids)
        ids += sorted(sid for sid in stray if isinstance(sid, str))
        # A session id changed by hand into bytes that are not text lands as a BLOB.
        odd = [
            SessionVerdict(repr(sid), 0, GENESIS_HASH, 1, "session id is not text")
            for sid in stray
            if not isinstance(sid, str)
        ]
    else:
        ids = list(session_ids)
        for sid in ids:
            store.get_session(sid)
        odd = []
    return [_verify_session(store, sid) for sid in ids] + odd


def _verify_session(store: LogStore, session_id: str) -> SessionVerdict:
    head = store.head(session_id)
    hash_row = chain_hasher(session_id)
    prev = GENESIS_HASH
    expected = 1
    count = 0
    for seq, created_at, data, stored in store.read_rows(session_id):
        count += 1
        if seq != expected:
            why = (
                f"seq {expected} is missing"
                if type(seq) is int and seq > expected
                else f"seq {seq!r} out of order"
            )
            return SessionVerdict(session_id, count, prev, expected, why)
        try:
            digest = hash_row(prev, seq, created_at, data)
        except (AttributeError, TypeError, UnicodeError, struct.error):
            # A column changed by hand into another type (text into a BLOB, say).
            return SessionVerdict(session_id, count, prev, seq, "row is not well-formed")
        if digest != stored:
            return SessionVerdict(
                session_id, count, prev, seq, "stored hash does not match the row's bytes"
            )
        prev = stored
        expected += 1
    last = expected - 1
    if head is None:
        return SessionVerdict(
            session_id, count, prev, 1 if last else 0, "events with no session row"
        )
    head_seq, head_hash = head
    if head_seq > last:
        return SessionVerdict(
            session_id, count, prev, last + 1, f"seq {last + 1} is missing (head is seq {head_seq})"
        )
    if head_seq < last:
        return SessionVerdict(
            session_id, count, prev, head_seq + 1, f"rows beyond the session head (seq {head_seq})"
        )
    if head_hash != prev:
        return SessionVerdict(
            session_id, count, prev, max(last, 1), "session head hash does not match the last row"
        )
    return SessionVerdict(session_id, count, prev)
