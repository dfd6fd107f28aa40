"""Runs: a subagent's piece of work, started by a tool call and finished by its result.

What makes a run is said in :mod:`agenttrail.views.transcript` (Runs); this module reads the
ids that name one from payloads and holds a finished run's seqs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["Run", "agent_id_of", "run_id_of"]


def run_id_of(result: dict[str, Any]) -> str | None:
    """The run a ``tool_result`` payload finishes: the ``agentId`` in its ``toolUseResult``
    (Claude Code's Task/Agent tool) or in a mapping ``output``; ``None`` for other results."""
    for holder in (result.get("toolUseResult"), result.get("output")):
        if isinstance(holder, dict):
            agent = holder.get("agentId")
            if isinstance(agent, str) and agent:
                return agent
    return None


def agent_id_of(payload: dict[str, Any]) -> str | None:
    """The subagent an event belongs to: its ``agentId`` (Claude Code sidechain lines)."""
    agent = payload.get("agentId")
    return agent if isinstance(agent, str) and agent else None


@dataclass
class Run:
    """A finished subagent run: the call that started it, the result that ended it, its events."""

    agent_id: str
    """The subagent's id (``agentId``)."""
    call_seq: int | None
    """The seq of the call that started the run; ``None`` when its result pairs with none."""
    result_seq: int
    """The seq of the result that finished the run; the card sits here."""
    members: list[int] = field(default_factory=list)
    """Seqs of the run's own events (those carrying its ``agentId``), in seq order."""

    def seqs(self) -> set[int]:
        """Every seq the card stands for: call, result and members."""
        out = {self.result_seq, *self.members}
        if self.call_seq is not None:
            out.add(self.call_seq)
        return out
