"""The per-session hash chain and ``verify``.

Every event's ``hash`` commits to the previous event's hash and to the row's stored bytes
(byte layout in ``docs/log-format.md``)::

    hash_n = SHA-256( CHAIN_TAG                      20 bytes, b"agenttrail-chain-v1\\x00"
                    ‖ hash_{n-1}                     32 bytes; hash_0 = 32 zero bytes
                    ‖ seq                            8 bytes, unsigned big-endian
                    ‖ len(created_at) ‖ created_at   4-byte big-endian length, ASCII text
                    ‖ len(session_id) ‖ session_id   4-byte big-endian length, UTF-8 text
                    ‖ len(payload)    ‖ payload      8-byte big-endian length, the CBOR bytes )

That is chain v1, the chain of every session written before chain v2 (``chain_version`` 1).
A v2 session's rows commit to a salted digest of the payload instead, and its ``hash_0`` is a
digest of the session's fields (:mod:`agenttrail.log.digests`); its erased events keep their
digest and lose their payload and salt, and verify checks them against the session's erasure
events and erasures rows. The session row keeps the head (last seq, last hash), so a removed
last event is caught too.
Whoever owns the database file can recompute the whole chain; signed checkpoints kept
elsewhere are what pins a head.

``verify`` checks each page of rows with the C check of ``agenttrail.log._speedups`` when it was
built: it hashes a page of rows without the GIL while a second thread reads the next page
(reading a row into Python costs about as much as hashing it; docs/benchmarks.md). Why a row
is bad is said by the Python check below, which is the whole check when the C one is missing.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import struct
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from agenttrail.codec import decode_payload
from agenttrail.errors import SessionRowDamaged, StoreError
from agenttrail.log.digests import (
    CHAIN_TAG_V2,
    SALT_BYTES,
    ChainHasherV2,
    chain_hasher_v2,
    key_hash,
    log_row_hash,
    payload_digest,
    stored_digest,
    trace_hash,
)
from agenttrail.model import LogReader

try:
    from agenttrail.log import _speedups
except ImportError:  # built without a C compiler or OpenSSL's headers (pyproject.toml)
    _speedups = None  # type: ignore[assignment]

if TYPE_CHECKING:
    from agenttrail.log.store import ChainPage, Row, TraceChain

__all__ = [
    "CHAIN_TAG",
    "GENESIS_HASH",
    "ChainHasher",
    "ChainReader",
    "SessionVerdict",
    "chain_hasher",
    "event_hash",
    "key_chain_problems",
    "log_chain_problems",
    "problem_place",
    "stored_type",
    "trace_chain_problems",
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


class ChainReader(LogReader, Protocol):
    """What :func:`verify` reads: a log's sessions and, per session, its rows a page at a time
    with the head (every store in :mod:`agenttrail.log.store` is one)."""

    def chain_pages(self, session_id: str) -> AbstractContextManager[Iterator[ChainPage]]:
        """Every event row of a session in seq order, a page at a time, each with the session
        head read together with it (``LogStore.chain_pages``)."""
        ...

    def event_session_ids(self) -> set[str]:
        """Every session id that has at least one event row."""
        ...

    def trace_chain(self, session_id: str) -> TraceChain:
        """A session's trace head and trace rows with their hashes, in the order written
        (``LogStore.trace_chain``)."""
        ...

    def key_chain(self, session_id: str) -> TraceChain:
        """A session's key head and idempotency key rows with their hashes, in chain order
        (``LogStore.key_chain``)."""
        ...

    def log_chains(self) -> dict[str, TraceChain]:
        """The chains of the log's own rows by table, tombstones and log_keys
        (``LogStore.log_chains``)."""
        ...

    def session_ids(self) -> list[str]:
        """Every session's id in creation order, the rest of the rows unread
        (``EventLog.session_ids``)."""
        ...


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
    """The first seq that does not verify; ``None`` when the chain is intact, and when the
    session row cannot be read (``reason`` then names its column)."""
    reason: str = ""
    """Why ``bad_seq`` (or the session row) is bad; empty when the session verifies."""
    erased: tuple[int, ...] = ()
    """The seqs whose payload was erased (``agenttrail erase``); their digests still chain."""
    version: int = 1
    """The session's chain version (1 or 2)."""

    @property
    def ok(self) -> bool:
        """True when every row and the session row verify."""
        return not self.reason

    @property
    def where(self) -> str:
        """Where the problem is, as ``verify`` prints it (:func:`problem_place`)."""
        return problem_place(self.bad_seq)


def problem_place(bad_seq: int | None) -> str:
    """Where a session's problem is, as ``agenttrail verify`` prints it after the session id:
    ``seq <N>``, or ``session row`` when no seq applies (the row cannot be read)."""
    return "session row" if bad_seq is None else f"seq {bad_seq}"


def verify(store: ChainReader, session_ids: Iterable[str] | None = None) -> list[SessionVerdict]:
    """Recompute the chain of each session and compare it with what is stored.

    Checks, in seq order: seq runs 1, 2, 3 … without gaps; each stored hash equals the hash
    recomputed from the stored bytes and the previous stored hash; the session row's head
    (seq and hash) equals the last event. The head checked is the one read with the last
    page of rows (``LogStore.chain_pages``), so a session being appended to verifies too. With
    no ``session_ids``, every session is checked, and so is every session id that has events
    but no session row (rows moved by hand); a session row changed by hand so that it cannot
    be read (its head, its metadata) is that session's verdict, with no ``bad_seq`` and the
    column named in ``reason`` (docs/log-format.md, The hash chain), and the others are
    checked all the same.

    Args:
        store: the log to read.
        session_ids: the sessions to check; all when ``None``.

    Returns:
        One verdict per session, in the order checked.

    Raises:
        SessionNotFound: a given session id does not exist.
        SessionRowDamaged: a given session's row cannot be read (changed by hand).
    """
    if session_ids is not None:
        ids = list(session_ids)
        for sid in ids:
            store.get_session(sid)
        return [_verify_session(store, sid) for sid in ids]
    listed: list[object] = list(store.session_ids())
    stray = store.event_session_ids() - set(listed)
    ids = [sid for sid in listed if isinstance(sid, str)]
    ids += sorted(sid for sid in stray if isinstance(sid, str))
    # A session id changed by hand into bytes that are not text lands as a BLOB.
    odd = [
        SessionVerdict(repr(sid), 0, GENESIS_HASH, 1, "session id is not text")
        for sid in (*listed, *stray)
        if not isinstance(sid, str)
    ]
    return [_verify_listed(store, sid) for sid in ids] + odd


def _verify_listed(store: ChainReader, session_id: str) -> SessionVerdict:
    """:func:`_verify_session`, then the rest of the session row; a row that cannot be read
    is this session's verdict, not an error that would stop the others being checked."""
    try:
        verdict = _verify_session(store, session_id)
    except SessionRowDamaged as e:  # the head, read with the rows
        return SessionVerdict(session_id, 0, GENESIS_HASH, reason=e.problem)
    # A v2 session's fields are in its genesis, so a field changed into something that cannot
    # be read breaks seq 1 (or the empty head) too: the row's own problem says more.
    if verdict.ok or (verdict.version == 2 and verdict.bad_seq == 1):
        try:
            store.get_session(session_id)  # what the chain does not cover: the metadata
        except SessionRowDamaged as e:
            return dataclasses.replace(verdict, bad_seq=None, reason=e.problem)
    return verdict


def trace_chain_problems(store: ChainReader, session_id: str) -> list[str]:
    """Why a v2 session's trace rows do not chain (docs/log-format.md, Chain v2): the first
    row not chained to the one before (``trace row N (result seq S) does not chain``) or a
    head not the last row; ``[]`` if they chain, for v1, or unread (trace checks say so)."""
    try:
        chain = store.trace_chain(session_id)
    except StoreError:
        return []
    if chain.version != 2:
        return []
    found = _row_chain_problem(chain, trace_hash, "trace", "result seq", 2)
    return [] if found is None else [found]


def key_chain_problems(store: ChainReader, session_id: str) -> list[str]:
    """Why a session's idempotency keys do not chain (docs/log-format.md, Idempotency keys):
    the first key row whose hash is not its columns chained to the row before (``key row N
    (seq S) does not chain``), or a key head that is not the last row, or that the rows
    cannot be read (``the key rows cannot be read: …``); ``[]`` when they chain."""
    try:
        chain = store.key_chain(session_id)
    except StoreError as e:  # dropped, damaged: no proof is no pass
        return [f"the key rows cannot be read: {e}"]
    found = _row_chain_problem(chain, key_hash, "key", "seq", 2)
    return [] if found is None else [found]


_LOG_ROWS = {"tombstones": ("tombstone", "session"), "log_keys": ("log key", "name")}


def log_chain_problems(store: ChainReader) -> list[str]:
    """Why the log's own rows do not chain (docs/log-format.md, What the chain covers): for
    the tombstones and the log keys, the first row whose hash is not its columns chained to
    the row before (``tombstone row N (session 'S') does not chain``, ``log key row N (name
    'redaction') does not chain``), or a head in ``log_heads`` that is not the last row;
    a head missing from ``log_heads`` (every log has one per table), or that the rows cannot
    be read; ``[]`` when both chain."""
    try:
        chains = store.log_chains()
    except StoreError as e:  # dropped, damaged: no proof is no pass
        return [f"the log's own rows (tombstones, log keys) cannot be read: {e}"]
    found = []
    for table, chain in chains.items():
        name, label = _LOG_ROWS[table]
        if chain.version == 0:
            found.append(f"the {name} head is missing from log_heads")
            continue
        hasher = functools.partial(log_row_hash, table)
        problem = _row_chain_problem(chain, hasher, name, label, 0)
        if problem is not None:
            found.append(problem)
    return found


def _row_chain_problem(
    chain: TraceChain,
    hasher: Callable[[bytes, list[object]], bytes],
    name: str,
    label: str,
    seq_column: int,
) -> str | None:
    """The first problem of a chain of rows (trace rows, idempotency keys): a row whose
    stored hash is not ``hasher`` of its columns and the previous hash, or a head (count,
    hash) that is not the last row's; ``name`` and ``label`` say which rows, and the row's
    column ``seq_column`` is the seq named with it."""
    prev = GENESIS_HASH
    for number, row in enumerate(chain.rows, start=1):
        *values, stored = row
        stored = None if stored is None else stored_digest(stored)
        if stored is None or hasher(prev, values) != stored:
            return f"{name} row {number} ({label} {values[seq_column]!r}) does not chain"
        prev = stored
    have = len(chain.rows)
    if have != chain.rows_chained:
        return f"the {name} head says {chain.rows_chained!r} {name} rows, there are {have}"
    if chain.rows and chain.hash != prev:
        return f"{name} head hash does not match the last {name} row"
    if not chain.rows and chain.hash is not None:
        return f"{name} head hash with no {name} rows"
    return None


def _verify_session(store: ChainReader, session_id: str) -> SessionVerdict:
    sid = session_id.encode("utf-8")
    prev = GENESIS_HASH
    expected = 1
    head: tuple[int, bytes] | None = None
    rows_of: _Rows | None = None
    with store.chain_pages(session_id) as pages, _read_ahead(pages) as ahead:
        for page in ahead:
            head, rows = page.head, page.rows  # the last page's head is the one checked
            if rows_of is None:  # the start, read with the first page
                if head is None:  # its row deleted by hand: no version or start to check by
                    return SessionVerdict(session_id, 0, prev, 1, "events with no session row")
                rows_of = _Rows(session_id, sid, page.version, page.erased)
                prev = page.start
            if not rows:
                continue
            found = rows_of.first_bad(prev, expected, rows)
            if found is not None:
                offset, why = found
                good = rows[offset - 1][3] if offset else prev
                return SessionVerdict(
                    session_id, expected + offset, good, expected + offset, why, (), rows_of.version
                )
            prev = rows[-1][3]
            expected += len(rows)
    last = expected - 1
    version = rows_of.version if rows_of else 1
    if head is None:  # no page at all
        return SessionVerdict(session_id, last, prev, 0, "events with no session row")
    head_seq, head_hash = head
    bad: tuple[int, str] | None = None
    if head_seq > last:
        bad = last + 1, f"seq {last + 1} is missing (head is seq {head_seq})"
    elif head_seq < last:
        bad = head_seq + 1, f"rows beyond the session head (seq {head_seq})"
    elif head_hash != prev:
        why = "session head hash does not match the last row"
        if last == 0 and version == 2:
            why = "session head hash does not match the session's fields (its genesis)"
        bad = max(last, 1), why
    elif rows_of is not None:
        bad = rows_of.erasures_disagree(last)
    if bad is not None:
        return SessionVerdict(session_id, last, prev, bad[0], bad[1], (), version)
    erased = tuple(sorted(rows_of.seen)) if rows_of else ()
    return SessionVerdict(session_id, last, prev, erased=erased, version=version)


_ERASURE_MARK = b"\x64type\x67erasure"
"""``"type": "erasure"`` in canonical CBOR: a payload without these bytes is no erasure event,
so verify decodes only the few that have them."""


class _Rows:
    """The per-row checks of one session's chain, v1 or v2, and what v2 gathers on the way:
    the erased rows seen and what the erasure events say."""

    def __init__(
        self, session_id: str, sid: bytes, version: int, erased: frozenset[tuple[int, int]]
    ) -> None:
        self.version = version
        self.sid = sid
        self.hash_v1 = chain_hasher(session_id)
        self.hash_v2 = chain_hasher_v2(session_id)
        self.recorded = erased
        """``(seq, erasure_seq)`` of the erasures rows."""
        self.erased = {seq for seq, _ in erased}
        self.seen: set[int] = set()
        """Seqs of rows found erased (no salt, no payload)."""
        self.claimed: set[tuple[int, int]] = set()
        """``(seq, erasure_seq)`` as the erasure events name them."""

    def first_bad(self, prev: bytes, expected: int, rows: list[Row]) -> tuple[int, str] | None:
        """``(index, why)`` of the first bad row of a page, or ``None``.

        The C check only says whether (and where) a page has a bad row (or, in v2, an erased
        one); the Python check says why, so each rule is stated once, here.
        """
        if self.version == 1:
            fast = _speedups is not None and (
                _speedups.first_bad_row(CHAIN_TAG, self.sid, prev, rows, expected) < 0
            )
            return None if fast else _first_bad_row(self.hash_v1, prev, expected, rows)
        if _speedups is not None:
            bad, marked = _speedups.first_bad_row_v2(
                CHAIN_TAG_V2, self.sid, prev, rows, expected, _ERASURE_MARK
            )
            if bad < 0:  # the C check also found the rows that may be erasure events
                for index in marked:
                    self._claim(rows[index][0], rows[index][2])
                return None
        found = _first_bad_row_v2(self, prev, expected, rows)
        if found is None:
            for row in rows:
                if _ERASURE_MARK in row[2]:
                    self._claim(row[0], row[2])
        return found

    def _claim(self, seq: int, data: bytes) -> None:
        payload = decode_payload(data)
        if not isinstance(payload, dict) or payload.get("type") != "erasure":
            return
        seqs = payload.get("seqs")
        for erased in seqs if isinstance(seqs, list) else []:
            self.claimed.add((erased, seq))

    def erasures_disagree(self, last: int) -> tuple[int, str] | None:
        """``(seq, why)`` when the erased rows, the erasures rows and the erasure events do
        not name the same events (of the ``last`` seqs); ``None`` when they agree."""
        if self.version == 1:
            return None
        for seq in sorted(self.erased - self.seen):
            held = "its payload is still stored" if seq <= last else f"the last is seq {last}"
            return seq, f"seq {seq} has an erasures row but {held}"
        for seq, by in sorted(self.recorded - self.claimed):
            return seq, f"the erasures row of seq {seq} names seq {by}, no erasure event of it"
        for seq, by in sorted(self.claimed - self.recorded):
            return by, f"the erasure event at seq {by} names seq {seq}, which has no erasures row"
        return None


@contextmanager
def _read_ahead(pages: Iterator[ChainPage]) -> Iterator[Iterator[ChainPage]]:
    """``pages``, from the second on with the next one read on a second thread while the
    caller checks this one.

    The C check hashes a page without the GIL, so reading and hashing overlap on two cores.
    The first page is read here: most sessions fit in one, and for them starting a thread
    would cost more than it saves. Leaving the block waits for a read in flight, so the
    store's ``chain_pages`` block can close after it.
    """
    with ThreadPoolExecutor(1, thread_name_prefix="agenttrail-verify") as reader:

        def ahead() -> Iterator[ChainPage]:
            page = next(pages, None)
            if page is None:
                return
            yield page
            page = next(pages, None)
            while page is not None:
                pending = reader.submit(next, pages, None)  # the thread starts here
                yield page
                page = pending.result()

        yield ahead()


def _first_bad_row(
    hash_row: ChainHasher, prev: bytes, expected: int, rows: list[Row]
) -> tuple[int, str] | None:
    """``(index, why)`` of the first row of a page that does not verify, or ``None``.

    Row ``i`` must have seq ``expected + i`` and a stored hash equal to the hash of its bytes
    chained to the previous row's stored hash (``prev`` for row 0).
    """
    for offset, row in enumerate(rows):
        seq, created_at, data, stored = row[:4]
        want = expected + offset
        if seq != want or type(seq) is not int:
            gap = type(seq) is int and seq > want
            return offset, f"seq {want} is missing" if gap else f"seq {seq!r} out of order"
        # A column changed by hand into another type (text into a BLOB column, a NULL): the
        # C check takes only the exact types the store writes, and so does this one.
        for column, value, kind in (
            ("created_at", created_at, str),
            ("payload", data, bytes),
            ("hash", stored, bytes),
        ):
            if type(value) is not kind:
                return offset, f"{column} is {stored_type(value)}, not {stored_type(kind())}"
        try:
            digest = hash_row(prev, seq, created_at, data)
        except (AttributeError, TypeError, UnicodeError, struct.error):
            # A column changed by hand into another type (text into a BLOB, say).
            return offset, "row is not well-formed"
        if digest != stored:
            return offset, "stored hash does not match the row's bytes"
        if row[4:] != (None, None):
            return offset, "a v1 row holds a salt or a digest"
        prev = stored
    return None


def _first_bad_row_v2(
    rows_of: _Rows, prev: bytes, expected: int, rows: list[Row]
) -> tuple[int, str] | None:
    """``(index, why)`` of the first v2 row of a page that does not verify, or ``None``;
    erased rows seen on the way are added to ``rows_of.seen``.

    Row ``i`` must have seq ``expected + i``; a salt of :data:`SALT_BYTES` with
    ``SHA-256(salt ‖ payload)`` equal to its digest, or, erased, no salt, an empty payload
    and an erasures row; and a stored hash equal to the v2 hash of its digest chained to the
    previous row's stored hash (``prev`` for row 0: the session's genesis for seq 1).
    """
    hash_row: ChainHasherV2 = rows_of.hash_v2
    for offset, (seq, created_at, data, stored, salt, digest) in enumerate(rows):
        want = expected + offset
        if seq != want or type(seq) is not int:
            gap = type(seq) is int and seq > want
            return offset, f"seq {want} is missing" if gap else f"seq {seq!r} out of order"
        for column, value, kind in (
            ("created_at", created_at, str),
            ("payload", data, bytes),
            ("hash", stored, bytes),
            ("digest", digest, bytes),
        ):
            if type(value) is not kind:
                return offset, f"{column} is {stored_type(value)}, not {stored_type(kind())}"
        assert isinstance(digest, bytes)  # the loop above
        if salt is None:
            if seq not in rows_of.erased:
                return offset, "payload erased (no salt) without an erasures row"
            if data:
                return offset, "an erased row still holds payload bytes"
            rows_of.seen.add(seq)
        elif type(salt) is not bytes or len(salt) != SALT_BYTES:
            return offset, f"salt is {stored_type(salt)}, not {SALT_BYTES} bytes"
        elif payload_digest(salt, data) != digest:
            return offset, "payload does not match its digest"
        try:
            good = hash_row(prev, seq, created_at, digest) == stored and len(digest) == 32
        except UnicodeError:
            return offset, "row is not well-formed"
        if not good:
            if seq == 1:
                return offset, (
                    "stored hash does not match the row's digest, or the session's fields "
                    "(title, agent, user, workspace, started, metadata) were changed"
                )
            return offset, "stored hash does not match the row's digest"
        prev = stored
    return None


_TYPE_NAMES: dict[type, str] = {
    str: "text",
    bytes: "bytes",
    int: "an integer",
    float: "a real number",
    type(None): "NULL",
}


def stored_type(value: object) -> str:
    """What a column read from the store holds, in the database's words: ``text``,
    ``bytes``, ``an integer``, ``a real number``, ``NULL`` (a row changed by hand into
    another type is named so)."""
    return _TYPE_NAMES.get(type(value), type(value).__name__)
