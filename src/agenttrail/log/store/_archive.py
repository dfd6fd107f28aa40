"""The archive role of the store (:class:`agenttrail.log.store.Archive`), written once for both
backends: removing a session (retention, with its tombstone), copying one between logs
(``migrate``), and erasing events (docs/log-format.md, Erasure). A mixin of
:class:`agenttrail.log.store._base.StoreBase`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from agenttrail.codec import encode_payload, now_timestamp
from agenttrail.errors import (
    ChainBroken,
    InputError,
    SessionNotFound,
)
from agenttrail.log.chain import chain_hasher
from agenttrail.log.digests import chain_hasher_v2, payload_digest
from agenttrail.log.store import (
    Erasure,
    Row,
    Tombstone,
)
from agenttrail.log.store._backend import READ_PAGE_ROWS, Backend, C
from agenttrail.log.store._rules import (
    ERASURE,
    Encoded,
    as_new_session,
    check_created_at,
    check_reason,
    check_session,
    check_text,
    event_of,
    stored_head,
    trace_row,
)
from agenttrail.model import Session

__all__ = ["ArchiveBase"]

_CALL_ID_FIELD = {"tool_call": "id", "tool_result": "toolCallId"}
"""The call id field of each payload type an erasure event keeps in ``kept`` (pairing's)."""


class ArchiveBase(Backend[C]):
    """Removing and copying whole sessions (``Archive``)."""

    def remove_session(self, session_id: str, *, reason: str) -> Tombstone:
        """Remove a session, its events, keys and trace rows, leaving a tombstone.

        The tombstone is written first, in the same transaction: the database refuses these
        deletes for any session without one (schema triggers), so this is the only way.

        Raises:
            SessionNotFound: no such session.
            InputError: ``reason`` is blank.
        """
        check_reason("retention reason", reason)
        deleted_at = now_timestamp()
        row = self._write(
            "remove_session", lambda tx: self._remove(tx, session_id, deleted_at, reason)
        )
        if row is None:
            raise SessionNotFound(session_id)
        return Tombstone(session_id, row[0], bytes(row[1]), deleted_at, reason)

    def scrub(self) -> None:
        """After sessions were removed: make their text leave the database's files where the
        backend can (``Archive.scrub``): the search index rewritten, then what erasures scrub
        (:meth:`Backend._scrub`)."""
        self._write("scrub", self._merge_index)
        self._scrub()

    def tombstones(self) -> list[Tombstone]:
        """Every tombstone, oldest first."""
        rows = self._query(self.sql.tombstones)
        return [Tombstone(r[0], r[1], bytes(r[2]), r[3], r[4]) for r in rows]

    def copy_session(
        self,
        session: Session,
        rows: Iterable[Row],
        *,
        keys: Sequence[tuple[str, int]] = (),
        erasures: Sequence[tuple[int, int]] = (),
    ) -> int:
        """Write a session copied from another log, in one transaction (see
        :meth:`agenttrail.log.store.Archive.copy_session`)."""
        check_session(session)
        for key, _ in keys:
            check_text("idempotency key", key)

        erased = dict(erasures)

        def tx(conn: C) -> tuple[int, bool]:
            head = conn.execute(self.sql.head_version, (session.id,)).fetchone()
            if head is None:
                self._insert_session(conn, as_new_session(session), created_at=session.created_at)
                head = conn.execute(self.sql.head_version, (session.id,)).fetchone()
            seq, prev = stored_head(session.id, head[0], head[1])
            before = seq  # rows up to here were copied by an earlier run
            chains = _RowCheck(session.id, head[2], erased)
            written = 0
            copied: list[int] = []
            batch: list[Row] = []
            for row in rows:
                row_seq = row[0]
                if row_seq <= seq:
                    continue
                check_created_at(row[1])
                if row_seq != seq + 1 or not chains.holds(prev, row):
                    raise ChainBroken(session.id, row_seq, "the copied row does not chain")
                seq, prev = row_seq, row[3]
                if row[4] is None and row_seq in erased:
                    copied.append(row_seq)
                batch.append(row)
                written += 1
                if len(batch) >= READ_PAGE_ROWS:
                    self._copy_rows(conn, session.id, batch)
            self._copy_rows(conn, session.id, batch)
            if written:
                self._set_head(conn, session.id, seq, prev)
            if keys:
                stored = conn.execute(self.sql.event_keys, (session.id,)).fetchall()
                have = {key for key, _ in stored}
                new = [(k, n) for k, n in keys if n <= seq and k not in have]
                self._chain_keys(conn, session.id, new)
            for n in copied:
                conn.execute(self.sql.insert_erasure, (session.id, n, erased[n]))
            # A row an earlier run copied whole and the source erased since is erased here
            # too, once its erasure event is here (it kept the payload, and failed verify).
            late: list[int] = []
            if erased:  # a session never erased asks nothing more
                done = {n for n, _ in conn.execute(self.sql.erasures, (session.id,)).fetchall()}
                late = [
                    n
                    for n, by in sorted(erased.items())
                    if n <= before and by <= seq and n not in done
                ]
            for n in late:
                conn.execute(self.sql.insert_erasure, (session.id, n, erased[n]))
                conn.execute(self.sql.erase_row, (b"", session.id, n))
            if late:
                self._drop_rows(conn, session.id, late)  # the search index's copy of the text
            return written, bool(late)

        written, erasing = self._write("copy_session", tx)
        if erasing:
            self._scrub()  # as erase does: the bytes leave the database's files
        return written

    def _copy_rows(self, tx: C, session_id: str, batch: list[Row]) -> None:
        """Insert a batch of copied rows and empty it."""
        if batch:
            self._cover_rows(tx, session_id, batch[-1][0])
            self._insert_rows(tx, session_id, batch)
            batch.clear()

    def erase(self, session_id: str, seqs: Sequence[int], *, by: str, reason: str) -> Erasure:
        """Remove the payload bytes and salt of events of a v2 session (``Archive.erase``).

        In one transaction: the ``erasure`` event ``{"type": "erasure", "seqs", "by",
        "reason"}`` is appended (chained like any event; its ``created_at`` says when), with
        ``kept`` when it erases tool calls or results: for each, its ``seq``, ``type`` and
        call id (``id`` of a call, ``toolCallId`` of a result), what pairing needs, never
        content (docs/log-format.md, Erasure); one erasures row per seq names it, and each
        row's payload becomes ``b""`` and its salt NULL, which the schema's trigger admits
        only for a row with an erasures row. Then the backend scrubs its files
        (:meth:`Backend._scrub`).

        Raises:
            SessionNotFound: no such session.
            InputError: nothing to erase, a blank ``reason``, the session is v1, a seq is
                not an event of it, is already erased, is an erasure event, or has a trace
                row.
        """
        check_text("erasure author", by)
        check_reason("erasure reason", reason)
        wanted = sorted(set(seqs))
        if not wanted:
            raise InputError("name at least one seq to erase")

        def tx(conn: C) -> Erasure:
            kept = self._check_erasable(conn, session_id, wanted)
            payload = {"type": ERASURE, "seqs": wanted, "by": by, "reason": reason}
            payload |= {"kept": kept} if kept else {}
            encoded = [Encoded(encode_payload(payload), None, None, None)]
            appended = self._append(conn, session_id, encoded, None, False)[0]
            for seq in wanted:
                conn.execute(self.sql.insert_erasure, (session_id, seq, appended.seq))
                conn.execute(self.sql.erase_row, (b"", session_id, seq))
            self._drop_rows(conn, session_id, wanted)  # the search index's copy of the text
            return Erasure(session_id, wanted, appended.seq)

        done = self._write("erase", tx)
        self._scrub()
        return done

    def _check_erasable(
        self, conn: C, session_id: str, seqs: Sequence[int]
    ) -> list[dict[str, object]]:
        """Raise ``InputError`` (or ``SessionNotFound``) unless every seq can be erased;
        return what the erasure event keeps of the tool calls and results among them."""
        head = conn.execute(self.sql.head_version, (session_id,)).fetchone()
        if head is None:
            raise SessionNotFound(session_id)
        if head[2] != 2:
            raise InputError(
                f"session {session_id} is chained as v1: its chain hashes the payload bytes, "
                "so they cannot be erased without breaking it (docs/log-format.md, Erasure)"
            )
        traced = {
            trace_row(row).result_seq
            for row in conn.execute(self.sql.traces, (session_id,)).fetchall()
        }
        kept: list[dict[str, object]] = []
        for seq in seqs:
            row = next(iter(self._rows(_on(conn), session_id, seq - 1, 1)), None)
            if row is None or row[0] != seq:
                raise InputError(f"session {session_id} has no event at seq {seq}")
            if row[4] is None:
                raise InputError(f"session {session_id}: seq {seq} is already erased")
            event = event_of(session_id, row)
            if event.type == ERASURE:
                raise InputError(f"session {session_id}: seq {seq} is an erasure record")
            if seq in traced:
                raise InputError(
                    f"session {session_id}: seq {seq} has a trace row, which holds its "
                    "envelope; erasing it is not supported"
                )
            key = _CALL_ID_FIELD.get(event.type or "")
            if key is not None:
                call_id = event.payload.get(key)
                kept.append({"seq": seq, "type": event.type, key: call_id})
        return kept

    def erasures(self, session_id: str) -> list[tuple[int, int]]:
        """``(seq, erasure_seq)`` of every erased event of a session, in seq order."""
        return [(seq, by) for seq, by in self._query(self.sql.erasures, (session_id,))]

    def copy_tombstone(self, stone: Tombstone) -> bool:
        """Keep a tombstone copied from another log; False when it is already here.

        Raises:
            AppendOnlyViolation: a live session here has that id.
        """
        return self._write("copy_tombstone", lambda tx: self._copy_tombstone(tx, stone))

    def event_session_ids(self) -> set[str]:
        """Every session id that has at least one event row."""
        return {row[0] for row in self._query(self.sql.event_session_ids)}


class _RowCheck:
    """Whether a copied row continues its session's chain (v1 or v2), for ``copy_session``."""

    def __init__(self, session_id: str, version: int, erased: dict[int, int]) -> None:
        self.version = version
        self.erased = erased
        self.v1 = chain_hasher(session_id)
        self.v2 = chain_hasher_v2(session_id)

    def holds(self, prev: bytes, row: Row) -> bool:
        seq, created_at, data, stored, salt, digest = row
        if self.version == 1:
            v1_row = salt is None and digest is None
            return v1_row and self.v1(prev, seq, created_at, data) == stored
        if digest is None or len(digest) != 32:
            return False
        if salt is None:  # erased: only with its erasures row, and with nothing left
            if seq not in self.erased or data != b"":
                return False
        elif payload_digest(salt, data) != digest:
            return False
        return self.v2(prev, seq, created_at, digest) == stored


def _on(conn: Any) -> Any:
    """A ``_rows`` query function running on an open transaction."""
    return lambda query, params: conn.execute(query, params).fetchall()
