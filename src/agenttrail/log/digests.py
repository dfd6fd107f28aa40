"""Chain v2's byte layout: salted payload digests, the session's genesis and the row hash.

A v2 event's chain hash commits to a salted digest of its payload, not to the payload
(docs/log-format.md, Chain v2)::

    digest_n = SHA-256( salt_n ‖ payload_n )          salt: 32 random bytes per event
    hash_n   = SHA-256( "agenttrail-chain-v2" 0x00     20 bytes
                      ‖ hash_{n-1}                     32 bytes; hash_0 = the session's genesis
                      ‖ seq                            8 bytes, unsigned big-endian
                      ‖ len(created_at) ‖ created_at   4-byte big-endian length, ASCII
                      ‖ len(session_id) ‖ session_id   4-byte big-endian length, UTF-8
                      ‖ digest_n )                     32 bytes

so that a payload can be erased (its bytes and salt removed) while its digest keeps the chain
whole, and an erased short payload (``"yes"``) cannot be found by hashing guesses: the salt is
gone with it. ``hash_0`` is not 32 zero bytes but a digest of the session row's fields, so the
title, agent, user, workspace, start and metadata are chained too::

    genesis = SHA-256( "agenttrail-session-v2" 0x00 ‖ field(id) ‖ field(title) ‖ field(agent)
                     ‖ field(user) ‖ field(workspace) ‖ field(started) ‖ field(metadata) )
    field(NULL) = 0x00;  field(text) = 0x01 ‖ len (4-byte big-endian) ‖ UTF-8 bytes

``field`` of a value of any other type (a column changed by hand into a BLOB or a number)
gives a different byte (0x02 ‖ len ‖ its bytes as SQLite would print them), so such a change
is caught like any other.

A v2 session's trace rows form a chain of their own, in the order they were written, whose
head (count and hash) the session row keeps::

    t_k = SHA-256( "agenttrail-trace-v2" 0x00 ‖ t_{k-1} ‖ field(session_id) ‖ int(call_seq)
                 ‖ int(result_seq) ‖ field(turn_seq) ‖ field(tool) ‖ field(inputs)
                 ‖ field(envelope) ‖ field(created_at) ‖ field(record_hash)
                 ‖ field(stated_hash) ‖ field(status) ‖ field(detail) ‖ field(spec) )
    t_0 = 32 zero bytes
    field(int) = 0x03 ‖ 8-byte signed big-endian;  field(bytes) = 0x02 ‖ len ‖ bytes

The idempotency keys of every session (v1 too, from schema version 4) form a chain of their
own, in ``(seq, key)`` order, whose head (count and hash) the session row keeps::

    k_j = SHA-256( "agenttrail-key-v2" 0x00 ‖ k_{j-1} ‖ field(session_id) ‖ field(key)
                 ‖ int(seq) )
    k_0 = 32 zero bytes

The log's own rows, ``tombstones`` and ``log_keys``, each form a chain in the order written,
whose heads (count and hash) the table ``log_heads`` keeps::

    s_j = SHA-256( "agenttrail-tombstone-v2" 0x00 ‖ s_{j-1} ‖ field(session_id)
                 ‖ int(head_seq) ‖ field(head_hash) ‖ field(deleted_at) ‖ field(reason) )
    l_j = SHA-256( "agenttrail-log-key-v2" 0x00 ‖ l_{j-1} ‖ field(name) ‖ field(key) )
    s_0 = l_0 = 32 zero bytes
"""

from __future__ import annotations

import hashlib
import secrets
import struct
from collections.abc import Callable, Sequence

try:
    from agenttrail.log import _speedups
except ImportError:  # built without a C compiler or OpenSSL's headers (pyproject.toml)
    _speedups = None  # type: ignore[assignment]

__all__ = [
    "CHAIN_TAG_V2",
    "KEY_TAG",
    "LOG_TAGS",
    "SALT_BYTES",
    "SESSION_TAG",
    "TRACE_TAG",
    "ChainHasherV2",
    "chain_hasher_v2",
    "chain_rows_v2",
    "key_hash",
    "key_hasher",
    "log_row_hash",
    "new_salt",
    "payload_digest",
    "session_genesis",
    "stored_digest",
    "trace_hash",
]

CHAIN_TAG_V2 = b"agenttrail-chain-v2\x00"
"""Domain-separation tag that opens every v2 row preimage (20 bytes)."""

SESSION_TAG = b"agenttrail-session-v2\x00"
"""Domain-separation tag of a v2 session's genesis (22 bytes)."""

TRACE_TAG = b"agenttrail-trace-v2\x00"
"""Domain-separation tag of a v2 trace row's hash (20 bytes)."""

KEY_TAG = b"agenttrail-key-v2\x00"
"""Domain-separation tag of an idempotency key row's hash (18 bytes)."""

SALT_BYTES = 32
"""Bytes of random salt per event (``secrets.token_bytes``): as long as the digest, so a
guess at an erased payload costs a search of 2^256 salts."""

_sha256 = hashlib.sha256
_pack_u32 = struct.Struct(">I").pack

ChainHasherV2 = Callable[[bytes, int, str, bytes], bytes]
"""``(prev_hash, seq, created_at, digest) -> hash`` for one v2 session."""


def new_salt() -> bytes:
    """A fresh salt of :data:`SALT_BYTES` from the operating system's CSPRNG (``secrets``)."""
    return secrets.token_bytes(SALT_BYTES)


def payload_digest(salt: bytes, payload: bytes) -> bytes:
    """``SHA-256(salt ‖ payload)``: what a v2 row's chain hash commits to (32 bytes)."""
    return _sha256(salt + payload).digest()


def chain_hasher_v2(session_id: str) -> ChainHasherV2:
    """A v2 hash function for the rows of one session (layout in the module docstring)."""
    sid = session_id.encode("utf-8")
    fixed = struct.Struct(f">{len(CHAIN_TAG_V2)}s32sQ").pack
    tail = _pack_u32(len(sid)) + sid

    def hash_row(prev_hash: bytes, seq: int, created_at: str, digest: bytes) -> bytes:
        created = created_at.encode("ascii")
        return _sha256(
            fixed(CHAIN_TAG_V2, prev_hash, seq) + _pack_u32(len(created)) + created + tail + digest
        ).digest()

    return hash_row


def chain_rows_v2(
    session_id: str, prev_hash: bytes, first_seq: int, rows: list[tuple[str, bytes, bytes]]
) -> tuple[list[bytes], list[bytes]]:
    """The digests and chain hashes of new v2 rows of one session (layout in the module
    docstring), in C when the extension was built (``agenttrail.log._speedups``), else with
    :func:`payload_digest` and :func:`chain_hasher_v2`: the same bytes either way.

    Args:
        session_id: the session.
        prev_hash: the hash the first row chains to (the head's, or the session's genesis).
        first_seq: the first row's seq; the others follow it.
        rows: ``(created_at, payload, salt)`` of each row: the stored ``created_at`` (ASCII),
            the payload's canonical CBOR and its 32-byte salt.

    Returns:
        ``(digests, hashes)``, one of each per row, 32 bytes each.
    """
    if _speedups is not None:
        sid = session_id.encode("utf-8")
        return _speedups.chain_rows_v2(CHAIN_TAG_V2, sid, prev_hash, first_seq, rows)
    hash_row = chain_hasher_v2(session_id)
    digests: list[bytes] = []
    hashes: list[bytes] = []
    for seq, (created_at, payload, salt) in enumerate(rows, start=first_seq):
        digests.append(digest := payload_digest(salt, payload))
        hashes.append(prev_hash := hash_row(prev_hash, seq, created_at, digest))
    return digests, hashes


def session_genesis(session_id: str, fields: Sequence[object]) -> bytes:
    """``hash_0`` of a v2 session: the digest of its id and ``fields``, the session row's
    ``title, agent, user, workspace, started, metadata`` as stored (module docstring)."""
    return _sha256(b"".join(_fields([SESSION_TAG], (session_id, *fields)))).digest()


def trace_hash(prev: bytes, values: Sequence[object]) -> bytes:
    """``t_k`` of a v2 trace row: its columns ``values`` in ``NewTrace`` order (session_id
    … spec), chained to ``prev`` (module docstring)."""
    return _sha256(b"".join(_fields([TRACE_TAG, prev], values))).digest()


def key_hash(prev: bytes, values: Sequence[object]) -> bytes:
    """``k_j`` of an idempotency key row: ``values`` = ``(session_id, key, seq)`` as stored,
    chained to ``prev`` (module docstring)."""
    return _sha256(b"".join(_fields([KEY_TAG, prev], values))).digest()


def key_hasher(session_id: str) -> Callable[[bytes, str, int], bytes]:
    """:func:`key_hash` for the keys of one session: ``(prev, key, seq) -> k_j``, the same
    bytes, with the session id's field encoded once (an append chains a key per event)."""
    sid = session_id.encode("utf-8", "surrogatepass")
    head = KEY_TAG
    tail = b"\x01" + _pack_u32(len(sid)) + sid + b"\x01"

    def hash_key(prev: bytes, key: str, seq: int) -> bytes:
        data = key.encode("utf-8", "surrogatepass")
        number = b"\x03" + seq.to_bytes(8, "big", signed=True)
        return _sha256(head + prev + tail + _pack_u32(len(data)) + data + number).digest()

    return hash_key


LOG_TAGS = {
    "tombstones": b"agenttrail-tombstone-v2\x00",
    "log_keys": b"agenttrail-log-key-v2\x00",
}
"""Domain-separation tag of each chained table of the log's own rows (module docstring)."""


def log_row_hash(table: str, prev: bytes, values: Sequence[object]) -> bytes:
    """The hash of a row of ``table`` (a key of :data:`LOG_TAGS`): its columns ``values`` as
    stored (``tombstones``: session_id, head_seq, head_hash, deleted_at, reason; ``log_keys``:
    name, key), chained to ``prev`` (module docstring)."""
    return _sha256(b"".join(_fields([LOG_TAGS[table], prev], values))).digest()


def _fields(parts: list[bytes], values: Sequence[object]) -> list[bytes]:
    for value in values:
        if value is None:
            parts.append(b"\x00")
        elif isinstance(value, str):
            data = value.encode("utf-8", "surrogatepass")
            parts += (b"\x01", _pack_u32(len(data)), data)
        elif type(value) is int and -(2**63) <= value < 2**63:
            parts += (b"\x03", value.to_bytes(8, "big", signed=True))
        else:  # bytes, or changed by hand into another type: never equal to the text it was
            data = value if isinstance(value, bytes) else repr(value).encode()
            parts += (b"\x02", _pack_u32(len(data)), data)
    return parts


def stored_digest(value: object) -> bytes:
    """A hash column's value as bytes: itself when bytes-like, else its ``repr`` encoded,
    which no SHA-256 digest equals (a column changed by hand into text or a number is then a
    hash that does not match, never a ``TypeError`` stopping ``verify``)."""
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value)
    return repr(value).encode("utf-8", "backslashreplace")
