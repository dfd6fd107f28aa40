"""What the layers above the log read from it, as a protocol.

Views, replay inputs and the evidence checks take a :class:`LogReader`, never a store class:
every store in :mod:`agenttrail.log.store` is one (structurally), and so is anything else that
can hand out sessions, events and trace rows. This keeps those packages from importing the
store (docs/architecture.md, Layer rules).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol

from agenttrail.model.events import Event
from agenttrail.model.sessions import Session
from agenttrail.model.traces import TraceRow

__all__ = ["LogReader"]


class LogReader(Protocol):
    """Reading a log: sessions, their events in seq order, their trace rows."""

    def get_session(self, session_id: str) -> Session:
        """The session row. Raises ``SessionNotFound``."""
        ...

    def sessions(self) -> list[Session]:
        """Every session, oldest first."""
        ...

    def read(
        self, session_id: str, *, after_seq: int = 0, limit: int | None = None
    ) -> Iterator[Event]:
        """Events with seq > ``after_seq`` in seq order, at most ``limit``."""
        ...

    def traces(self, session_id: str, *, turn_seq: int | None = None) -> list[TraceRow]:
        """A session's trace rows in result order, or only one turn's."""
        ...

    def trace(self, trace_id: int) -> TraceRow:
        """One trace row. Raises ``InputError`` when there is none with that id."""
        ...
