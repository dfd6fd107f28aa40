"""Retention: removing whole sessions past a records schedule, through the one sanctioned path.

A trace is a business record about a computation; keep it on your records schedule
(docs/specs.md, Tool-call traces: Retention and privacy). The log is append-only, so the only
removal there is is a whole session: its events, idempotency keys and trace rows go, and a
tombstone stays (session id, event count, last chain hash, time, reason), so the deletion is
itself auditable. The database refuses these deletes for a session without a tombstone.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from agenttrail.codec import normalize_timestamp
from agenttrail.errors import InputError
from agenttrail.log.store import Archive, Tombstone
from agenttrail.model import LogReader, Session

__all__ = ["due_for_removal", "retain"]


def _last_activity(store: LogReader, session: Session) -> str:
    last = next(iter(store.read(session.id, after_seq=session.head_seq - 1, limit=1)), None)
    return last.created_at if last is not None else (session.started or session.created_at)


def due_for_removal(
    store: LogReader, older_than_days: float, *, now: datetime | None = None
) -> list[Session]:
    """Sessions whose last event (or, when empty, start) is more than ``older_than_days`` old.

    Raises:
        InputError: ``older_than_days`` is negative or not a number (NaN).
    """
    if not older_than_days >= 0:  # NaN too: it compares false
        raise InputError(f"--older-than must be 0 days or more, not {older_than_days}")
    try:
        cutoff = normalize_timestamp((now or datetime.now(UTC)) - timedelta(days=older_than_days))
    except OverflowError:  # before year 1 (or infinite): no session is that old
        return []
    return [s for s in store.sessions() if _last_activity(store, s) < cutoff]


def retain(
    store: Archive,
    older_than_days: float,
    *,
    reason: str = "retention schedule",
    now: datetime | None = None,
) -> list[Tombstone]:
    """Remove every session past the schedule, each in its own transaction, with a tombstone;
    then, once, make their text leave the database's files (:meth:`Archive.scrub`).

    Returns:
        The tombstones written, one per removed session.
    """
    due = due_for_removal(store, older_than_days, now=now)
    reason = f"{reason} (older than {older_than_days:g} days)"
    stones = [store.remove_session(session.id, reason=reason) for session in due]
    if stones:
        store.scrub()
    return stones
