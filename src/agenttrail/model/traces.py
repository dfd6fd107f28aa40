"""Trace rows as records: the evidence kept for one tool call whose result is an envelope.

How they are made and checked is :mod:`agenttrail.evidence.traces`; this module only says
what a row holds, so that the store can keep rows without knowing about envelopes.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["NewTrace", "TraceRow"]


@dataclass(frozen=True)
class NewTrace:
    """A trace row to write: evidence for one tool call whose result is an envelope."""

    session_id: str
    call_seq: int
    """Seq of the ``tool_call`` event."""
    result_seq: int
    """Seq of the ``tool_result`` event that holds the envelope."""
    turn_seq: int | None
    """Seq of the user message that began the turn (``None`` before any)."""
    tool: str
    inputs: str
    """The call's input as issued, JSON text."""
    envelope: bytes = field(repr=False)
    """The envelope's bytes, verbatim."""
    created_at: str
    record_hash: str | None
    """Our SHA-256 of the record material (hex); ``None`` when it is not I-JSON."""
    stated_hash: str | None
    status: str
    """``verified``, ``mismatch``, ``computed`` or ``invalid``."""
    detail: str
    spec: str
    """The envelope spec used, JSON text."""


@dataclass(frozen=True)
class TraceRow(NewTrace):
    """A stored trace row; ``id`` is its number in the store."""

    id: int = 0
