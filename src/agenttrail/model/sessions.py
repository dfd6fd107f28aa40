"""Sessions: who and what a log is about (a session row), and what to create one from.

User identity lives here and nowhere else (docs/architecture.md, Vocabulary).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["NewSession", "Session"]


@dataclass(frozen=True)
class Session:
    """One session row: who and what the log is about, and its chain head."""

    id: str
    """Session id (text, unique in the store)."""
    title: str | None
    """Human title, e.g. the first user message."""
    agent: str | None
    """Agent name (``claude-code``, ``harvey``)."""
    user: str | None
    """User name. User identity lives here and nowhere else."""
    workspace: str | None
    """Working directory or project the session ran in."""
    started: str | None
    """When the session started (``created_at`` form), if known."""
    metadata: dict[str, Any]
    """Anything else the source said about the session."""
    created_at: str
    """When the row was written."""
    head_seq: int
    """Seq of the last event (0 when empty)."""
    head_hash: bytes = field(repr=False)
    """Chain hash of the last event (32 zero bytes when empty)."""

    def record(self) -> dict[str, Any]:
        """The session as JSON (``agenttrail sessions --json``, the REST API): its fields,
        with its head as ``events`` (the head seq) and ``head`` (the head hash in hex)."""
        return {
            "id": self.id,
            "title": self.title,
            "agent": self.agent,
            "user": self.user,
            "workspace": self.workspace,
            "started": self.started,
            "events": self.head_seq,
            "head": self.head_hash.hex(),
            "metadata": self.metadata,
        }


@dataclass(frozen=True)
class NewSession:
    """What to create when a session does not exist yet; ``id`` ``None`` draws a UUID."""

    id: str | None = None
    title: str | None = None
    agent: str | None = None
    user: str | None = None
    workspace: str | None = None
    started: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
