"""Whether a session is live: something is writing it now, or wrote it a moment ago.

The viewer marks such a session ``● live`` (docs/viewer.md, Live). A session is live when its
last event is not a ``session_end`` and either a turn holds its turn lock (a lease in force:
an agent turn in flight, :class:`agenttrail.log.store.TurnLocks`) or its last event was
written less than :data:`RECENT_S` ago. An import of a session that ended long ago is
therefore not live: its events keep the times they were written at, not the import's.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Protocol

__all__ = ["RECENT_S", "TurnReader", "is_live"]

RECENT_S = 300.0
"""How recent a session's last event must be for the session to count as live (seconds).
Five minutes: longer than an agent's usual pause between steps (a model call, a tool run), far
shorter than the hours or days after which a session is read back."""


class TurnReader(Protocol):
    """The part of the log's turn lock this needs (``LogStore.current_turn``)."""

    def current_turn(self, session_id: str) -> object | None:
        """The lease in force, or ``None`` when no turn is in flight."""
        ...


def is_live(*, last_event_at: str | None, ended: bool, writing: bool, now: datetime) -> bool:
    """Whether a session is live (the rule in this module's docstring).

    Args:
        last_event_at: ``created_at`` of its last event (RFC 3339), ``None`` when it has none.
        ended: its last event is a ``session_end``.
        writing: a turn holds its turn lock now.
        now: the current time (timezone-aware).
    """
    if ended:
        return False
    if writing:
        return True
    if last_event_at is None:
        return False
    written = datetime.fromisoformat(last_event_at.replace("Z", "+00:00"))
    return now - written < timedelta(seconds=RECENT_S)
