"""Copying a log from one database to another (``agenttrail migrate``), chains intact.

Every session is copied with its events — the same seq, ``created_at``, payload bytes and
chain hashes, so the chain verifies on the target without being rebuilt — its idempotency
keys and its trace rows; every tombstone is copied too, so a removed session id stays
removed. Each session is one transaction on the target. The copy goes through the store
contract only (:meth:`LogStore.copy_session`), so it works between any two backends: SQLite
to PostgreSQL when a team outgrows one machine, and back.

Running it again copies only what is new: a session already on the target is extended from
its head when the source's chain passes through that head, and refused when it does not.
Each source session is verified before it is copied, as ``agenttrail verify`` verifies it
(its events, trace rows and keys), and so are the source's own rows, so a source changed by
hand is refused even when the target already holds every one of its events: a copy would
chain what was changed anew.
Trace rows are numbered by the target (their ids may differ); they join their session by
``(session_id, call_seq, result_seq)``, which are copied as they are.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from agenttrail.errors import ChainBroken, InputError
from agenttrail.evidence.audit import audit
from agenttrail.evidence.traces import verify_traces
from agenttrail.log.chain import ChainReader, log_chain_problems, verify
from agenttrail.log.store import Archive, EventLog, LogStore
from agenttrail.model import SESSION_ID_RULE, Session, is_session_id

__all__ = ["MigratedSession", "MigrationReport", "MigrationSource", "migrate"]


class MigrationSource(EventLog, Archive, ChainReader, Protocol):
    """What ``migrate`` reads from the log it copies: sessions, their events and keys, trace
    rows and tombstones, and the chain it verifies before copying. Every ``LogStore`` is one."""


@dataclass(frozen=True)
class MigratedSession:
    """What ``migrate`` did for one session, and how the copy verified."""

    session_id: str
    head_seq: int
    """The session's events on the target after the copy (its head seq)."""
    events: int
    """Events written now (0 when the target already had them all)."""
    traces: int
    """Trace rows written now."""
    problem: str | None = None
    """Why the copy does not verify on the target (chain or trace rows), or ``None``."""

    @property
    def ok(self) -> bool:
        """True when the copy verifies on the target."""
        return self.problem is None


@dataclass(frozen=True)
class MigrationReport:
    """Every session copied, and the tombstones."""

    sessions: list[MigratedSession]
    tombstones: int
    """Tombstones written now."""

    @property
    def ok(self) -> bool:
        """True when every copied session verifies on the target."""
        return all(s.ok for s in self.sessions)


def migrate(source: MigrationSource, target: LogStore) -> MigrationReport:
    """Copy every session and tombstone of ``source`` into ``target``, then verify the copies.

    Each session is copied up to its head as read when its turn comes (appends made later are
    left for the next run) and verified on the target with the same checks as ``agenttrail
    verify``: the chain (docs/log-format.md) and the trace rows against the log.

    Args:
        source: the log to copy from; only read.
        target: the log to copy into (created on first use, like any log).

    Returns:
        One :class:`MigratedSession` per source session, in creation order, and the count of
        tombstones written.

    Raises:
        InputError: source and target are the same log, a session on the target is not a
            prefix of the source's (another log's session under the same id), a session to
            create on the target has an id that does not follow the id rule
            (``agenttrail.model.SESSION_ID_RULE``), or a session retention removed from the
            source is live on the target (both refused before anything is copied).
        ChainBroken: a source session does not verify, its events, its trace rows or its
            keys (``agenttrail verify`` on the source says the same): the sessions before it
            are copied; or the source's own rows (tombstones, log keys) do not: nothing is.
        SessionExists: a session id was removed from the target by retention.
        AppendOnlyViolation: a source tombstone names a live session on the target.
    """
    if source.url == target.url:
        raise InputError(f"--from and --to are the same database ({source.url})")
    own = log_chain_problems(source)  # a tombstone changed by hand would be copied, chained anew
    if own:
        raise ChainBroken(None, None, f"{own[0]} (on the source; nothing was copied)")
    sessions = source.sessions()
    for session in sessions:
        # A session made before the id rule cannot be created on the target: its chain
        # hashes cover its id. Refused before anything is copied, not halfway through.
        if not is_session_id(session.id) and target.head(session.id) is None:
            raise InputError(
                f"session id {session.id!r} does not follow the id rule: {SESSION_ID_RULE} "
                f"(it stays readable in {source.url}; nothing was copied)"
            )
    stones = source.tombstones()
    for stone in stones:
        # Removed from the source by retention after an earlier copy: refused before
        # anything is copied, not after the sessions (the copy cannot hold both).
        if target.head(stone.session_id) is not None:
            raise InputError(
                f"session {stone.session_id} was removed from {source.url} by retention "
                f"({stone.reason}) but is in {target.url}: remove it there first (the same "
                "agenttrail retain, with --db naming the target); nothing was copied"
            )
    copied = [_copy_session(source, target, session) for session in sessions]
    tombstones = sum(target.copy_tombstone(stone) for stone in stones)
    verdicts = {v.session_id: v for v in verify(target, [m.session_id for m in copied])}
    checked: list[MigratedSession] = []
    for m in copied:
        verdict = verdicts[m.session_id]
        problem = None if verdict.ok else f"seq {verdict.bad_seq}: {verdict.reason}"
        if problem is None:
            problem = next(iter(verify_traces(target, m.session_id)), None)
        checked.append(
            MigratedSession(m.session_id, m.head_seq, m.events, m.traces, problem=problem)
        )
    return MigrationReport(checked, tombstones)


def _copy_session(source: MigrationSource, target: LogStore, session: Session) -> MigratedSession:
    (verdict,) = audit(source, [session.id])  # all agenttrail verify checks, not the events'
    if not verdict.chain_ok:
        raise ChainBroken(session.id, verdict.bad_seq, f"{verdict.reason} (on the source)")
    if verdict.trace_problems:  # its trace rows or keys: a copy would chain them anew
        raise ChainBroken(session.id, None, f"{verdict.trace_problems[0]} (on the source)")
    head = target.head(session.id)
    start = 0
    if head is not None:
        start, start_hash = head
        if start > session.head_seq:
            raise InputError(
                f"session {session.id}: the target has {start} events, the source only "
                f"{session.head_seq}; not the same session"
            )
        if start:
            ours = next(iter(source.read(session.id, after_seq=start - 1, limit=1)), None)
            if ours is None or ours.hash != start_hash:
                raise InputError(
                    f"session {session.id}: the target's chain differs from the source's at "
                    f"seq {start}; not the same session"
                )
    rows = (
        (e.seq, e.created_at, e.data, e.hash, e.salt, e.digest)
        for e in source.read(session.id, after_seq=start, limit=session.head_seq - start)
    )
    written = target.copy_session(
        session, rows, keys=source.event_keys(session.id), erasures=source.erasures(session.id)
    )
    traces = target.add_traces(source.traces(session.id))
    return MigratedSession(session.id, start + written, written, len(traces))
