"""What each provider's conversation reader shares (:class:`agenttrail.formats.openai.Conversation`,
:class:`agenttrail.formats.anthropic.Conversation`): the events and warnings its builder
collects, handed over exchange by exchange so that a long live conversation does not grow in
memory (:mod:`agenttrail.ingest.capture`).
"""

from __future__ import annotations

from typing import Generic, Protocol, TypeVar

from agenttrail.model import NewEvent

__all__ = ["Collecting", "HandsOver"]


class Collecting(Protocol):
    """A format's builder: the events and warnings of its reading so far."""

    events: list[NewEvent]
    warnings: list[str]


B = TypeVar("B", bound=Collecting)


class HandsOver(Generic[B]):
    """Hands over what a builder collected since the last time."""

    builder: B

    def handed_over(self, start: int = 0) -> list[NewEvent]:
        """The events collected from position ``start`` on, removed from the builder."""
        events = self.builder.events[start:]
        del self.builder.events[start:]
        return events

    def take_warnings(self) -> list[str]:
        """The warnings since the last call (problems that did not stop the reading)."""
        warnings = list(self.builder.warnings)
        del self.builder.warnings[:]
        return warnings
