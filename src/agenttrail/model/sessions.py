"""Sessions: who and what a log is about (a session row), what to create one from, and the
rule a new session's id follows.

User identity lives here and nowhere else (docs/architecture.md, Vocabulary).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from agenttrail.errors import InputError

__all__ = [
    "SESSION_ID_MAX_CHARS",
    "SESSION_ID_RULE",
    "UNDATED",
    "UNDATED_NOTE",
    "NewSession",
    "Session",
    "check_session_id",
    "is_session_id",
]

SESSION_ID_MAX_CHARS = 200
"""Longest session id (characters): the length the store always allowed, and room for a
Claude Code subagent's ``<uuid>:agent-<id>``."""

SESSION_ID_RULE = (
    f"1 to {SESSION_ID_MAX_CHARS} characters of A-Z a-z 0-9 . _ : -, "
    "starting with a letter or a digit"
)
"""The id rule in words, as error messages and docs/log-format.md (Session ids) give it."""

_SESSION_ID = re.compile(rf"[A-Za-z0-9][A-Za-z0-9._:-]{{0,{SESSION_ID_MAX_CHARS - 1}}}")
"""Why these characters: an id is one URL path segment (``/v1/sessions/{id}``, the viewer)
and one command-line argument. ``/`` would split the segment, ``.`` and ``..`` are removed
by URL normalisation, ``%``, ``?``, ``#`` and spaces need escaping that links forget, and a
leading ``-`` reads as an option. UUIDs, the ids imports derive from files, and Claude
Code's ``<uuid>:agent-<id>`` all fit."""


UNDATED = "undated"
"""The metadata key of a session whose source gives no time at all (a ToolBench answer, an
Anthropic SDK recording), set on import: its events have the time they were imported, and
the views do not give that time as theirs (docs/log-format.md, ``created_at``). Its value
says so in words (:data:`UNDATED_NOTE`)."""

UNDATED_NOTE = "the source gives no times: each event has the time it was imported"
"""What the import writes under :data:`UNDATED`, and what the views say of such a session."""


def is_session_id(value: object) -> bool:
    """True when ``value`` is a session id a new session may have (:data:`SESSION_ID_RULE`)."""
    return isinstance(value, str) and _SESSION_ID.fullmatch(value) is not None


def check_session_id(value: object) -> str:
    """``value``, when a new session may have it as its id.

    Sessions created before the rule existed keep their ids; they are read, verified and
    appended to as before. The rule applies where a session is created: the store's
    ``create_session`` and ``append_batch(create=…)``, and so the recorder, the REST API,
    import and migrate (docs/log-format.md, Session ids).

    Raises:
        InputError: ``session id '…' does not follow the id rule: …``.
    """
    if not is_session_id(value):
        raise InputError(f"session id {value!r} does not follow the id rule: {SESSION_ID_RULE}")
    assert isinstance(value, str)
    return value


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
    """Chain hash of the last event (when empty: 32 zero bytes in v1, the session's genesis
    in v2)."""
    chain_version: int = 1
    """How the session's events are chained: 1 (payload bytes) or 2 (salted digests, session
    fields in the genesis: docs/log-format.md, Chain v2)."""

    @classmethod
    def stored(
        cls,
        id: str,
        title: str | None,
        agent: str | None,
        user: str | None,
        workspace: str | None,
        started: str | None,
        metadata: dict[str, Any],
        created_at: str,
        head_seq: int,
        head_hash: bytes,
        chain_version: int,
    ) -> Session:
        """``Session(...)`` with these fields, made for the store's reads without the frozen
        dataclass's ``__init__`` (``object.__setattr__`` per field): a list of 10,000
        sessions makes one per row (as :meth:`agenttrail.model.Event.stored`)."""
        session = object.__new__(cls)
        session.__dict__.update(
            id=id,
            title=title,
            agent=agent,
            user=user,
            workspace=workspace,
            started=started,
            metadata=metadata,
            created_at=created_at,
            head_seq=head_seq,
            head_hash=head_hash,
            chain_version=chain_version,
        )
        return session

    @property
    def dated(self) -> bool:
        """False for a session whose source gives no times (:data:`UNDATED`): its events'
        ``created_at`` is when they were imported, not when they happened."""
        return UNDATED not in self.metadata

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
    chain_version: int = 2
    """The chain the session is written with: 2 for every new session; 1 only to reproduce
    a v1 chain (an import of a v1 export, a copy by ``migrate``)."""
